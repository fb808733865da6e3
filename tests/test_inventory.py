"""Pure tables for the GPU inventory arithmetic and the workload counts (no I/O)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.inventory import (
    Deployment,
    LabelSelector,
    Node,
    NodeSelectorTerm,
    Pod,
    ReplicaRequirement,
    Requirement,
    ScaledObject,
    SelectorError,
    Taint,
    Toleration,
    Unknown,
    WorkloadState,
    deployment_from_json,
    label_selector_from_json,
    node_from_json,
    parse_count,
    pod_from_json,
    pod_requests,
    requirement_from_pod_spec,
    scaledobject_from_json,
    schedulable_replicas,
    workload_state,
)
from tests import k8s_double as k8s
from tests.helpers import replica_counts

GPU = "nvidia.com/gpu"
MIG1 = "nvidia.com/mig-1g.10gb"
MIG2 = "nvidia.com/mig-2g.20gb"


def gpu_node(name: str, gpus: int = 8, **kw: Any) -> Node:
    """A ready, schedulable node offering ``gpus`` whole nvidia.com/gpu devices."""
    return Node(name=name, allocatable={GPU: gpus}, **kw)


def holding(node: str, gpus: int, resource: str = GPU, **kw: Any) -> Pod:
    """A pod bound to ``node`` that requests ``gpus`` of ``resource``."""
    return Pod(name=f"p-{node}-{gpus}", namespace="x", node_name=node, requests={resource: gpus}, **kw)


def need(gpus: int = 1, resource: str = GPU, **kw: Any) -> ReplicaRequirement:
    """What one replica needs: ``gpus`` of ``resource``, plus any placement rules in ``kw``."""
    return ReplicaRequirement(gpus={resource: gpus}, **kw)


# ---- quantities --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1", 1),
        (2, 2),
        ("8", 8),
        ("2k", 2000),
        ("1Ki", 1024),
        ("0.5k", 500),
        ("2e0", 2),
        ("1e3", 1000),
        (" 4 ", 4),
        ("500m", None),  # a fraction of a device
        ("1.5", None),
        ("-1", None),
        (-1, None),
        ("abc", None),
        ("", None),
        (True, None),
        (None, None),
        (1.0, None),
    ],
    ids=repr,
)
def test_parse_count(value: Any, expected: int | None) -> None:
    """Device counts parse as whole non-negative numbers; fractions, negatives and junk are None."""
    assert parse_count(value) == expected


# ---- tolerations -------------------------------------------------------------------------

GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerates"),
    [
        (Toleration("", "Exists"), GPU_TAINT, True),  # empty key + Exists tolerates everything
        (Toleration("", "Exists"), Taint("a", "b", "NoExecute"), True),
        (Toleration("", "Exists", effect="NoExecute"), GPU_TAINT, False),  # ...of that effect only
        (Toleration("nvidia.com/gpu", "Exists"), GPU_TAINT, True),  # any value, any effect
        (Toleration("nvidia.com/gpu", "Exists", effect="NoSchedule"), GPU_TAINT, True),
        (Toleration("nvidia.com/gpu", "Exists", effect="NoExecute"), GPU_TAINT, False),
        (Toleration("nvidia.com/gpu", "Equal", "present", "NoSchedule"), GPU_TAINT, True),
        (Toleration("nvidia.com/gpu", "Equal", "present"), GPU_TAINT, True),  # empty effect: all effects
        (Toleration("nvidia.com/gpu", "", "present"), GPU_TAINT, True),  # empty operator means Equal
        (Toleration("nvidia.com/gpu", "Equal", "absent"), GPU_TAINT, False),
        (Toleration("nvidia.com/gpu", "Equal", ""), GPU_TAINT, False),
        (Toleration("other", "Exists"), GPU_TAINT, False),
        (Toleration("dedicated", "Equal", "", "NoSchedule"), Taint("dedicated", "", "NoSchedule"), True),
        (Toleration("nvidia.com/gpu", "Lt", "present"), GPU_TAINT, False),  # unknown operator
    ],
    ids=[
        "any-key-exists",
        "any-key-exists-noexecute",
        "any-key-other-effect",
        "key-exists",
        "key-exists-same-effect",
        "key-exists-other-effect",
        "equal-value-effect",
        "equal-any-effect",
        "empty-operator-is-equal",
        "equal-wrong-value",
        "equal-empty-value",
        "other-key",
        "equal-empty-both",
        "unknown-operator",
    ],
)
def test_toleration_rules(toleration: Toleration, taint: Taint, tolerates: bool) -> None:
    """A toleration matches a taint by key, operator, value and effect as Kubernetes does."""
    assert toleration.tolerates(taint) is tolerates


# ---- effective pod requests --------------------------------------------------------------


def container(
    gpus: int | None = None, limit: int | None = None, restart: str | None = None
) -> dict[str, Any]:
    """A container spec with cpu and memory, plus optional GPU request, limit and restartPolicy."""
    resources: dict[str, Any] = {"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"memory": "8Gi"}}
    if gpus is not None:
        resources["requests"][GPU] = str(gpus)
    if limit is not None:
        resources["limits"][GPU] = str(limit)
    out: dict[str, Any] = {"name": "c", "image": "img", "resources": resources}
    if restart:
        out["restartPolicy"] = restart
    return out


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"containers": [container(2, 2)]}, {GPU: 2}),
        ({"containers": [container(limit=4)]}, {GPU: 4}),  # limit stands in for the request
        ({"containers": [container(1, 1), container(2, 2)]}, {GPU: 3}),  # app containers add up
        ({"containers": [container()]}, {}),  # cpu and memory are not extended resources
        # an init container needing more than the app containers sets the request
        ({"containers": [container(1, 1)], "initContainers": [container(4, 4)]}, {GPU: 4}),
        ({"containers": [container(2, 2)], "initContainers": [container(1, 1), container(1, 1)]}, {GPU: 2}),
        # a sidecar (restartPolicy Always) runs alongside the app and later init containers
        (
            {"containers": [container(1, 1)], "initContainers": [container(1, 1, "Always")]},
            {GPU: 2},
        ),
        (
            {
                "containers": [container(1, 1)],
                "initContainers": [container(1, 1, "Always"), container(3, 3)],
            },
            {GPU: 4},  # init 3 + sidecar 1 beats app 1 + sidecar 1
        ),
        ({"containers": [container(1, 1)], "overhead": {GPU: "1"}}, {GPU: 2}),
        ({"containers": [{"name": "c", "resources": {"requests": {GPU: "500m"}}}]}, {}),
        ({}, {}),
    ],
    ids=[
        "request",
        "limit-only",
        "app-containers-add",
        "no-gpu",
        "init-larger",
        "init-smaller",
        "sidecar-adds",
        "init-plus-sidecar",
        "overhead",
        "fraction-ignored",
        "empty-spec",
    ],
)
def test_pod_requests(spec: dict[str, Any], expected: dict[str, int]) -> None:
    """A pod's effective request follows the scheduler's init, sidecar and overhead rules."""
    assert pod_requests(spec) == expected


# ---- selectors ---------------------------------------------------------------------------

LABELS = {"gpu-type": "h100", "memory": "81920", "zone": "a"}


@pytest.mark.parametrize(
    ("requirement", "matches"),
    [
        (Requirement("gpu-type", "In", ("h100", "h200")), True),
        (Requirement("gpu-type", "In", ("a100",)), False),
        (Requirement("missing", "In", ("",)), False),
        (Requirement("gpu-type", "NotIn", ("a100",)), True),
        (Requirement("gpu-type", "NotIn", ("h100",)), False),
        (Requirement("missing", "NotIn", ("x",)), True),  # absent label satisfies NotIn
        (Requirement("zone", "Exists"), True),
        (Requirement("missing", "Exists"), False),
        (Requirement("missing", "DoesNotExist"), True),
        (Requirement("zone", "DoesNotExist"), False),
        (Requirement("memory", "Gt", ("40000",)), True),
        (Requirement("memory", "Gt", ("81920",)), False),
        (Requirement("memory", "Lt", ("90000",)), True),
        (Requirement("memory", "Lt", ("81920",)), False),
        (Requirement("gpu-type", "Gt", ("1",)), False),  # not an integer: no match
        (Requirement("memory", "Gt", ("1", "2")), False),  # Gt takes exactly one value
        (Requirement("missing", "Lt", ("1",)), False),
        (Requirement("zone", "Near", ("a",)), False),
    ],
    ids=[
        "in",
        "in-miss",
        "in-absent",
        "notin",
        "notin-miss",
        "notin-absent",
        "exists",
        "exists-absent",
        "doesnotexist-absent",
        "doesnotexist-present",
        "gt",
        "gt-equal",
        "lt",
        "lt-equal",
        "gt-not-integer",
        "gt-two-values",
        "lt-absent",
        "unknown-operator",
    ],
)
def test_requirement_operators(requirement: Requirement, matches: bool) -> None:
    """Each matchExpressions operator matches node labels as Kubernetes defines it."""
    assert requirement.matches(LABELS) is matches


def test_node_selector_term_ands_expressions_and_fields() -> None:
    """A node selector term needs all its expressions and fields; an empty one matches none."""
    node = Node("gpu-7", labels=LABELS)
    assert NodeSelectorTerm((Requirement("zone", "In", ("a",)), Requirement("gpu-type", "Exists"))).matches(
        node
    )
    assert not NodeSelectorTerm(
        (Requirement("zone", "In", ("a",)), Requirement("gpu-type", "DoesNotExist"))
    ).matches(node)
    assert NodeSelectorTerm(match_fields=(Requirement("metadata.name", "In", ("gpu-7",)),)).matches(node)
    assert not NodeSelectorTerm(match_fields=(Requirement("metadata.name", "NotIn", ("gpu-7",)),)).matches(
        node
    )
    # only metadata.name is a node field the scheduler knows
    assert not NodeSelectorTerm(match_fields=(Requirement("spec.providerID", "NotIn", ("x",)),)).matches(node)
    assert not NodeSelectorTerm().matches(node)  # an empty term matches no node


def test_label_selector() -> None:
    """A label selector ANDs matchLabels and expressions, renders as a string and refuses Gt."""
    selector = label_selector_from_json(
        {
            "matchLabels": {"app": "llama"},
            "matchExpressions": [{"key": "track", "operator": "NotIn", "values": ["canary"]}],
        }
    )
    assert selector.matches({"app": "llama"})
    assert selector.matches({"app": "llama", "track": "stable"})
    assert not selector.matches({"app": "llama", "track": "canary"})
    assert not selector.matches({"app": "mistral"})
    assert str(selector) == "app=llama,track notin (canary)"
    with pytest.raises(SelectorError, match="Gt"):
        label_selector_from_json({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]})
    assert LabelSelector().empty


# ---- schedulable replicas ----------------------------------------------------------------


def test_fragmented_free_gpus_do_not_add_up() -> None:
    """Free GPUs spread over nodes count only where a whole replica fits on one node."""
    nodes = [gpu_node("a"), gpu_node("b")]
    pods = [holding("a", 7), holding("b", 7)]
    two = schedulable_replicas(nodes, pods, need(2))
    assert two.replicas == 0
    assert [(f.node, f.replicas, f.code) for f in two.nodes] == [
        ("a", 0, "insufficient"),
        ("b", 0, "insufficient"),
    ]
    assert "a fits 0 (1 of 8 nvidia.com/gpu free, needs 2 nvidia.com/gpu)" in two.explanation
    assert schedulable_replicas(nodes, pods, need(1)).replicas == 2


def test_free_is_allocatable_minus_bound_non_terminal_pods() -> None:
    """Free GPUs are allocatable minus what bound, non-terminal pods (even deleting) hold."""
    nodes = [gpu_node("a"), gpu_node("b", 4)]
    pods = [
        holding("a", 3),
        Pod("done", "x", "a", {GPU: 4}, phase="Succeeded"),  # terminal: frees its GPUs
        Pod("failed", "x", "b", {GPU: 4}, phase="Failed"),
        Pod("leaving", "x", "b", {GPU: 2}, deleting=True),  # still holds GPUs until gone
        Pod("pending", "x", None, {GPU: 8}),  # not bound: holds nothing
        Pod("elsewhere", "x", "gone-node", {GPU: 8}),
    ]
    result = schedulable_replicas(nodes, pods, need(2))
    assert result.replicas == 2 + 1  # a: 5 free -> 2; b: 2 free -> 1
    assert {f.node: dict(f.free) for f in result.nodes} == {"a": {GPU: 5}, "b": {GPU: 2}}
    assert result.explanation == (
        "3 more replicas of 2 nvidia.com/gpu fit: a fits 2 (5 of 8 nvidia.com/gpu free),"
        " b fits 1 (2 of 4 nvidia.com/gpu free)"
    )


def test_overcommitted_node_has_no_room_not_negative_room() -> None:
    """A node whose pods hold more than it offers has zero free GPUs, never negative."""
    result = schedulable_replicas([gpu_node("a", 2)], [holding("a", 3)], need(1))
    assert result.replicas == 0
    assert result.nodes[0].free[GPU] == 0


@pytest.mark.parametrize(
    ("taint", "tolerations", "fits"),
    [
        (Taint(GPU, "present", "NoSchedule"), (), 0),
        (Taint(GPU, "present", "NoExecute"), (), 0),
        (Taint(GPU, "present", "PreferNoSchedule"), (), 4),  # only a preference
        (Taint(GPU, "present", "NoSchedule"), (Toleration(GPU, "Exists", effect="NoSchedule"),), 4),
        (Taint(GPU, "present", "NoSchedule"), (Toleration(GPU, "Equal", "present"),), 4),
        (Taint(GPU, "present", "NoSchedule"), (Toleration(GPU, "Equal", "other"),), 0),
        (Taint("dedicated", "llm", "NoExecute"), (Toleration("", "Exists"),), 4),
    ],
    ids=[
        "noschedule",
        "noexecute",
        "prefer-noschedule",
        "tolerated-exists",
        "tolerated-equal",
        "wrong-value",
        "tolerate-everything",
    ],
)
def test_taints_block_unless_tolerated(taint: Taint, tolerations: tuple[Toleration, ...], fits: int) -> None:
    """NoSchedule and NoExecute taints block a node unless the replica tolerates them."""
    result = schedulable_replicas([gpu_node("a", taints=(taint,))], [], need(2, tolerations=tolerations))
    assert result.replicas == fits
    if not fits:
        assert result.nodes[0].code == "taint"
        assert f"taint {taint} not tolerated" in result.explanation


def test_cordoned_and_not_ready_nodes_are_skipped() -> None:
    """Cordoned and NotReady nodes fit nothing, unless the unschedulable taint is tolerated."""
    nodes = [gpu_node("cordoned", unschedulable=True), gpu_node("down", ready=False), gpu_node("ok", 2)]
    result = schedulable_replicas(nodes, [], need(2))
    assert result.replicas == 1
    assert [(f.node, f.code) for f in result.nodes] == [
        ("ok", "fits"),
        ("cordoned", "cordoned"),
        ("down", "not_ready"),
    ]
    assert "cordoned fits 0 (cordoned)" in result.explanation
    assert "down fits 0 (NotReady)" in result.explanation
    # a replica that tolerates the unschedulable taint may land on a cordoned node, as in Kubernetes
    tolerant = need(2, tolerations=(Toleration("node.kubernetes.io/unschedulable", "Exists"),))
    assert schedulable_replicas(nodes, [], tolerant).replicas == 1 + 4


def test_node_selector_and_required_affinity() -> None:
    """nodeSelector and required node affinity (ORed terms) both limit the nodes counted."""
    nodes = [
        gpu_node("h100-a", labels={"gpu": "h100", "zone": "a"}),
        gpu_node("h100-b", labels={"gpu": "h100", "zone": "b"}),
        gpu_node("a100-a", labels={"gpu": "a100", "zone": "a"}),
    ]
    by_selector = schedulable_replicas(nodes, [], need(8, node_selector={"gpu": "h100"}))
    assert by_selector.replicas == 2
    assert "a100-a fits 0 (nodeSelector gpu=h100 not matched (node has gpu=a100))" in by_selector.explanation

    zone_a = (NodeSelectorTerm((Requirement("zone", "In", ("a",)),)),)
    assert schedulable_replicas(nodes, [], need(8, node_affinity=zone_a)).replicas == 2
    # terms are ORed: zone a, or the node named h100-b
    either = (*zone_a, NodeSelectorTerm(match_fields=(Requirement("metadata.name", "In", ("h100-b",)),)))
    assert schedulable_replicas(nodes, [], need(8, node_affinity=either)).replicas == 3
    # selector and affinity both apply
    both = schedulable_replicas(nodes, [], need(8, node_selector={"gpu": "h100"}, node_affinity=zone_a))
    assert [(f.node, f.code) for f in both.nodes] == [
        ("h100-a", "fits"),
        ("a100-a", "node_selector"),
        ("h100-b", "affinity"),
    ]
    assert "required node affinity [zone in (a)] not matched" in both.explanation
    # an affinity with no terms admits no node
    assert schedulable_replicas(nodes, [], need(8, node_affinity=())).replicas == 0


def test_mig_profiles_are_their_own_resources() -> None:
    """Each MIG profile is its own resource; a multi-profile replica fits by its scarcest."""
    nodes = [
        Node("mig", allocatable={MIG1: 7, MIG2: 3}),
        gpu_node("full"),
        Node("cpu-only"),
    ]
    pods = [holding("mig", 5, MIG1)]
    mig = schedulable_replicas(nodes, pods, need(1, MIG1))
    assert mig.replicas == 2
    assert mig.without_gpu == 2
    assert mig.explanation == (
        "2 more replicas of 1 nvidia.com/mig-1g.10gb fit: mig fits 2 (2 of 7 nvidia.com/mig-1g.10gb free);"
        " 2 nodes without nvidia.com/mig-1g.10gb"
    )
    assert schedulable_replicas(nodes, pods, need(1)).replicas == 8  # whole GPUs: only "full"
    # a replica needing two profiles fits as often as its scarcest profile allows, on one node
    both = ReplicaRequirement(gpus={MIG1: 1, MIG2: 2})
    assert schedulable_replicas(nodes, pods, both).replicas == 1
    assert both.gpu_resource == f"{MIG1}+{MIG2}"
    assert both.gpus_per_replica == 3


def test_no_node_offers_the_resource() -> None:
    """When no node offers the requested resource, nothing fits and the explanation says so."""
    result = schedulable_replicas([Node("cpu")], [], need(1, "amd.com/gpu"))
    assert result.replicas == 0
    assert result.explanation == "0 more replicas of 1 amd.com/gpu fit: no node offers amd.com/gpu"


def test_long_node_lists_are_summarised() -> None:
    """Past the first nodes, the explanation sums the rest up by outcome."""
    nodes = [gpu_node(f"n{i:02}", 2) for i in range(12)] + [gpu_node("full", 2)]
    result = schedulable_replicas(nodes, [holding("full", 2)], need(2))
    assert result.replicas == 12
    assert len(result.nodes) == 13
    assert result.explanation.endswith(
        "n07 fits 1 (2 of 2 nvidia.com/gpu free), 5 more nodes fit 4 (4 fits, 1 insufficient)"
    )


def test_requirement_without_gpu_is_refused() -> None:
    """Counting replicas for a requirement with no GPU raises ValueError."""
    with pytest.raises(ValueError, match="at least one GPU"):
        schedulable_replicas([gpu_node("a")], [], ReplicaRequirement())


nodes_strategy = st.lists(
    st.tuples(st.integers(0, 8), st.booleans(), st.booleans()), min_size=1, max_size=5
)  # (gpus, cordoned, ready)
pods_strategy = st.lists(
    st.tuples(st.integers(0, 6), st.integers(0, 4), st.sampled_from(["Running", "Pending", "Succeeded"])),
    max_size=10,
)  # (node index, gpus, phase)


def build(
    nodes: list[tuple[int, bool, bool]], pods: list[tuple[int, int, str]]
) -> tuple[list[Node], list[Pod]]:
    """Nodes and pods from the property test's (gpus, cordoned, ready) and (node, gpus, phase)."""
    node_values = [gpu_node(f"n{i}", g, unschedulable=c, ready=r) for i, (g, c, r) in enumerate(nodes)]
    pod_values = [
        Pod(f"p{i}", "x", f"n{n}", {GPU: g} if g else {}, phase=phase) for i, (n, g, phase) in enumerate(pods)
    ]
    return node_values, pod_values


