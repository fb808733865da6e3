"""Fitting replicas onto nodes: how many more replicas of a workload the GPUs left can hold. Pure.

    free(node, r)  = allocatable(node, r) - sum(requests(pod, r) for non-terminal pods bound to node)
    fits(node)     = min over the replica's GPU resources r of  free(node, r) // need(r)
    schedulable    = sum(fits(node) for nodes the replica may land on)

A replica needs all its GPUs on one node, so free GPUs on different nodes do not add up.
A node is skipped (fits 0) when it is cordoned, not Ready, carries a NoSchedule or
NoExecute taint the replica does not tolerate, or fails the replica's nodeSelector or
required node affinity. *Example*: two 8-GPU nodes with 3 and 5 GPUs free fit
``3 // 2 + 5 // 2 = 3`` more replicas of 2 GPUs, not ``8 // 2 = 4``.

**DRA** (``scaler.inventory.dra``). On a node whose allocatable lacks an extended resource that a
DeviceClass serves (``extendedResourceName``, KEP-5004), and for the devices a replica's
``resourceClaims`` ask for, the node's free devices of the class are allocated replica after
replica, greedily in the order the driver publishes them, each device's ``consumesCounters``
taken from its pool's counters (MIG partitions): ``fits(node)`` is how many replicas that places.
When no node offers the replica's GPUs either way, they **cannot be counted**
(``Schedulable.countable`` is false): the caller reports the room as unknown, never as 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from scaler.inventory.dra import CounterKey, Device, DraInventory, consume
from scaler.inventory.objects import Node, Pod, ReplicaRequirement
from scaler.inventory.quantities import _add
from scaler.inventory.selectors import UNSCHEDULABLE_TAINT_KEY, Taint
from scaler.kubejson import frozen

MAX_LISTED_NODES = 8


@dataclass(frozen=True, slots=True)
class NodeFit:
    """How many replicas fit on one node, and why.

    ``code`` is one of ``fits``, ``insufficient``, ``cordoned``, ``not_ready``, ``taint``,
    ``node_selector``, ``affinity``. ``free`` is the free count per GPU resource.
    """

    node: str
    replicas: int
    code: str
    reason: str
    free: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "free", frozen(self.free))

    def __str__(self) -> str:
        return f"{self.node} fits {self.replicas} ({self.reason})"


@dataclass(frozen=True, slots=True)
class Schedulable:
    """The answer of ``schedulable_replicas``: how many more replicas fit, node by node.

    ``nodes`` lists every node that offers the replica's GPU resources, most room first;
    ``without_gpu`` counts the nodes that offer none (or not all) of them. ``dra_nodes`` counts
    the listed nodes whose GPUs were counted from ResourceSlices; ``unsure`` says why a device
    was counted without its class's CEL selector being understood; ``dra_problem`` why the DRA
    objects could not be read (their devices then uncounted); ``incomplete_pools`` the DRA pools
    not counted because their latest generation is not all published yet.
    """

    replicas: int
    requirement: ReplicaRequirement
    nodes: tuple[NodeFit, ...]
    without_gpu: int
    dra_nodes: int = 0
    unsure: tuple[str, ...] = ()
    dra_problem: str | None = None
    incomplete_pools: tuple[str, ...] = ()

    @property
    def countable(self) -> bool:
        """Whether any node offers the replica's GPUs: without one, 0 would be a guess, not a count."""
        return bool(self.nodes)

    @property
    def uncounted(self) -> str:
        """Why the GPUs cannot be counted (``countable`` false), in words."""
        resource = self.requirement.gpu_resource
        why = (
            f"no node's allocatable has {resource} and no ResourceSlice publishes a device of a"
            " DeviceClass serving it"
        )
        if self.dra_problem:
            why = (
                f"no node's allocatable has {resource} and the DRA objects cannot be read"
                f" ({self.dra_problem})"
            )
        return f"GPUs cannot be counted: {why}{self._incomplete}"

    @property
    def _incomplete(self) -> str:
        if not self.incomplete_pools:
            return ""
        return f"; DRA pools not counted until complete: {', '.join(self.incomplete_pools)}"

    @property
    def explanation(self) -> str:
        """One line: replicas that fit, then the nodes with room (the first few, then counts)."""
        head = (
            f"{self.replicas} more {'replica' if self.replicas == 1 else 'replicas'}"
            f" of {self.requirement.describe_gpus()} fit"
        )
        if not self.nodes:
            return f"{head}: no node offers {self.requirement.gpu_resource}"
        shown = [str(n) for n in self.nodes[:MAX_LISTED_NODES]]
        rest = self.nodes[MAX_LISTED_NODES:]
        if rest:
            counts: dict[str, int] = {}
            for n in rest:
                counts[n.code] = counts.get(n.code, 0) + 1
            summary = ", ".join(f"{c} {code}" for code, c in sorted(counts.items()))
            fits = sum(n.replicas for n in rest)
            shown.append(f"{len(rest)} more nodes fit {fits} ({summary})")
        tail = (
            f"; {self.without_gpu} nodes without {self.requirement.gpu_resource}" if self.without_gpu else ""
        )
        if self.dra_problem:
            tail += f"; DRA devices not counted ({self.dra_problem})"
        tail += self._incomplete
        if self.unsure:
            tail += f"; counted as matching, selector not understood: {self.unsure[0]}"
        return f"{head}: {', '.join(shown)}{tail}"


