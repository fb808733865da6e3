"""Floor: never fewer than ``minReplicas`` (at least 1: never zero).

    floor = minReplicas

*Example*: ``minReplicas: "2"`` proposes 2 at every refresh, whatever the load: the
cold start on the next request is what a floor of zero would cost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scaler.config import TargetPolicy
from scaler.model import Proposal, Signal

if TYPE_CHECKING:
    from scaler.signals.context import SignalInputs


def propose_floor(policy: TargetPolicy) -> Proposal:
    """The floor's proposal: ``minReplicas``, whatever the load."""
    return Proposal(Signal.FLOOR, policy.min_replicas, f"minReplicas={policy.min_replicas}")


def from_inputs(inputs: SignalInputs) -> Proposal:
    """The floor signal on the table's one signature."""
    return propose_floor(inputs.policy)
