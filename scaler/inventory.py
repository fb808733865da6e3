"""GPU inventory and workload state, computed from Kubernetes objects as plain data.

Pure: no I/O, no clock, no logging. ``scaler.sources.kubernetes`` keeps the caches and
calls in here; tests call in here with tables.

The arithmetic, node by node::

    free(node, r)  = allocatable(node, r) - sum(requests(pod, r) for non-terminal pods bound to node)
    fits(node)     = min over the replica's GPU resources r of  free(node, r) // need(r)
    schedulable    = sum(fits(node) for nodes the replica may land on)

A replica needs all its GPUs on one node, so free GPUs on different nodes do not add up.
A node is skipped (fits 0) when it is cordoned, not Ready, carries a NoSchedule or
NoExecute taint the replica does not tolerate, or fails the replica's nodeSelector or
required node affinity. The rules follow the Kubernetes scheduler's NodeUnschedulable,
TaintToleration, NodeAffinity and NodeResourcesFit plugins for extended resources.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from fnmatch import fnmatchcase
from fractions import Fraction
from types import MappingProxyType
from typing import Any

from scaler.coldstart import NONE as NO_COLD_START
from scaler.coldstart import ColdStart, PodTimes
from scaler.coldstart import measure as measure_cold_start
from scaler.model import HpaStatus

# Resource names read as GPUs (fnmatch patterns). Time-sliced GPUs renamed by the NVIDIA
# device plugin (``nvidia.com/gpu.shared``) and every MIG profile are included.
GPU_RESOURCE_PATTERNS: tuple[str, ...] = (
    "nvidia.com/gpu",
    "nvidia.com/gpu.*",
    "nvidia.com/mig-*",
    "amd.com/gpu",
    "gpu.intel.com/*",
    "habana.ai/gaudi",
    "aws.amazon.com/neuron",
    "aws.amazon.com/neuroncore",
    "aws.amazon.com/neurondevice",
    "google.com/tpu",
)
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"
MAX_LISTED_NODES = 8


def _freeze(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


def is_gpu_resource(name: str, patterns: Sequence[str] = GPU_RESOURCE_PATTERNS) -> bool:
    return any(fnmatchcase(name, p) for p in patterns)


def is_extended_resource(name: str) -> bool:
    """Extended (device) resources are domain-qualified: ``vendor.example/thing``.

    ``cpu``, ``memory``, ``ephemeral-storage``, ``pods`` and ``hugepages-*`` are not.
    """
    return "/" in name and not name.startswith(("kubernetes.io/", "requests.", "limits."))


# ---- quantities ------------------------------------------------------------------------

_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$")
_SUFFIX = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}


def parse_count(value: Any) -> int | None:
    """A Kubernetes quantity that must be a whole number (extended resources are), or None.

    Accepts ``2``, ``"2"``, ``"1k"``, ``"2e0"``; a fraction (``"500m"``), a negative or
    anything unparsable is None.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value if value >= 0 else None
    match = _QUANTITY.match(value.strip()) if isinstance(value, str) else None
    if match is None:
        return None
    number, exponent, suffix = match.groups()
    amount = Fraction(number) * _SUFFIX[suffix or ""]
    if exponent:
        power = int(exponent[1:])
        amount = amount * Fraction(10) ** power if abs(power) <= 30 else Fraction(-1)
    return int(amount) if amount >= 0 and amount.denominator == 1 else None


# ---- JSON access (objects come from the API server as untyped JSON) ---------------------


def _obj(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _items(value: Any) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, Mapping)]


def _str(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) else default


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(v for v in value if isinstance(v, str))


def _labels(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in _obj(value).items() if isinstance(v, str)}


def _extended(resources: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, raw in _obj(resources).items():
        if isinstance(name, str) and is_extended_resource(name):
            count = parse_count(raw)
            if count is not None:
                out[name] = count
    return out


# ---- nodes -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"

    @property
    def blocks_scheduling(self) -> bool:
        """NoSchedule and NoExecute keep new pods off; PreferNoSchedule only discourages."""
        return self.effect in BLOCKING_EFFECTS

    def __str__(self) -> str:
        value = f"={self.value}" if self.value else ""
        return f"{self.key}{value}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' rule: an empty effect matches every effect; an empty key with
        ``Exists`` matches every key; ``Equal`` (the default) compares values."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return False


def tolerated(taint: Taint, tolerations: Iterable[Toleration]) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


@dataclass(frozen=True, slots=True)
class Node:
    """A node as the GPU inventory needs it. ``allocatable`` holds extended resources only."""

    name: str
    allocatable: Mapping[str, int] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "allocatable", _freeze(self.allocatable))
        object.__setattr__(self, "labels", _freeze(self.labels))


