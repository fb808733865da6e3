"""Floor and scale-down hold.

    floor = minReplicas                                   (>= 1: never zero)
    hold  = ceil(max busy over [now, now + coldStartSeconds] / targetUtilization)

A replica released now cannot come back sooner than one cold start, so the hold
keeps every replica the forecast says will be needed within that time.
"""

from __future__ import annotations

from scaler.config import TargetPolicy
from scaler.model import Proposal, Signal
from scaler.signals import ceil_replicas
from scaler.signals.tokens import TokenDemand


def propose_floor(policy: TargetPolicy) -> Proposal:
    return Proposal(Signal.FLOOR, policy.min_replicas, f"minReplicas={policy.min_replicas}")


def propose_hold(token_demand: TokenDemand | None, policy: TargetPolicy) -> Proposal:
    if token_demand is None:
        return Proposal(Signal.HOLD, None, "no token forecast to hold on")
    replicas = ceil_replicas(token_demand.peak_within_horizon / policy.target_utilization)
    return Proposal(
        Signal.HOLD,
        replicas,
        f"forecast need peaks at {token_demand.peak_within_horizon:.2f} replicas of GPU time"
        f" within the next {policy.cold_start_seconds:g}s",
        {"busy_replicas_peak": token_demand.peak_within_horizon},
    )


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
