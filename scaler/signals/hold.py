"""Scale-down hold: keep what the forecast needs within one cold start.

    hold  = ceil(max busy over [now, now + coldStartSeconds] / usable)
    hold  = max(hold, current replicas)                   while the engine is still learning

A replica released now cannot come back sooner than one cold start, so the hold
keeps every replica the forecast says will be needed within that time. A new target
(or one whose forecast has not been checked against what followed often enough) knows
nothing yet about the traffic: it keeps the replicas the workload has, so a lull in its
first minutes does not give away capacity that a cold start must then bring back.
*Example*: a restarted scaler without history sees 6 replicas serving a light first
minute; the token signal asks for 4, the hold keeps 6 until the forecast has been
scored eight times (with a 180 s cold start, about seven minutes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scaler.model import Proposal, Signal
from scaler.signals import ceil_replicas
from scaler.signals.tokens import TokenDemand

if TYPE_CHECKING:
    from scaler.signals.context import SignalInputs


def propose_hold(
    token_demand: TokenDemand | None, lead_s: float, learning: str | None, earned: int | None
) -> Proposal:
    """``learning``: why the engine is still learning (None once it is not); ``earned``: the
    replicas it keeps meanwhile (the engine's earned floor)."""
    keep = earned if (learning is not None and earned) else None
    if token_demand is None:
        if keep is None:
            return Proposal(Signal.HOLD, None, "no token forecast to hold on")
        return Proposal(Signal.HOLD, keep, f"{learning}: keeping {keep} replicas")
    replicas = ceil_replicas(token_demand.replicas_peak)
    reason = (
        f"forecast need peaks at {token_demand.peak_within_horizon:.2f} replicas of capacity"
        f" within the next {lead_s:g}s"
    )
    if keep is not None and keep > replicas:
        replicas, reason = keep, f"{learning}: keeping {keep} replicas ({reason})"
    return Proposal(Signal.HOLD, replicas, reason, {"busy_replicas_peak": token_demand.peak_within_horizon})


def from_inputs(inputs: SignalInputs) -> Proposal:
    """The hold signal on the table's one signature."""
    return propose_hold(inputs.token_demand, inputs.horizon_s, inputs.learning, inputs.earned)
