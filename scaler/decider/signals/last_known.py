"""Last known demand: while a demand input is missing, the target does not fall below the last decision.

    last_known = the largest demand proposal (queue, load) of the last refresh whose inputs
                 were complete, while any of them is missing now

*Example*: Prometheus stops answering after a decision of 7: the queue and load signals
abstain, and last_known proposes 7 until the inputs are back, so a missing source never
makes the target fall.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from scaler.decider.spec import DeciderSpec
from scaler.inputs import Input
from scaler.model import Observation, Proposal, Signal

# The inputs demand is read from. The queue always counts; the prompt rate counts once a prompt
# capacity is configured and the running count once a generation capacity is (the configuration
# says the engine reads them); any of them counts once it has been seen for this target (an
# engine that never exports one does not depend on it). While one that counts is missing the
# load abstains and last_known holds the target.
DEMAND_INPUTS = (Input.QUEUE_WAITING, Input.PROMPT_TOKENS_PER_S, Input.REQUESTS_RUNNING, Input.REQUESTS_PER_S)
DEMAND_SIGNALS = (Signal.QUEUE, Signal.LOAD)  # the proposals the last complete demand is the largest of


@dataclass(frozen=True, slots=True)
class Inputs:
    """What this signal remembers: the demand inputs the target depends on, when they were last all
    present, and the demand they gave then."""

    seen: frozenset[str] = frozenset({Input.QUEUE_WAITING})
    complete_at: float | None = None  # Unix seconds of the last refresh with none missing
    last_demand: int | None = None  # the largest demand proposal of that refresh


def seen_in(state: Inputs, observations: list[Observation]) -> Inputs:
    """``state`` with the inputs these observations hold counted as ones the target depends on."""
    names = {n for obs in observations for n in DEMAND_INPUTS if getattr(obs, n) is not None}
    return replace(state, seen=state.seen | names)


def watch(state: Inputs, obs: Observation, spec: DeciderSpec) -> tuple[Inputs, list[str]]:
    """``state`` after ``obs``, and the demand inputs the target depends on that ``obs`` lacks
    (``DEMAND_INPUTS``)."""
    state = seen_in(state, [obs])
    expected = set(state.seen)
    if spec.prompt_tokens_per_second_per_replica is not None:
        expected.add(Input.PROMPT_TOKENS_PER_S)
    if spec.generation_tokens_per_second_per_replica is not None:
        expected.add(Input.REQUESTS_RUNNING)
    missing: list[str] = [
        str(name) for name in DEMAND_INPUTS if name in expected and getattr(obs, name) is None
    ]
    if not missing:
        state = replace(state, complete_at=obs.timestamp)
    return state, missing


def remember(state: Inputs, missing: list[str], proposals: list[Proposal]) -> Inputs:
    """``state`` with the demand this refresh's proposals asked for, where its inputs were complete."""
    asks = [p.replicas for p in proposals if p.signal in DEMAND_SIGNALS and p.replicas is not None]
    if asks and not missing:
        return replace(state, last_demand=max(asks))
    return state


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