@settings(max_examples=60, deadline=None)
@given(nodes_strategy, pods_strategy, st.integers(1, 4), st.integers(0, 4), st.sampled_from(["n0", "n1"]))
def test_more_pods_never_make_more_room(
    nodes: list[tuple[int, bool, bool]], pods: list[tuple[int, int, str]], size: int, extra: int, on: str
) -> None:
    """Another pod never adds room, and the count never exceeds the pooled free GPUs."""
    node_values, pod_values = build(nodes, pods)
    before = schedulable_replicas(node_values, pod_values, need(size))
    after = schedulable_replicas(node_values, [*pod_values, Pod("new", "x", on, {GPU: extra})], need(size))
    assert after.replicas <= before.replicas
    # fragments never add up: the count is at most the pooled free GPUs divided by the size
    assert before.replicas <= sum(f.free[GPU] for f in before.nodes) // size
    assert before.replicas == sum(f.replicas for f in before.nodes)


# ---- parsing real objects ----------------------------------------------------------------


def test_node_from_json() -> None:
    """A Node object parses into name, extended allocatable, labels, taints and readiness."""
    obj = k8s.node(
        "gpu-a",
        4,
        labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        taints=[("nvidia.com/gpu", "present", "NoSchedule")],
        unschedulable=True,
        ready=False,
        extra={MIG1: 7},
    )
    node = node_from_json(obj)
    assert node.name == "gpu-a"
    assert dict(node.allocatable) == {GPU: 4, MIG1: 7}  # cpu, memory, pods are not extended resources
    assert node.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert node.taints == (Taint("nvidia.com/gpu", "present", "NoSchedule"),)
    assert node.unschedulable
    assert not node.ready
    assert node_from_json(k8s.node("b")).ready
    assert node_from_json({"metadata": {"name": "bare"}}) == Node("bare", ready=False)