def _selector_mismatch(node: Node, selector: Mapping[str, str]) -> str | None:
    for key, want in sorted(selector.items()):
        have = node.labels.get(key)
        if have != want:
            shown = "absent" if have is None else f"{key}={have}"
            return f"nodeSelector {key}={want} not matched (node has {shown})"
    return None


def _blocker(node: Node, requirement: ReplicaRequirement) -> tuple[str, str] | None:
    if node.unschedulable and not requirement.tolerates(Taint(UNSCHEDULABLE_TAINT_KEY, "", "NoSchedule")):
        return "cordoned", "cordoned"
    if not node.ready:
        return "not_ready", "NotReady"
    for taint in node.taints:
        if taint.blocks_scheduling and not requirement.tolerates(taint):
            return "taint", f"taint {taint} not tolerated"
    mismatch = _selector_mismatch(node, requirement.node_selector)
    if mismatch:
        return "node_selector", mismatch
    terms = requirement.node_affinity
    if terms is not None and not any(term.matches(node) for term in terms):
        wanted = " or ".join(f"[{t}]" for t in terms) or "no terms"
        return "affinity", f"required node affinity {wanted} not matched"
    return None


def used_gpus(pods: Iterable[Pod]) -> dict[str, dict[str, int]]:
    """Extended resources held per node: requests of non-terminal pods bound to it."""
    used: dict[str, dict[str, int]] = {}
    for pod in pods:
        if pod.terminal or not pod.node_name or not pod.requests:
            continue
        used[pod.node_name] = _add(used.get(pod.node_name, {}), pod.requests)
    return used


@dataclass(slots=True)
class _Need:
    """What one replica takes of one node's DRA devices: ``count`` of ``candidates``."""

    label: str  # the class (and the resource it serves), for the explanation
    count: int
    candidates: list[Device]


def _plan(
    node: Node, requirement: ReplicaRequirement, dra: DraInventory, unsure: list[str]
) -> tuple[dict[str, int], list[_Need]] | None:
    """How ``node`` would serve one replica: allocatable GPUs per resource, and DRA needs; None when
    it offers not all of them."""
    plugin: dict[str, int] = {}
    needs: list[_Need] = []
    for resource, count in requirement.gpus.items():
        if node.allocatable.get(resource, 0) > 0:
            plugin[resource] = count
            continue
        klass = dra.class_for(resource)
        devices, why = dra.selected(node.name, klass.name) if klass is not None else ([], [])
        if not devices or klass is None:
            return None
        unsure += why
        needs.append(_Need(f"{klass.name} ({resource})", count, devices))
    for claim in requirement.claims:
        devices, why = dra.selected(node.name, claim.device_class, claim.selectors)
        if not devices:
            return None
        unsure += why
        needs.append(_Need(claim.device_class, claim.count, devices))
    return plugin, needs