def node_from_json(obj: Mapping[str, Any]) -> Node:
    meta, spec, status = _obj(obj.get("metadata")), _obj(obj.get("spec")), _obj(obj.get("status"))
    taints = tuple(
        Taint(_str(t.get("key")), _str(t.get("value")), _str(t.get("effect")))
        for t in _items(spec.get("taints"))
    )
    ready = any(
        _str(c.get("type")) == "Ready" and _str(c.get("status")) == "True"
        for c in _items(status.get("conditions"))
    )
    return Node(
        name=_str(meta.get("name")),
        allocatable=_extended(status.get("allocatable")),
        labels=_labels(meta.get("labels")),
        taints=taints,
        unschedulable=spec.get("unschedulable") is True,
        ready=ready,
    )


# ---- pods --------------------------------------------------------------------------------


def _add(total: dict[str, int], more: Mapping[str, int]) -> dict[str, int]:
    out = dict(total)
    for name, count in more.items():
        out[name] = out.get(name, 0) + count
    return out


def _max(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    return {name: max(a.get(name, 0), b.get(name, 0)) for name in set(a) | set(b)}


def container_requests(container: Mapping[str, Any]) -> dict[str, int]:
    """Extended-resource requests of one container; a limit stands in for a missing request
    (for extended resources Kubernetes requires requests == limits and defaults one from the other)."""
    resources = _obj(container.get("resources"))
    return {**_extended(resources.get("limits")), **_extended(resources.get("requests"))}


def pod_requests(pod_spec: Mapping[str, Any]) -> dict[str, int]:
    """The pod's effective extended-resource request, as the scheduler reserves it.

    effective = max(sum(app containers) + sum(sidecars), max over init containers i of
                    (request(i) + sum(sidecars listed before i))) + overhead
    where sidecars are init containers with ``restartPolicy: Always``.
    """
    apps: dict[str, int] = {}
    for container in _items(pod_spec.get("containers")):
        apps = _add(apps, container_requests(container))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in _items(pod_spec.get("initContainers")):
        own = container_requests(container)
        if _str(container.get("restartPolicy")) == "Always":
            sidecars = _add(sidecars, own)
            init_peak = _max(init_peak, sidecars)
        else:
            init_peak = _max(init_peak, _add(own, sidecars))
    effective = _max(_add(apps, sidecars), init_peak)
    effective = _add(effective, _extended(pod_spec.get("overhead")))
    return {name: count for name, count in effective.items() if count > 0}


@dataclass(frozen=True, slots=True)
class Pod:
    """A pod's GPU usage and the state the workload counts need.

    ``requests`` holds the effective extended-resource requests. A terminal pod
    (Succeeded or Failed) frees its GPUs; a pod being deleted still holds them until it is gone.
    """

    name: str
    namespace: str
    node_name: str | None = None
    requests: Mapping[str, int] = field(default_factory=dict)
    phase: str = "Pending"
    ready: bool = False
    deleting: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)
    created_at: float | None = None  # metadata.creationTimestamp, Unix seconds
    scheduled_at: float | None = None  # PodScheduled became True
    ready_at: float | None = None  # Ready became True (None while not Ready)

    def __post_init__(self) -> None:
        object.__setattr__(self, "requests", _freeze(self.requests))
        object.__setattr__(self, "labels", _freeze(self.labels))

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def bound(self) -> bool:
        return bool(self.node_name)


def _timestamp(value: Any) -> float | None:
    """An RFC 3339 time as the API writes it (``2026-12-01T08:00:00Z``), in Unix seconds."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.timestamp() if parsed.tzinfo is not None else None


def _became_true(conditions: list[Mapping[str, Any]], kind: str) -> float | None:
    for c in conditions:
        if _str(c.get("type")) == kind and _str(c.get("status")) == "True":
            return _timestamp(c.get("lastTransitionTime"))
    return None


def pod_from_json(obj: Mapping[str, Any]) -> Pod:
    meta, spec, status = _obj(obj.get("metadata")), _obj(obj.get("spec")), _obj(obj.get("status"))
    conditions = _items(status.get("conditions"))
    ready = any(_str(c.get("type")) == "Ready" and _str(c.get("status")) == "True" for c in conditions)
    return Pod(
        name=_str(meta.get("name")),
        namespace=_str(meta.get("namespace")),
        node_name=_str(spec.get("nodeName")) or None,
        requests=pod_requests(spec),
        phase=_str(status.get("phase"), "Pending"),
        ready=ready,
        deleting=meta.get("deletionTimestamp") is not None,
        labels=_labels(meta.get("labels")),
        created_at=_timestamp(meta.get("creationTimestamp")),
        scheduled_at=_became_true(conditions, "PodScheduled"),
        ready_at=_became_true(conditions, "Ready"),
    )


# ---- selectors ---------------------------------------------------------------------------


class SelectorError(ValueError):
    """A selector this module cannot evaluate (unknown operator, malformed values)."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``matchExpressions`` entry (label selectors and node selector terms share the shape)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:  # noqa: PLR0911 - one return per operator, as the API lists them
        present = self.key in labels
        value = labels.get(self.key, "")
        op = self.operator
        if op == "In":
            return present and value in self.values
        if op == "NotIn":
            return not present or value not in self.values
        if op == "Exists":
            return present
        if op == "DoesNotExist":
            return not present
        if op in ("Gt", "Lt"):
            # Both sides must be integers; otherwise the requirement does not match.
            if not present or len(self.values) != 1:
                return False
            try:
                mine, theirs = int(value), int(self.values[0])
            except ValueError:
                return False
            return mine > theirs if op == "Gt" else mine < theirs
        return False

    def __str__(self) -> str:
        if self.operator in ("Exists", "DoesNotExist"):
            return f"{'' if self.operator == 'Exists' else '!'}{self.key}"
        if self.operator in ("Gt", "Lt"):
            return f"{self.key} {'>' if self.operator == 'Gt' else '<'} {','.join(self.values)}"
        return f"{self.key} {self.operator.lower()} ({','.join(self.values)})"