def test_pod_from_json() -> None:
    """A Pod object parses into binding, requests (limits standing in), phase and readiness."""
    bound = pod_from_json(k8s.pod("p", "ns", labels={"app": "a"}, node="gpu-a", gpus=2, ready=True))
    assert (bound.name, bound.namespace, bound.node_name, dict(bound.requests)) == (
        "p",
        "ns",
        "gpu-a",
        {GPU: 2},
    )
    assert bound.ready
    assert bound.bound
    assert not bound.terminal
    assert not bound.deleting
    assert dict(bound.labels) == {"app": "a"}
    pending = pod_from_json(k8s.pod("q", gpus=1, limits_only=True))
    assert (pending.node_name, pending.phase, dict(pending.requests), pending.ready) == (
        None,
        "Pending",
        {GPU: 1},
        False,
    )
    assert pod_from_json(k8s.pod("r", node="n", phase="Succeeded")).terminal
    assert pod_from_json(k8s.pod("s", node="n", deleting=True)).deleting


def test_requirement_from_pod_spec() -> None:
    """A pod spec gives GPU needs, nodeSelector, tolerations and required affinity terms."""
    spec = k8s.pod_spec(
        2,
        node_selector={"gpu": "h100"},
        tolerations=[
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "k", "value": "v"},
        ],
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "mem", "operator": "Gt", "values": ["40000"]}]},
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 1,
                        "preference": {"matchExpressions": [{"key": "z", "operator": "In", "values": ["a"]}]},
                    }
                ],
            }
        },
    )
    requirement = requirement_from_pod_spec(spec)
    assert dict(requirement.gpus) == {GPU: 2}
    assert dict(requirement.node_selector) == {"gpu": "h100"}
    assert Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule") in requirement.tolerations
    assert Toleration("k", "Equal", "v", "") in requirement.tolerations  # operator defaults to Equal
    assert requirement.node_affinity == (
        NodeSelectorTerm((Requirement("mem", "Gt", ("40000",)),)),
        NodeSelectorTerm(match_fields=(Requirement("metadata.name", "In", ("n1",)),)),
    )
    assert requirement_from_pod_spec(k8s.pod_spec(0)).node_affinity is None
    # only GPU-like resources count; another device is not a GPU
    other = requirement_from_pod_spec({"containers": [{"resources": {"limits": {"example.com/fpga": "1"}}}]})
    assert dict(other.gpus) == {}
    assert dict(requirement_from_pod_spec(k8s.pod_spec(1, "amd.com/gpu")).gpus) == {"amd.com/gpu": 1}
    bad = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Near"}]}]}}}}  # fmt: skip
    with pytest.raises(SelectorError, match="Near"):
        requirement_from_pod_spec(bad)


