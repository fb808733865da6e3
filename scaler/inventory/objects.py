"""Kubernetes objects as the inventory needs them, decoded from the API's JSON. Pure.

Nodes (GPU allocatable, labels, taints, Ready), Pods (effective GPU requests, phase,
Ready and its timestamps), Deployments (replicas, selector) and the replica requirement read
from a pod template. KEDA's ScaledObject has a module of its own (``scaledobject``).
*Example*: a Deployment whose template requests ``nvidia.com/gpu: 1`` and tolerates the
GPU taint decodes to ``ReplicaRequirement({"nvidia.com/gpu": 1}, tolerations=(...))``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from scaler.inventory.dra import DeviceRequest, claim_names
from scaler.inventory.kueue import ADMISSION_GATE, QUEUE_LABEL
from scaler.inventory.quantities import GPU_RESOURCE_PATTERNS, _extended, is_gpu_resource, pod_requests
from scaler.inventory.selectors import (
    _NODE_OPERATORS,
    LabelSelector,
    NodeSelectorTerm,
    SelectorError,
    Taint,
    Toleration,
    _requirements,
    label_selector_from_json,
    tolerated,
)
from scaler.kubejson import as_items, as_labels, as_mapping, as_str, as_timestamp, frozen

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


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
        object.__setattr__(self, "allocatable", frozen(self.allocatable))
        object.__setattr__(self, "labels", frozen(self.labels))


def node_from_json(obj: Mapping[str, Any]) -> Node:
    """A Node from the API's JSON: extended allocatable resources, labels, taints, readiness."""
    meta, spec, status = (
        as_mapping(obj.get("metadata")),
        as_mapping(obj.get("spec")),
        as_mapping(obj.get("status")),
    )
    taints = tuple(
        Taint(as_str(t.get("key")), as_str(t.get("value")), as_str(t.get("effect")))
        for t in as_items(spec.get("taints"))
    )
    ready = any(
        as_str(c.get("type")) == "Ready" and as_str(c.get("status")) == "True"
        for c in as_items(status.get("conditions"))
    )
    return Node(
        name=as_str(meta.get("name")),
        allocatable=_extended(status.get("allocatable")),
        labels=as_labels(meta.get("labels")),
        taints=taints,
        unschedulable=spec.get("unschedulable") is True,
        ready=ready,
    )


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
    scheduling_gates: tuple[str, ...] = ()  # spec.schedulingGates: the pod is not scheduled while any is set

    def __post_init__(self) -> None:
        object.__setattr__(self, "requests", frozen(self.requests))
        object.__setattr__(self, "labels", frozen(self.labels))

    @property
    def gated_by_kueue(self) -> bool:
        """Held by Kueue's admission gate: not admitted, so it holds no quota and no node."""
        return ADMISSION_GATE in self.scheduling_gates

    @property
    def terminal(self) -> bool:
        """Whether the pod has finished (Succeeded or Failed)."""
        return self.phase in TERMINAL_PHASES

    @property
    def bound(self) -> bool:
        """Whether the pod is scheduled to a node."""
        return bool(self.node_name)


def _became_true(conditions: list[Mapping[str, Any]], kind: str) -> float | None:
    for c in conditions:
        if as_str(c.get("type")) == kind and as_str(c.get("status")) == "True":
            return as_timestamp(c.get("lastTransitionTime"))
    return None


def pod_from_json(obj: Mapping[str, Any]) -> Pod:
    """A Pod from the API's JSON: requests, phase, readiness and when it was scheduled and Ready."""
    meta, spec, status = (
        as_mapping(obj.get("metadata")),
        as_mapping(obj.get("spec")),
        as_mapping(obj.get("status")),
    )
    conditions = as_items(status.get("conditions"))
    ready = any(as_str(c.get("type")) == "Ready" and as_str(c.get("status")) == "True" for c in conditions)
    return Pod(
        name=as_str(meta.get("name")),
        namespace=as_str(meta.get("namespace")),
        node_name=as_str(spec.get("nodeName")) or None,
        requests=pod_requests(spec),
        phase=as_str(status.get("phase"), "Pending"),
        ready=ready,
        deleting=meta.get("deletionTimestamp") is not None,
        labels=as_labels(meta.get("labels")),
        created_at=as_timestamp(meta.get("creationTimestamp")),
        scheduled_at=_became_true(conditions, "PodScheduled"),
        ready_at=_became_true(conditions, "Ready"),
        scheduling_gates=tuple(as_str(g.get("name")) for g in as_items(spec.get("schedulingGates"))),
    )


