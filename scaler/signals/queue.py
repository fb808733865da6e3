"""Queue signal: replicas so that no replica has more than ``targetQueuePerReplica`` waiting.

    queue = ceil(waiting / targetQueuePerReplica)

This is the waiting requests beyond what the replicas absorb at the target, expressed
as an absolute count: ``ready + ceil((waiting - ready * target) / target)`` whenever
there is an excess. Being absolute, it counts replicas that are still starting as
capacity on its way: 100 waiting at 10 per replica asks for 10 whether 5 or 10 of
them are Ready, so scale-ups do not stack while pods start.
"""

from __future__ import annotations

from scaler.model import Proposal, Signal
from scaler.signals import ceil_replicas


def propose(waiting: float | None, target_per_replica: float, missing_reason: str | None = None) -> Proposal:
    if waiting is None:
        why = missing_reason or "no data"
        return Proposal(Signal.QUEUE, None, f"queue depth unknown ({why})")
    replicas = ceil_replicas(waiting / target_per_replica)
    return Proposal(
        Signal.QUEUE,
        replicas,
        f"{waiting:g} waiting at {target_per_replica:g} per replica",
        {"queue_waiting": waiting},
    )