@pytest.mark.parametrize(
    ("obj", "problem"),
    [
        (k8s.scaledobject("so", target="llama"), None),
        (k8s.scaledobject("so", target="llama", kind="Deployment", api_version="apps/v1"), None),
        (k8s.scaledobject("so", kind="StatefulSet", api_version="apps/v1"), "scales StatefulSet"),
        (
            k8s.scaledobject("so", kind="Rollout", api_version="argoproj.io/v1alpha1"),
            "only apps/v1 Deployments",
        ),
        (k8s.scaledobject("so", kind="Deployment", api_version="example.com/v1"), "only apps/v1 Deployments"),
        ({"metadata": {"name": "so", "namespace": "ns"}, "spec": {}}, "has no spec.scaleTargetRef.name"),
    ],
    ids=["default-kind", "deployment", "statefulset", "argo-rollout", "other-group", "no-target-name"],
)
def test_scaledobject_targets(obj: dict[str, Any], problem: str | None) -> None:
    """Only apps/v1 Deployments with a name are supported ScaledObject targets."""
    found = scaledobject_from_json(obj).unsupported_target()
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert problem in found


def test_deployment_from_json() -> None:
    """A Deployment parses replicas, selector and GPU needs, and names an unusable selector."""
    dep = deployment_from_json(k8s.deployment("llama", "inference", replicas=3, gpus=2))
    assert (dep.namespace, dep.name, dep.replicas, dep.problem) == ("inference", "llama", 3, None)
    assert dict(dep.selector.match_labels) == {"app": "llama"}
    assert dict(dep.requirement.gpus) == {GPU: 2}
    empty = deployment_from_json(k8s.deployment("x", match_labels={}))
    assert empty.problem is not None
    assert "empty spec.selector" in empty.problem
    bad = deployment_from_json(k8s.deployment("x", match_expressions=[{"key": "a", "operator": "Gt"}]))
    assert bad.problem is not None
    assert "unsupported operator 'Gt'" in bad.problem
    no_replicas = k8s.deployment("x")
    del no_replicas["spec"]["replicas"]
    assert deployment_from_json(no_replicas).replicas == 1  # the API's default


