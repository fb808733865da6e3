"""Fitting replicas onto nodes: how many more replicas of a workload the GPUs left can hold. Pure.

    free(node, r)  = allocatable(node, r) - sum(requests(pod, r) for non-terminal pods bound to node)
    fits(node)     = min over the replica's GPU resources r of  free(node, r) // need(r)
    schedulable    = sum(fits(node) for nodes the replica may land on)

A replica needs all its GPUs on one node, so free GPUs on different nodes do not add up.
A node is skipped (fits 0) when it is cordoned, not Ready, carries a NoSchedule or
NoExecute taint the replica does not tolerate, or fails the replica's nodeSelector or
required node affinity. *Example*: two 8-GPU nodes with 3 and 5 GPUs free fit
``3 // 2 + 5 // 2 = 3`` more replicas of 2 GPUs, not ``8 // 2 = 4``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from scaler.inventory.fields import _freeze
from scaler.inventory.objects import Node, Pod, ReplicaRequirement
from scaler.inventory.quantities import _add
from scaler.inventory.selectors import UNSCHEDULABLE_TAINT_KEY, Taint

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
        object.__setattr__(self, "free", _freeze(self.free))

    def __str__(self) -> str:
        return f"{self.node} fits {self.replicas} ({self.reason})"


@dataclass(frozen=True, slots=True)
class Schedulable:
    """The answer of ``schedulable_replicas``: how many more replicas fit, node by node.

    ``nodes`` lists every node that offers the replica's GPU resources, most room first;
    ``without_gpu`` counts the nodes that offer none (or not all) of them.
    """

    replicas: int
    requirement: ReplicaRequirement
    nodes: tuple[NodeFit, ...]
    without_gpu: int

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


def schedulable_replicas(
    nodes: Iterable[Node], pods: Iterable[Pod], requirement: ReplicaRequirement
) -> Schedulable:
    """How many more replicas of ``requirement`` fit on ``nodes`` given what ``pods`` hold.

    Raises ValueError when the requirement asks for no GPU: there is nothing to count.
    """
    if not requirement.gpus or any(n <= 0 for n in requirement.gpus.values()):
        raise ValueError("schedulable_replicas needs a requirement of at least one GPU per replica")
    used = used_gpus(pods)
    fits: list[NodeFit] = []
    without = 0
    for node in nodes:
        if any(node.allocatable.get(r, 0) <= 0 for r in requirement.gpus):
            without += 1
            continue
        held = used.get(node.name, {})
        free = {r: max(0, node.allocatable[r] - held.get(r, 0)) for r in requirement.gpus}
        room = ", ".join(f"{free[r]} of {node.allocatable[r]} {r} free" for r in sorted(free))
        blocked = _blocker(node, requirement)
        if blocked is not None:
            fits.append(NodeFit(node.name, 0, blocked[0], blocked[1], free))
            continue
        count = min(free[r] // need for r, need in requirement.gpus.items())
        if count > 0:
            fits.append(NodeFit(node.name, count, "fits", room, free))
        else:
            fits.append(
                NodeFit(node.name, 0, "insufficient", f"{room}, needs {requirement.describe_gpus()}", free)
            )
    fits.sort(key=lambda f: (-f.replicas, f.node))
    return Schedulable(sum(f.replicas for f in fits), requirement, tuple(fits), without)
