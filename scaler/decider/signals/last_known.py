"""Last known demand: while a demand input is missing, the target does not fall below the last decision.

    last_known = the largest demand proposal (queue, load) of the last refresh whose inputs
                 were complete, while any of them is missing now

*Example*: Prometheus stops answering after a decision of 7: the queue and load signals
abstain, and last_known proposes 7 until the inputs are back, so a missing source never
makes the target fall.
"""

from __future__ import annotations

from scaler.model import Proposal, Signal


def propose_last_known(previous: int | None, missing: list[str]) -> Proposal:
    """While a demand input is missing, the target does not fall below the last decision."""
    if not missing:
        return Proposal(Signal.LAST_KNOWN, None, "all inputs present")
    if previous is None:
        return Proposal(Signal.LAST_KNOWN, None, f"missing {', '.join(missing)}; no earlier decision to hold")
    return Proposal(
        Signal.LAST_KNOWN,
        previous,
        f"missing {', '.join(missing)}: holding the last target {previous}",
    )