# ---- workload state ----------------------------------------------------------------------

SO = ScaledObject("inference", "llama", target_name="llama")


def dep(replicas: int = 3, gpus: int = 2, **kw: Any) -> Deployment:
    """The llama Deployment in inference, parsed, with ``replicas`` and ``gpus`` per pod."""
    return deployment_from_json(k8s.deployment("llama", "inference", replicas=replicas, gpus=gpus, **kw))


def member(name: str, **kw: Any) -> Pod:
    """A pod of the llama Deployment, with 2 GPUs and the app=llama label by default."""
    kw.setdefault("labels", {"app": "llama"})
    return pod_from_json(k8s.pod(name, "inference", gpus=2, **kw))


def test_workload_counts() -> None:
    """Pods of the workload split into ready, starting and pending; the others are ignored."""
    pods = [
        member("ready", node="a", ready=True),
        member("loading", node="a"),  # bound, not Ready: starting
        member("image-pull", node="b", phase="Pending"),  # bound, Pending: starting
        member("unschedulable"),  # not bound: pending
        member("leaving", node="b", ready=True, deleting=True),  # ignored
        member("finished", node="b", phase="Succeeded"),  # ignored
        member("stranger", node="a", labels={"app": "mistral"}),  # other workload
        pod_from_json(k8s.pod("other-ns", "prod", labels={"app": "llama"}, node="a")),
    ]
    nodes = [node_from_json(k8s.node("a", 8)), node_from_json(k8s.node("b", 8))]
    state = workload_state(SO, dep(replicas=6), pods, nodes, pods)
    assert isinstance(state, WorkloadState)
    assert replica_counts(state) == (
        6,
        1,
        2,
        3,
    )  # pending: 1 unbound + 2 the Deployment wants, not created yet
    assert state.current_replicas == state.ready_replicas + state.starting_replicas + state.pending_replicas
    # GPUs held: a has ready+loading+stranger+other-ns = 2+2+2+2 = 8; b has image-pull+leaving = 4
    assert state.gpu_schedulable_replicas == 2
    assert (state.gpus_per_replica, state.gpu_resource) == (2, GPU)
    assert state.explanation.startswith(
        "Deployment inference/llama: 6 current (1 ready, 2 starting, 3 pending incl. 2 not yet created);"
        " 2 more replicas of 2 nvidia.com/gpu fit: b fits 2 (4 of 8 nvidia.com/gpu free), a fits 0"
    )
    assert [f.node for f in state.nodes] == ["b", "a"]