_LABEL_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
_NODE_OPERATORS = _LABEL_OPERATORS | {"Gt", "Lt"}


def _requirements(raw: Any, operators: frozenset[str], where: str) -> tuple[Requirement, ...]:
    out = []
    for item in _items(raw):
        op = _str(item.get("operator"))
        if op not in operators:
            raise SelectorError(f"{where}: unsupported operator {op!r} for key {_str(item.get('key'))!r}")
        out.append(Requirement(_str(item.get("key")), op, _strings(item.get("values"))))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A ``metav1.LabelSelector``: matchLabels and matchExpressions, all ANDed."""

    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[Requirement, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "match_labels", _freeze(self.match_labels))

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.match_expressions
        )

    def __str__(self) -> str:
        parts = [f"{k}={v}" for k, v in sorted(self.match_labels.items())]
        parts += [str(r) for r in self.match_expressions]
        return ",".join(parts) or "<everything>"


def label_selector_from_json(obj: Mapping[str, Any]) -> LabelSelector:
    """Parse a LabelSelector; raises SelectorError on an operator Kubernetes does not define."""
    return LabelSelector(
        _labels(obj.get("matchLabels")),
        _requirements(obj.get("matchExpressions"), _LABEL_OPERATORS, "selector"),
    )


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Expressions on node labels and fields, ANDed. An empty term matches no node."""

    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()

    def matches(self, node: Node) -> bool:
        if not self.match_expressions and not self.match_fields:
            return False
        fields = {"metadata.name": node.name}
        # Only metadata.name is a supported field; a requirement on any other field fails.
        return all(r.matches(node.labels) for r in self.match_expressions) and all(
            r.key in fields and r.matches(fields) for r in self.match_fields
        )

    def __str__(self) -> str:
        parts = [str(r) for r in self.match_expressions] + [f"field {r}" for r in self.match_fields]
        return " and ".join(parts) or "<empty term>"


# ---- what one replica needs --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplicaRequirement:
    """What one replica of a workload needs from a node, learned from its pod template.

    ``gpus`` maps each GPU resource to the count one replica requests (usually one entry).
    ``node_affinity`` is the required node affinity's terms (ORed), or None when absent.
    """

    gpus: Mapping[str, int] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpus", _freeze(self.gpus))
        object.__setattr__(self, "node_selector", _freeze(self.node_selector))

    @property
    def gpu_resource(self) -> str | None:
        return "+".join(sorted(self.gpus)) or None

    @property
    def gpus_per_replica(self) -> int:
        return sum(self.gpus.values())

    def describe_gpus(self) -> str:
        return " + ".join(f"{n} {r}" for r, n in sorted(self.gpus.items())) or "no GPU"

    def with_gpus(self, gpus: Mapping[str, int]) -> ReplicaRequirement:
        return ReplicaRequirement(gpus, self.node_selector, self.tolerations, self.node_affinity)

    def tolerates(self, taint: Taint) -> bool:
        return tolerated(taint, self.tolerations)


