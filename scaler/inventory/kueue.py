"""Kueue (kueue.x-k8s.io): the quota a ClusterQueue has left for more replicas. Pure.

Where a namespace's workloads are admitted by Kueue, a pod of a new replica is created with the
``kueue.x-k8s.io/admission`` scheduling gate and stays Pending, unscheduled, until its
ClusterQueue (through the LocalQueue the pod's ``kueue.x-k8s.io/queue-name`` label names) has
quota for it: its nominal quota, plus what it may borrow from the unused quota of the
ClusterQueues in its cohort. Per flavor f and GPU resource r of the ClusterQueue q::

    guaranteed(c) = nominal(c) - lendingLimit(c)            (nominal(c) without a lendingLimit: 0)
    pool          = sum over the cohort's queues c of (nominal(c) - guaranteed(c))       lendable quota
    drawn         = sum over the cohort's queues c of max(0, used(c) - guaranteed(c))    taken from it
    free(q)       = max(0, guaranteed(q) - used(q)) + max(0, pool - drawn)
    free(q)       = min(free(q), nominal(q) + borrowingLimit(q) - used(q))              (with a limit)
    room(q)       = sum over flavors f of  min over r of  floor(free(q, f, r) / need(r))

``used`` is ``status.flavorsReservation`` (the quota workloads hold, admitted or reserving),
else ``status.flavorsUsage``. Without a cohort the pool is q's own unused nominal quota.

*Example*: q has 8 GPUs nominal, 8 used, in a cohort with p (8 nominal, 2 used, no limits):
pool 16, drawn 8 + 2 = 10, free(q) = 0 + 6; a replica of 2 GPUs: room 3. With
``borrowingLimit: 4`` on q: min(6, 8 + 4 - 8) = 4, room 2.

Not modelled: hierarchical cohorts (the Cohort object and its parents), fair sharing and
preemption, admission checks (e.g. ProvisioningRequest), Kueue's DRA device-class mappings and
every resource other than the GPU one (CPU and memory quotas can bind first).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import Any

from scaler.kubejson import as_items, as_mapping, as_str, as_strings
from scaler.quantity import parse_quantity

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # the LocalQueue a pod (or its Deployment) is submitted to
ADMISSION_GATE = "kueue.x-k8s.io/admission"  # the scheduling gate a pod waits behind for quota
DEFAULT_QUEUE = "default"  # the LocalQueue Kueue submits to when a managed pod names none
QuotaKey = tuple[str, str]  # (flavor, resource)


@dataclass(frozen=True, slots=True)
class Quota:
    """One flavor's quota of one resource in a ClusterQueue."""

    flavor: str
    resource: str
    nominal: Fraction
    borrowing_limit: Fraction | None = None  # None: no limit
    lending_limit: Fraction | None = None  # None: all of nominal may be lent

    @property
    def guaranteed(self) -> Fraction:
        """The part no other queue may borrow: ``nominal - lendingLimit`` (0 without a limit)."""
        if self.lending_limit is None:
            return Fraction(0)
        return max(Fraction(0), self.nominal - self.lending_limit)


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    """A ClusterQueue as the quota needs it: cohort, quotas, what is used, whether it admits at all."""

    name: str
    cohort: str = ""
    quotas: tuple[Quota, ...] = ()
    used: Mapping[QuotaKey, Fraction] = field(default_factory=dict)
    stop_policy: str = "None"

    def __post_init__(self) -> None:
        object.__setattr__(self, "used", MappingProxyType(dict(self.used)))

    def quota(self, flavor: str, resource: str) -> Quota | None:
        """The quota of ``resource`` in ``flavor``, or None when the queue does not cover it."""
        return next((q for q in self.quotas if q.flavor == flavor and q.resource == resource), None)

    @property
    def flavors(self) -> tuple[str, ...]:
        """The flavors of the queue, in its order."""
        return tuple(dict.fromkeys(q.flavor for q in self.quotas))


def _usage(raw: Any) -> dict[QuotaKey, Fraction]:
    out: dict[QuotaKey, Fraction] = {}
    for flavor in as_items(raw):
        for resource in as_items(flavor.get("resources")):
            total = parse_quantity(resource.get("total", 0))
            if total is not None:
                out[(as_str(flavor.get("name")), as_str(resource.get("name")))] = total
    return out