def test_current_counts_live_pods_beyond_spec_replicas() -> None:
    """More live pods than spec.replicas (a surge) count as current replicas."""
    pods = [member(f"p{i}", node="a", ready=True) for i in range(4)]  # e.g. a rolling update surge
    state = workload_state(SO, dep(replicas=3), pods, [], pods)
    assert isinstance(state, WorkloadState)
    assert (state.current_replicas, state.ready_replicas, state.pending_replicas) == (4, 4, 0)


def test_template_without_gpu() -> None:
    """A template with no GPU gives no GPU count unless gpusPerReplica overrides it."""
    state = workload_state(SO, dep(gpus=0), [], [gpu_node("a")], [])
    assert isinstance(state, WorkloadState)
    assert state.gpu_schedulable_replicas is None
    assert (state.gpus_per_replica, state.gpu_resource) == (0, None)
    assert "the pod template requests no GPU and gpusPerReplica is not set" in state.explanation
    # the override names the count; the resource defaults to nvidia.com/gpu
    state = workload_state(SO, dep(gpus=0), [], [gpu_node("a")], [], gpus_per_replica_override=4)
    assert isinstance(state, WorkloadState)
    assert (state.gpu_schedulable_replicas, state.gpus_per_replica, state.gpu_resource) == (2, 4, GPU)
    assert "4 nvidia.com/gpu per replica from gpusPerReplica" in state.explanation


