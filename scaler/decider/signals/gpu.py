"""GPU capacity: how many replicas can exist without leaving pods Pending.

    bound    = current - pending          (replicas whose pods hold GPUs on a node)
    capacity = bound + gpu_schedulable + maxPendingReplicas
    queue    = kueue_quota                (under Kueue: admitted + what the ClusterQueue's free quota holds)

``gpu_schedulable`` comes from the node inventory (free GPUs that fit a whole replica,
node by node). Pods that are still Pending are not bound, so they do not consume
inventory; counting them in ``current`` again would count them twice. Replicas that
are starting (bound, not Ready) are already in ``bound``: capacity on its way.

Under Kueue a replica's pod waits behind the ``kueue.x-k8s.io/admission`` scheduling gate until
its ClusterQueue has quota (``scaler.inventory.kueue``): a gated pod is Pending, holds no GPU and
is no capacity on its way, and past the quota it stays gated as surely as past full nodes.
*Example*: 4 admitted replicas of 2 GPUs and 4 GPUs of quota free: the queue admits 6.
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.decider.spec import DeciderSpec
from scaler.inputs import Input
from scaler.model import Observation


@dataclass(frozen=True, slots=True)
class GpuCapacity:
    """How many replicas the GPUs allow (None when unknown), and how that was counted."""

    replicas: int | None  # None: unknown
    reason: str


def capacity(obs: Observation, spec: DeciderSpec) -> GpuCapacity:
    """The GPU capacity in replicas (the module docstring's formula), or unknown and why."""
    if obs.gpu_schedulable_replicas is None:
        why = obs.missing.get(Input.GPU_SCHEDULABLE_REPLICAS, "no inventory")
        return GpuCapacity(None, f"GPU inventory unknown ({why})")
    if obs.current_replicas is None:
        why = obs.missing.get(Input.CURRENT_REPLICAS, "unknown")
        return GpuCapacity(None, f"current replicas unknown ({why})")
    pending = min(obs.pending_replicas, obs.current_replicas)
    bound = obs.current_replicas - pending
    total = bound + obs.gpu_schedulable_replicas + spec.max_pending_replicas
    return GpuCapacity(
        total,
        f"{bound} bound + {obs.gpu_schedulable_replicas} schedulable"
        f" + {spec.max_pending_replicas} Pending allowed (maxPendingReplicas)",
    )


def queue_capacity(obs: Observation) -> GpuCapacity | None:
    """What the Kueue queue admits, in replicas (None when Kueue does not admit the pods), or
    unknown and why."""
    if obs.kueue_quota_replicas is not None:
        return GpuCapacity(obs.kueue_quota_replicas, obs.kueue_quota_reason or "Kueue quota")
    why = obs.missing.get(Input.KUEUE_QUOTA_REPLICAS)
    return None if why is None else GpuCapacity(None, f"Kueue quota unknown ({why})")