def clusterqueue_from_json(obj: Mapping[str, Any]) -> ClusterQueue:
    """A ClusterQueue (kueue.x-k8s.io v1beta1 ``cohort``, or v1beta2 ``cohortName``) from the API's JSON."""
    meta, spec, status = (
        as_mapping(obj.get("metadata")),
        as_mapping(obj.get("spec")),
        as_mapping(obj.get("status")),
    )
    quotas = []
    for group in as_items(spec.get("resourceGroups")):
        covered = set(as_strings(group.get("coveredResources")))
        for flavor in as_items(group.get("flavors")):
            for resource in as_items(flavor.get("resources")):
                name = as_str(resource.get("name"))
                nominal = parse_quantity(resource.get("nominalQuota", 0))
                if (covered and name not in covered) or nominal is None:
                    continue
                quotas.append(
                    Quota(
                        as_str(flavor.get("name")),
                        name,
                        nominal,
                        parse_quantity(resource["borrowingLimit"]) if "borrowingLimit" in resource else None,
                        parse_quantity(resource["lendingLimit"]) if "lendingLimit" in resource else None,
                    )
                )
    reserved = status.get("flavorsReservation")
    used = _usage(reserved if isinstance(reserved, list) else status.get("flavorsUsage"))
    return ClusterQueue(
        name=as_str(meta.get("name")),
        cohort=as_str(spec.get("cohortName")) or as_str(spec.get("cohort")),
        quotas=tuple(quotas),
        used=used,
        stop_policy=as_str(spec.get("stopPolicy"), "None") or "None",
    )


@dataclass(frozen=True, slots=True)
class LocalQueue:
    """A LocalQueue: the namespace's name for a ClusterQueue."""

    namespace: str
    name: str
    cluster_queue: str


def localqueue_from_json(obj: Mapping[str, Any]) -> LocalQueue:
    """A LocalQueue (kueue.x-k8s.io) from the API's JSON."""
    meta, spec = as_mapping(obj.get("metadata")), as_mapping(obj.get("spec"))
    return LocalQueue(
        as_str(meta.get("namespace")), as_str(meta.get("name")), as_str(spec.get("clusterQueue"))
    )


def free_quota(queue: ClusterQueue, cohort: Iterable[ClusterQueue], flavor: str, resource: str) -> Fraction:
    """What ``queue`` may still take of ``resource`` in ``flavor`` (the module docstring's formula).

    ``cohort`` is every ClusterQueue; those sharing ``queue``'s cohort lend to it.
    """
    own = queue.quota(flavor, resource)
    if own is None:
        return Fraction(0)
    used = queue.used.get((flavor, resource), Fraction(0))
    members = [queue]
    if queue.cohort:
        members += [c for c in cohort if c.cohort == queue.cohort and c.name != queue.name]
    pool = drawn = Fraction(0)
    for member in members:
        quota = member.quota(flavor, resource)
        if quota is None or member.stop_policy != "None":
            continue
        pool += quota.nominal - quota.guaranteed
        drawn += max(Fraction(0), member.used.get((flavor, resource), Fraction(0)) - quota.guaranteed)
    free = max(Fraction(0), own.guaranteed - used) + max(Fraction(0), pool - drawn)
    if own.borrowing_limit is not None or not queue.cohort:
        ceiling = own.nominal + (own.borrowing_limit or Fraction(0)) - used
        free = min(free, max(Fraction(0), ceiling))
    return free


@dataclass(frozen=True, slots=True)
class QueueRoom:
    """How many more replicas a ClusterQueue's quota admits, and the sentence that says how."""

    replicas: int
    explanation: str


def _amount(value: Fraction) -> str:
    return str(int(value)) if value.denominator == 1 else f"{float(value):g}"