def requirement_from_pod_spec(
    pod_spec: Mapping[str, Any], gpu_patterns: Sequence[str] = GPU_RESOURCE_PATTERNS
) -> ReplicaRequirement:
    """The replica requirement of a pod template's ``spec``.

    Raises SelectorError when the required node affinity uses an operator Kubernetes does not define.
    """
    requests = pod_requests(pod_spec)
    gpus = {name: count for name, count in requests.items() if is_gpu_resource(name, gpu_patterns)}
    tolerations = tuple(
        Toleration(
            _str(t.get("key")),
            _str(t.get("operator"), "Equal") or "Equal",
            _str(t.get("value")),
            _str(t.get("effect")),
        )
        for t in _items(pod_spec.get("tolerations"))
    )
    affinity = _obj(_obj(pod_spec.get("affinity")).get("nodeAffinity"))
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    terms: tuple[NodeSelectorTerm, ...] | None = None
    if isinstance(required, Mapping):
        terms = tuple(
            NodeSelectorTerm(
                _requirements(t.get("matchExpressions"), _NODE_OPERATORS, "node affinity"),
                _requirements(t.get("matchFields"), _NODE_OPERATORS, "node affinity"),
            )
            for t in _items(required.get("nodeSelectorTerms"))
        )
    return ReplicaRequirement(gpus, _labels(pod_spec.get("nodeSelector")), tolerations, terms)


# ---- fitting replicas onto nodes ---------------------------------------------------------


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


# ---- KEDA ScaledObjects and Deployments --------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScaledObject:
    """The part of a KEDA ScaledObject this module reads: what it scales."""

    namespace: str
    name: str
    target_kind: str = "Deployment"
    target_name: str = ""
    target_api_version: str = "apps/v1"
    hpa_name: str = ""  # status.hpaName, or KEDA's default keda-hpa-<name>
    fallback_active: bool = False  # the Fallback condition is True: KEDA serves fallback replicas

    def unsupported_target(self) -> str | None:
        """Why the scale target cannot be read, or None for an apps/v1 Deployment."""
        if not self.target_name:
            return f"ScaledObject {self.namespace}/{self.name} has no spec.scaleTargetRef.name"
        group = self.target_api_version.split("/")[0] if "/" in self.target_api_version else ""
        if self.target_kind != "Deployment" or group != "apps":
            return (
                f"ScaledObject {self.namespace}/{self.name} scales {self.target_kind}"
                f" {self.target_name} ({self.target_api_version}); only apps/v1 Deployments are supported"
            )
        return None


def scaledobject_from_json(obj: Mapping[str, Any]) -> ScaledObject:
    meta, spec = _obj(obj.get("metadata")), _obj(obj.get("spec"))
    status = _obj(obj.get("status"))
    ref = _obj(spec.get("scaleTargetRef"))
    name = _str(meta.get("name"))
    configured_hpa = _str(_obj(_obj(spec.get("advanced")).get("horizontalPodAutoscalerConfig")).get("name"))
    return ScaledObject(
        namespace=_str(meta.get("namespace")),
        name=name,
        # KEDA's defaults for scaleTargetRef: kind Deployment, apiVersion apps/v1.
        target_kind=_str(ref.get("kind")) or "Deployment",
        target_name=_str(ref.get("name")),
        target_api_version=_str(ref.get("apiVersion")) or "apps/v1",
        hpa_name=_str(status.get("hpaName")) or configured_hpa or f"keda-hpa-{name}",
        fallback_active=any(
            _str(c.get("type")) == "Fallback" and _str(c.get("status")) == "True"
            for c in _items(status.get("conditions"))
        ),
    )


@dataclass(frozen=True, slots=True)
class Deployment:
    """An apps/v1 Deployment: desired replicas, pod selector and the replica requirement.

    ``problem`` says why the Deployment cannot be assessed (an unusable selector or
    template); ``selector`` and ``requirement`` are then placeholders.
    """

    namespace: str
    name: str
    replicas: int
    selector: LabelSelector
    requirement: ReplicaRequirement
    problem: str | None = None


def deployment_from_json(
    obj: Mapping[str, Any], gpu_patterns: Sequence[str] = GPU_RESOURCE_PATTERNS
) -> Deployment:
    meta, spec = _obj(obj.get("metadata")), _obj(obj.get("spec"))
    namespace, name = _str(meta.get("namespace")), _str(meta.get("name"))
    raw_replicas = spec.get("replicas", 1)
    replicas = raw_replicas if isinstance(raw_replicas, int) and raw_replicas >= 0 else 1
    problems: list[str] = []
    try:
        selector = label_selector_from_json(_obj(spec.get("selector")))
    except SelectorError as exc:
        selector, problems = LabelSelector(), [str(exc)]
    if selector.empty and not problems:
        problems.append("empty spec.selector (it would match every pod in the namespace)")
    try:
        requirement = requirement_from_pod_spec(_obj(_obj(spec.get("template")).get("spec")), gpu_patterns)
    except SelectorError as exc:
        requirement, problems = ReplicaRequirement(), [*problems, str(exc)]
    return Deployment(
        namespace, name, replicas, selector, requirement, "; ".join(problems) if problems else None
    )


# ---- the workload's state ----------------------------------------------------------------


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
    ready = sum(1 for p in live if p.ready)
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