@dataclass(frozen=True, slots=True)
class ReplicaRequirement:
    """What one replica of a workload needs from a node, learned from its pod template.

    ``gpus`` maps each GPU resource to the count one replica requests (usually one entry).
    ``node_affinity`` is the required node affinity's terms (ORed), or None when absent.
    ``claim_templates`` names the ResourceClaimTemplates of the template's ``resourceClaims``
    (a claim per pod each); ``claims`` holds their device requests once resolved
    (``with_claims``). A shared ``resourceClaimName`` takes no more devices per replica.
    """

    gpus: Mapping[str, int] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    claim_templates: tuple[str, ...] = ()
    claims: tuple[DeviceRequest, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpus", frozen(self.gpus))
        object.__setattr__(self, "node_selector", frozen(self.node_selector))

    @property
    def gpu_resource(self) -> str | None:
        """The GPU resource names (and claimed DeviceClasses) joined by ``+``, or None when a
        replica requests no GPU."""
        return "+".join([*sorted(self.gpus), *(c.device_class for c in self.claims)]) or None

    @property
    def gpus_per_replica(self) -> int:
        """GPUs one replica requests, over every GPU resource and claimed device."""
        return sum(self.gpus.values()) + sum(c.count for c in self.claims)

    @property
    def requests_gpus(self) -> bool:
        """Whether a replica requests a GPU, as an extended resource or through a claim."""
        return bool(self.gpus or self.claims)

    def describe_gpus(self) -> str:
        """The GPU request in words, e.g. ``2 nvidia.com/gpu``, ``1 gpu.nvidia.com``, or ``no GPU``."""
        parts = [f"{n} {r}" for r, n in sorted(self.gpus.items())] + [c.describe() for c in self.claims]
        return " + ".join(parts) or "no GPU"

    def with_gpus(self, gpus: Mapping[str, int]) -> ReplicaRequirement:
        """The same requirement with ``gpus`` in place of the template's GPU requests."""
        return replace(self, gpus=gpus)

    def with_claims(self, claims: tuple[DeviceRequest, ...]) -> ReplicaRequirement:
        """The same requirement with its claim templates' device requests resolved."""
        return replace(self, claims=claims)

    def tolerates(self, taint: Taint) -> bool:
        """Whether the replica's tolerations tolerate ``taint``."""
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
            as_str(t.get("key")),
            as_str(t.get("operator"), "Equal") or "Equal",
            as_str(t.get("value")),
            as_str(t.get("effect")),
        )
        for t in as_items(pod_spec.get("tolerations"))
    )
    affinity = as_mapping(as_mapping(pod_spec.get("affinity")).get("nodeAffinity"))
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    terms: tuple[NodeSelectorTerm, ...] | None = None
    if isinstance(required, Mapping):
        terms = tuple(
            NodeSelectorTerm(
                _requirements(t.get("matchExpressions"), _NODE_OPERATORS, "node affinity"),
                _requirements(t.get("matchFields"), _NODE_OPERATORS, "node affinity"),
            )
            for t in as_items(required.get("nodeSelectorTerms"))
        )
    templates, _shared = claim_names(pod_spec)
    return ReplicaRequirement(gpus, as_labels(pod_spec.get("nodeSelector")), tolerations, terms, templates)


@dataclass(frozen=True, slots=True)
class Deployment:
    """An apps/v1 Deployment: desired replicas, pod selector and the replica requirement.

    ``problem`` says why the Deployment cannot be assessed (an unusable selector or
    template); ``selector`` and ``requirement`` are then placeholders. ``queue_name`` is the
    Kueue LocalQueue its pods are submitted to (the ``kueue.x-k8s.io/queue-name`` label of the
    pod template, else of the Deployment), or None.
    """

    namespace: str
    name: str
    replicas: int
    selector: LabelSelector
    requirement: ReplicaRequirement
    problem: str | None = None
    queue_name: str | None = None


def deployment_from_json(
    obj: Mapping[str, Any], gpu_patterns: Sequence[str] = GPU_RESOURCE_PATTERNS
) -> Deployment:
    """A Deployment from the API's JSON; ``problem`` says why an unusable one cannot be assessed."""
    meta, spec = as_mapping(obj.get("metadata")), as_mapping(obj.get("spec"))
    namespace, name = as_str(meta.get("namespace")), as_str(meta.get("name"))
    raw_replicas = spec.get("replicas", 1)
    replicas = raw_replicas if isinstance(raw_replicas, int) and raw_replicas >= 0 else 1
    problems: list[str] = []
    try:
        selector = label_selector_from_json(as_mapping(spec.get("selector")))
    except SelectorError as exc:
        selector, problems = LabelSelector(), [str(exc)]
    if selector.empty and not problems:
        problems.append("empty spec.selector (it would match every pod in the namespace)")
    try:
        requirement = requirement_from_pod_spec(
            as_mapping(as_mapping(spec.get("template")).get("spec")), gpu_patterns
        )
    except SelectorError as exc:
        requirement, problems = ReplicaRequirement(), [*problems, str(exc)]
    template_labels = as_labels(as_mapping(as_mapping(spec.get("template")).get("metadata")).get("labels"))
    queue = template_labels.get(QUEUE_LABEL) or as_labels(meta.get("labels")).get(QUEUE_LABEL) or None
    return Deployment(
        namespace, name, replicas, selector, requirement, "; ".join(problems) if problems else None, queue
    )