def _place(needs: list[_Need], dra: DraInventory, limit: int) -> int:
    """Replicas whose DRA needs the node's free devices hold, placed one after another (at most ``limit``)."""
    mine = {(d.driver, d.pool, name) for n in needs for d in n.candidates for name, _ in d.consumes}
    counters: dict[CounterKey, dict[str, Fraction]] = {
        k: dict(v) for k, v in dra.counters.items() if k in mine
    }
    taken: set[tuple[str, str, str]] = set()
    placed = 0
    while placed < limit:
        trial = {k: dict(v) for k, v in counters.items()}
        chosen: set[tuple[str, str, str]] = set()
        for need in needs:
            got = 0
            for device in need.candidates:
                if got == need.count:
                    break
                if device.key in taken or device.key in chosen or not dra.free(device, trial):
                    continue
                consume(device, trial)
                chosen.add(device.key)
                got += 1
            if got < need.count:
                return placed
        counters, taken, placed = trial, taken | chosen, placed + 1
    return placed


def schedulable_replicas(
    nodes: Iterable[Node],
    pods: Iterable[Pod],
    requirement: ReplicaRequirement,
    dra: DraInventory | None = None,
) -> Schedulable:
    """How many more replicas of ``requirement`` fit on ``nodes`` given what ``pods`` hold and, for the
    GPUs DRA hands out, what the claims of ``dra`` hold.

    Raises ValueError when the requirement asks for no GPU: there is nothing to count.
    """
    if not requirement.requests_gpus or any(n <= 0 for n in requirement.gpus.values()):
        raise ValueError("schedulable_replicas needs a requirement of at least one GPU per replica")
    dra = dra if dra is not None else DraInventory()
    used = used_gpus(pods)
    fits: list[NodeFit] = []
    without = dra_nodes = 0
    unsure: list[str] = []
    for node in nodes:
        plan = _plan(node, requirement, dra, unsure)
        if plan is None:
            without += 1
            continue
        plugin, needs = plan
        held = used.get(node.name, {})
        free: dict[str, int] = {r: max(0, node.allocatable[r] - held.get(r, 0)) for r in plugin}
        rooms = [f"{free[r]} of {node.allocatable[r]} {r} free" for r in sorted(plugin)]
        for need in needs:
            open_now = sum(1 for d in need.candidates if dra.free(d, dra.counters))
            free[need.label] = open_now
            rooms.append(f"{open_now} of {len(need.candidates)} {need.label} devices free (DRA)")
        dra_nodes += bool(needs)
        room = ", ".join(rooms)
        blocked = _blocker(node, requirement)
        if blocked is not None:
            fits.append(NodeFit(node.name, 0, blocked[0], blocked[1], free))
            continue
        count = min((free[r] // need for r, need in plugin.items()), default=None)
        if needs:
            ceiling = count if count is not None else sum(len(n.candidates) for n in needs)
            count = _place(needs, dra, ceiling)
        assert count is not None
        if count > 0:
            fits.append(NodeFit(node.name, count, "fits", room, free))
        else:
            fits.append(
                NodeFit(node.name, 0, "insufficient", f"{room}, needs {requirement.describe_gpus()}", free)
            )
    fits.sort(key=lambda f: (-f.replicas, f.node))
    return Schedulable(
        sum(f.replicas for f in fits),
        requirement,
        tuple(fits),
        without,
        dra_nodes,
        tuple(dict.fromkeys(unsure)),
        dra.problem,
        dra.incomplete,
    )