def test_override_keeps_the_templates_resource() -> None:
    """gpusPerReplica keeps the template's GPU resource and must be at least 1."""
    nodes = [Node("mig", allocatable={MIG1: 7})]
    state = workload_state(SO, dep(gpus=1, resource=MIG1), [], nodes, [], gpus_per_replica_override=2)
    assert isinstance(state, WorkloadState)
    assert (state.gpu_resource, state.gpus_per_replica, state.gpu_schedulable_replicas) == (MIG1, 2, 3)
    with pytest.raises(ValueError, match=">= 1"):
        workload_state(SO, dep(), [], nodes, [], gpus_per_replica_override=0)


def test_unusable_deployment_is_unknown() -> None:
    """A Deployment with an unusable selector yields Unknown with the reason."""
    bad = deployment_from_json(k8s.deployment("llama", "inference", match_labels={}))
    state = workload_state(SO, bad, [], [], [])
    assert isinstance(state, Unknown)
    assert state.reason.startswith("Deployment inference/llama cannot be assessed: empty spec.selector")


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 8),
    st.lists(
        st.tuples(st.booleans(), st.booleans(), st.sampled_from(["Running", "Pending", "Failed"])),
        max_size=12,
    ),
)
def test_counts_add_up(replicas: int, shapes: list[tuple[bool, bool, str]]) -> None:
    """Ready, starting and pending always add up to the current replica count."""
    pods = [
        member(f"p{i}", node="a" if bound else None, ready=bound and ready, phase=phase)
        for i, (bound, ready, phase) in enumerate(shapes)
    ]
    state = workload_state(SO, dep(replicas=replicas), pods, [gpu_node("a")], pods)
    assert isinstance(state, WorkloadState)
    assert state.current_replicas == state.ready_replicas + state.starting_replicas + state.pending_replicas
    assert state.current_replicas == max(replicas, sum(1 for *_, phase in shapes if phase != "Failed"))
