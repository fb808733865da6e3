"""Floor: never fewer than ``minReplicas`` (at least 1: never zero).

    floor = minReplicas

*Example*: ``minReplicas: "2"`` proposes 2 at every refresh, whatever the load: the
cold start on the next request is what a floor of zero would cost.
"""

from __future__ import annotations

from scaler.decider.spec import DeciderSpec
from scaler.model import Proposal, Signal


def propose_floor(spec: DeciderSpec) -> Proposal:
    """The floor's proposal: ``minReplicas``, whatever the load."""
    return Proposal(Signal.FLOOR, spec.min_replicas, f"minReplicas={spec.min_replicas}")
