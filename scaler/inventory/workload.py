"""One scaled workload's state: its replicas counted from its pods, and the GPU room for more. Pure.

    current  = max(spec.replicas, live pods)           live: matching, not deleting, not terminal
    ready    = live pods whose Ready condition is True
    starting = live pods bound to a node, not Ready
    pending  = live pods not bound to a node + max(0, spec.replicas - live pods)

*Example*: spec.replicas 5 and four live pods (3 Ready, 1 bound and starting): current 5,
ready 3, starting 1, pending 1 (not yet created); the GPU fit (``scaler.inventory.fit``)
says how many more would find room.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from scaler.coldstart import NONE as NO_COLD_START
from scaler.coldstart import ColdStart, PodTimes
from scaler.coldstart import measure as measure_cold_start
from scaler.inventory.fit import NodeFit, schedulable_replicas
from scaler.inventory.objects import Deployment, Node, Pod
from scaler.inventory.quantities import DEFAULT_GPU_RESOURCE
from scaler.inventory.scaledobject import ScaledObject
from scaler.model import HpaStatus


@dataclass(frozen=True, slots=True)
class Unknown:
    """A typed absence: the state cannot be known now, and why. Callers fail open on it."""

    reason: str


@dataclass(frozen=True, slots=True)
class WorkloadState:
    """Replica counts of one scaled Deployment and the GPU room for more.

    current  = max(spec.replicas, live pods)           live: matching, not deleting, not terminal
    ready    = live pods whose Ready condition is True
    starting = live pods bound to a node, not Ready
    pending  = live pods not bound to a node + max(0, spec.replicas - live pods)

    so ``current == ready + starting + pending``. ``gpu_schedulable_replicas`` is None when
    the replica needs no GPU (the reason is in ``explanation``).
    """

    current_replicas: int
    ready_replicas: int
    starting_replicas: int
    pending_replicas: int
    gpus_per_replica: int
    gpu_resource: str | None
    gpu_schedulable_replicas: int | None
    explanation: str
    nodes: tuple[NodeFit, ...] = ()
    cold_start: ColdStart = NO_COLD_START
    pod_times: tuple[PodTimes, ...] = ()  # the measured pods, for the caller to remember
    deployment_replicas: int | None = None  # the Deployment's spec.replicas: what landed
    hpa: HpaStatus | None = None  # the HPA KEDA created for the ScaledObject, when found
    hpa_read: bool = False  # the HPAs were read: hpa None then means there is none
    scaledobject_fallback: bool = False
    # What scaler.inert joins Prometheus' series against: the Deployment, its Ready pods' names,
    # and every live pod of the namespace (the endpoints a router may name).
    deployment: str = ""
    ready_pods: tuple[str, ...] = ()
    namespace_pods: frozenset[str] = frozenset()


def workload_state(
    scaledobject: ScaledObject,
    deployment: Deployment,
    pods: Iterable[Pod],
    nodes: Iterable[Node],
    gpu_pods: Iterable[Pod],
    gpus_per_replica_override: int | None = None,
    default_gpu_resource: str = DEFAULT_GPU_RESOURCE,
    remembered: Iterable[PodTimes] = (),
    hpa: HpaStatus | None = None,
    hpa_read: bool = False,
) -> WorkloadState | Unknown:
    """Count the Deployment's replicas among ``pods`` (its namespace) and fit more on ``nodes``.

    ``gpu_pods`` are the pods holding extended resources anywhere in the cluster (any
    superset works; pods without requests are ignored). ``gpus_per_replica_override``
    replaces the template's GPU count (on ``default_gpu_resource`` when the template
    requests none). The cold start is measured over the Deployment's pods that became
    Ready, and ``remembered`` ones (pods measured earlier and gone since; a pod present
    now wins over its remembered times), per ``scaler.coldstart``.
    """
    if gpus_per_replica_override is not None and gpus_per_replica_override < 1:
        raise ValueError(f"gpus_per_replica_override must be >= 1, got {gpus_per_replica_override}")
    where = f"Deployment {deployment.namespace}/{deployment.name}"
    if deployment.problem:
        return Unknown(f"{where} cannot be assessed: {deployment.problem}")

    live = [
        p
        for p in pods
        if p.namespace == deployment.namespace
        and not p.deleting
        and not p.terminal
        and deployment.selector.matches(p.labels)
    ]
    times = {t.name: t for t in remembered}
    for p in pods:
        mine = p.namespace == deployment.namespace and deployment.selector.matches(p.labels)
        if mine and p.ready_at is not None:
            times[p.name] = PodTimes(p.name, p.created_at, p.scheduled_at, p.ready_at)
    measured = tuple(times.values())
    cold_start = measure_cold_start(measured)
    ready_pods = tuple(sorted(p.name for p in live if p.ready))
    ready = len(ready_pods)
    starting = sum(1 for p in live if p.bound and not p.ready)
    unbound = sum(1 for p in live if not p.bound and not p.ready)
    missing = max(0, deployment.replicas - len(live))
    current = max(deployment.replicas, len(live))
    counts = (
        f"{where}: {current} current ({ready} ready, {starting} starting,"
        f" {unbound + missing} pending{f' incl. {missing} not yet created' if missing else ''})"
    )

    requirement = deployment.requirement
    note = ""
    if gpus_per_replica_override is not None:
        if len(requirement.gpus) > 1:
            note = (
                f"; gpusPerReplica={gpus_per_replica_override} ignored:"
                f" the template requests several GPU resources ({requirement.gpu_resource})"
            )
        else:
            resource = next(iter(requirement.gpus), default_gpu_resource)
            requirement = requirement.with_gpus({resource: gpus_per_replica_override})
            note = f"; {gpus_per_replica_override} {resource} per replica from gpusPerReplica"

    # Without a GPU request there is no GPU room to assess; with one, the fit fills it in.
    unassessed = WorkloadState(
        current_replicas=current,
        ready_replicas=ready,
        starting_replicas=starting,
        pending_replicas=unbound + missing,
        gpus_per_replica=0,
        gpu_resource=None,
        gpu_schedulable_replicas=None,
        explanation=f"{counts}; GPU room unknown: the pod template requests no GPU"
        " and gpusPerReplica is not set",
        cold_start=cold_start,
        pod_times=measured,
        deployment_replicas=deployment.replicas,
        hpa=hpa,
        hpa_read=hpa_read,
        scaledobject_fallback=scaledobject.fallback_active,
        deployment=deployment.name,
        ready_pods=ready_pods,
        namespace_pods=frozenset(
            p.name for p in pods if p.namespace == deployment.namespace and not p.terminal
        ),
    )
    if not requirement.gpus:
        return unassessed
    fit = schedulable_replicas(nodes, gpu_pods, requirement)
    return replace(
        unassessed,
        gpus_per_replica=requirement.gpus_per_replica,
        gpu_resource=requirement.gpu_resource,
        gpu_schedulable_replicas=fit.replicas,
        explanation=f"{counts}{note}; {fit.explanation}",
        nodes=fit.nodes,
    )
