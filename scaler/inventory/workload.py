"""One scaled workload's state: its replicas counted from its pods, and the GPU room for more. Pure.

    current  = max(spec.replicas, live pods)           live: matching, not deleting, not terminal
    ready    = live pods whose Ready condition is True
    starting = live pods bound to a node, not Ready
    pending  = live pods not bound to a node + max(0, spec.replicas - live pods)
    gated    = pending pods held by Kueue's ``kueue.x-k8s.io/admission`` scheduling gate

*Example*: spec.replicas 5 and four live pods (3 Ready, 1 bound and starting): current 5,
ready 3, starting 1, pending 1 (not yet created); the GPU fit (``scaler.inventory.fit``, with
DRA's devices) says how many more would find room, and under Kueue its queue's quota how many
it admits (``scaler.inventory.kueue``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from scaler.decider.coldstart import NONE as NO_COLD_START
from scaler.decider.coldstart import ColdStart, PodTimes
from scaler.decider.coldstart import measure as measure_cold_start
from scaler.inventory.dra import DeviceRequest, DraInventory
from scaler.inventory.fit import NodeFit, schedulable_replicas
from scaler.inventory.kueue import KueueInventory, admission
from scaler.inventory.objects import Deployment, Node, Pod, ReplicaRequirement
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
    gated_replicas: int = 0  # pending pods held by Kueue's admission gate (no quota, no node yet)
    kueue_managed: bool = False  # Kueue admits the pods (a queue-name label, or gated pods)
    kueue_quota_replicas: int | None = None  # replicas the queue admits; None: not managed, or unknown
    kueue_explanation: str = ""  # how that was counted, or why it is unknown
    # What scaler.inert joins Prometheus' series against: the Deployment, its Ready pods' names,
    # and every live pod of the namespace (the endpoints a router may name).
    deployment: str = ""
    ready_pods: tuple[str, ...] = ()
    namespace_pods: frozenset[str] = frozenset()


def _resolve_claims(
    requirement: ReplicaRequirement, namespace: str, dra: DraInventory | None
) -> tuple[ReplicaRequirement, str]:
    """The requirement with its ResourceClaimTemplates' requests, and why any cannot be counted ("")."""
    if not requirement.claim_templates:
        return requirement, ""
    found = dra.templates if dra is not None else {}
    resolved: list[DeviceRequest] = []
    problems: list[str] = []
    for name in requirement.claim_templates:
        template = found.get((namespace, name))
        if template is None:
            why = f" (DRA objects cannot be read: {dra.problem})" if dra is not None and dra.problem else ""
            problems.append(f"ResourceClaimTemplate {namespace}/{name} not found{why}")
            continue
        resolved += template.requests
        problems += [f"{name}: {r.problem}" for r in template.requests if r.problem]
    return requirement.with_claims(tuple(resolved)), "; ".join(problems)


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
    dra: DraInventory | None = None,
    kueue: KueueInventory | None = None,
) -> WorkloadState | Unknown:
    """Count the Deployment's replicas among ``pods`` (its namespace) and fit more on ``nodes``.

    ``gpu_pods`` are the pods holding extended resources anywhere in the cluster (any
    superset works; pods without requests are ignored). ``gpus_per_replica_override``
    replaces the template's GPU count (on ``default_gpu_resource`` when the template
    requests none). The cold start is measured over the Deployment's pods that became
    Ready, and ``remembered`` ones (pods measured earlier and gone since; a pod present
    now wins over its remembered times), per ``scaler.decider.coldstart``. ``dra`` holds the devices DRA
    publishes, what the claims hold and the ResourceClaimTemplates, ``kueue`` the queues; a
    GPU room that cannot be counted (no node offers the GPUs either way) is None, never 0.
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
    gated = sum(1 for p in live if not p.bound and p.gated_by_kueue)
    missing = max(0, deployment.replicas - len(live))
    current = max(deployment.replicas, len(live))
    counts = (
        f"{where}: {current} current ({ready} ready, {starting} starting,"
        f" {unbound + missing} pending{f' incl. {missing} not yet created' if missing else ''}"
        f"{f', {gated} held by Kueue' if gated else ''})"
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

    requirement, claim_note = _resolve_claims(requirement, deployment.namespace, dra)
    queue = admission(
        deployment.namespace,
        deployment.queue_name,
        len(live) - gated,
        gated,
        requirement.gpus,
        kueue or KueueInventory(problem="Kueue's queues not read"),
        through_claims=bool(requirement.claims),
    )

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
        gated_replicas=gated,
        kueue_managed=queue.managed,
        kueue_quota_replicas=queue.replicas,
        kueue_explanation=queue.explanation,
        deployment=deployment.name,
        ready_pods=ready_pods,
        namespace_pods=frozenset(
            p.name for p in pods if p.namespace == deployment.namespace and not p.terminal
        ),
    )
    if claim_note:
        return replace(unassessed, explanation=f"{counts}; GPU room unknown: {claim_note}")
    if not requirement.requests_gpus:
        return unassessed
    fit = schedulable_replicas(nodes, gpu_pods, requirement, dra)
    counted = replace(
        unassessed,
        gpus_per_replica=requirement.gpus_per_replica,
        gpu_resource=requirement.gpu_resource,
        nodes=fit.nodes,
    )
    if not fit.countable:
        return replace(counted, explanation=f"{counts}{note}; {fit.uncounted}")
    return replace(
        counted, gpu_schedulable_replicas=fit.replicas, explanation=f"{counts}{note}; {fit.explanation}"
    )