def queue_room(queue: ClusterQueue, queues: Iterable[ClusterQueue], need: Mapping[str, int]) -> QueueRoom:
    """Replicas of ``need`` (GPU resource -> count per replica) the queue's free quota admits, over its
    flavors (a replica's pod takes one flavor for all its resources)."""
    everyone = list(queues)
    where = f"ClusterQueue {queue.name}" + (f" (cohort {queue.cohort})" if queue.cohort else "")
    if queue.stop_policy != "None":
        return QueueRoom(0, f"{where} admits nothing: stopPolicy {queue.stop_policy}")
    wanted = sorted(need)
    total, parts = 0, []
    for flavor in queue.flavors:
        if any(queue.quota(flavor, r) is None for r in wanted):
            continue
        free = {r: free_quota(queue, everyone, flavor, r) for r in wanted}
        fits = min(int(free[r] // need[r]) for r in wanted)
        total += fits
        shown = ", ".join(
            f"{_amount(free[r])} {r} free: {_amount(queue.used.get((flavor, r), Fraction(0)))} reserved of"
            f" {_amount(quota.nominal)} nominal"
            + ("" if quota.borrowing_limit is None else f", borrowingLimit {_amount(quota.borrowing_limit)}")
            for r in wanted
            if (quota := queue.quota(flavor, r)) is not None
        )
        parts.append(f"flavor {flavor} fits {fits} ({shown})")
    if not parts:
        return QueueRoom(
            0, f"{where} has no quota for {', '.join(wanted)}: its pods wait behind {ADMISSION_GATE}"
        )
    head = f"{where} admits {total} more {'replica' if total == 1 else 'replicas'}"
    return QueueRoom(total, f"{head}: {'; '.join(parts)}")


@dataclass(frozen=True, slots=True)
class KueueInventory:
    """The cluster's LocalQueues and ClusterQueues, or why they cannot be read (``problem``)."""

    local_queues: Mapping[tuple[str, str], LocalQueue] = field(default_factory=dict)  # (namespace, name)
    cluster_queues: Mapping[str, ClusterQueue] = field(default_factory=dict)
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class Admission:
    """What Kueue admits of one workload: None ``replicas`` when it does not manage it (``managed``
    false) or its quota cannot be known (the reason in ``explanation``)."""

    managed: bool = False
    replicas: int | None = None
    explanation: str = ""


def admission(
    namespace: str,
    queue_name: str | None,
    admitted: int,
    gated: int,
    need: Mapping[str, int],
    kueue: KueueInventory,
    through_claims: bool = False,
) -> Admission:
    """What Kueue admits of a workload: ``admitted`` replicas (pods past the gate) plus the room of
    its queue for ``need`` per replica. Kueue manages it when its pods name a queue
    (``queue_name``, the label) or ``gated`` of them wait behind the admission gate (then in the
    namespace's ``default`` LocalQueue)."""
    if queue_name is None and gated == 0:
        return Admission()
    name = queue_name or DEFAULT_QUEUE
    where = f"LocalQueue {namespace}/{name}"
    if kueue.problem is not None:
        return Admission(True, None, f"{where}: Kueue's queues cannot be read ({kueue.problem})")
    local = kueue.local_queues.get((namespace, name))
    if local is None:
        return Admission(True, None, f"{where} not found")
    queue = kueue.cluster_queues.get(local.cluster_queue)
    if queue is None:
        return Admission(True, None, f"ClusterQueue {local.cluster_queue} ({where}) not found")
    if not need:
        why = (
            "the replica's GPUs come through resourceClaims"
            if through_claims
            else "the replica requests no GPU"
        )
        return Admission(True, None, f"{where}: {why}; Kueue's quota for them is not read")
    room = queue_room(queue, kueue.cluster_queues.values(), need)
    held = f" ({gated} waiting behind {ADMISSION_GATE})" if gated else ""
    return Admission(
        True,
        admitted + room.replicas,
        f"{admitted} admitted + {room.replicas} more{held}: {where} -> {room.explanation}",
    )


def quota_ceiling(
    queue: ClusterQueue, queues: Iterable[ClusterQueue], flavor: str, resource: str
) -> Fraction:
    """The most of ``resource`` in ``flavor`` the queue can ever hold: its nominal quota plus what it may
    borrow (its borrowingLimit, else every cohort peer's lendable quota), usage aside."""
    own = queue.quota(flavor, resource)
    if own is None:
        return Fraction(0)
    lendable = sum(
        (
            q.nominal - q.guaranteed
            for peer in queues
            if queue.cohort and peer.cohort == queue.cohort and peer.name != queue.name
            if (q := peer.quota(flavor, resource)) is not None
        ),
        Fraction(0),
    )
    borrow = lendable if own.borrowing_limit is None else min(own.borrowing_limit, lendable)
    return own.nominal + borrow


def most_replicas(queue: ClusterQueue, queues: Iterable[ClusterQueue], need: Mapping[str, int]) -> int:
    """Replicas of ``need`` the queue's quota could ever admit at once (``quota_ceiling``, per flavor)."""
    everyone = list(queues)
    total = 0
    for flavor in queue.flavors:
        if all(queue.quota(flavor, r) is not None for r in need):
            total += min(int(quota_ceiling(queue, everyone, flavor, r) // n) for r, n in need.items())
    return total
