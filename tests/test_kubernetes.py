"""The Kubernetes inventory end to end: the real ``kubernetes`` client against the local API double.

Every wait polls with a short timeout; nothing sleeps a fixed time hoping a watch delivered.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client, watch

from scaler import inventory as scaler_inventory
from scaler.model import Decision
from scaler.sources import kubernetes as source
from scaler.sources.kubernetes import (
    InventoryOptions,
    KubernetesConfigError,
    KubernetesInventory,
    Unknown,
    WorkloadState,
)
from scaler.targets.registry import TargetKey
from tests import k8s_double as k8s
from tests.helpers import eventually, replica_counts, target_of
from tests.k8s_double import KubeDouble

NS = "inference"
GPU = "nvidia.com/gpu"
FAST = InventoryOptions(
    page_size=2,  # every list pages
    watch_timeout_seconds=30,
    request_timeout_seconds=5,
    backoff_initial_seconds=0.02,
    backoff_max_seconds=0.1,
    failure_grace_seconds=0.5,
)
# What the inventory must have listed to answer (its other resources only refine the answer).
REQUIRED = ("nodes", "pods", "deployments", "scaledobjects")

T = TypeVar("T")


def present(value: T | None) -> T:
    """``value``, asserted not None: the client's models type every field as optional."""
    assert value is not None
    return value


class CaptureLog:
    """A structlog-style logger that keeps what it is given."""

    def __init__(self) -> None:
        self.records: list[tuple[str, str, dict[str, Any]]] = []
        self._lock = threading.Lock()

    def warning(self, event: str, /, **kw: Any) -> None:
        """Keep a warning event and its fields."""
        with self._lock:
            self.records.append(("warning", event, kw))

    def info(self, event: str, /, **kw: Any) -> None:
        """Keep an info event and its fields."""
        with self._lock:
            self.records.append(("info", event, kw))

    def events(self, event: str, resource: str | None = None) -> list[dict[str, Any]]:
        """The fields of every ``event`` logged, only those for ``resource`` when one is given."""
        with self._lock:
            return [kw for _, e, kw in self.records if e == event and resource in (None, kw.get("resource"))]


@pytest.fixture
def double() -> Iterator[KubeDouble]:
    """A running local Kubernetes API double, stopped after the test."""
    with KubeDouble() as server:
        yield server


@pytest.fixture
def log() -> CaptureLog:
    """A fresh log capture."""
    return CaptureLog()


@pytest.fixture
def start(double: KubeDouble, log: CaptureLog) -> Iterator[Callable[..., KubernetesInventory]]:
    """Start an inventory against the double (after the test has seeded it) and wait for the first sync."""
    started: list[KubernetesInventory] = []

    def run(options: InventoryOptions = FAST, sync: bool = True, **kw: Any) -> KubernetesInventory:
        api = client.ApiClient(client.Configuration(host=double.url))
        inventory = KubernetesInventory(api, log=log, options=options, **kw)
        started.append(inventory)
        inventory.start()
        if sync:
            assert inventory.wait_synced(5), inventory.problem()
            # synced means listed; the watch requests follow: wait for them too
            assert all(double.wait_watchers(resource) for resource in k8s.WATCHED)
        return inventory

    yield run
    for inventory in started:
        inventory.stop()


def seed(
    double: KubeDouble,
    nodes: tuple[tuple[str, int], ...] = (("gpu-a", 8), ("gpu-b", 8)),
    replicas: int = 2,
    gpus: int = 2,
    **deployment: Any,
) -> None:
    """Seed GPU nodes, the llama Deployment and its ScaledObject into the double."""
    for name, count in nodes:
        double.apply(k8s.node(name, count))
    double.apply(k8s.deployment("llama", NS, replicas=replicas, gpus=gpus, **deployment))
    double.apply(k8s.scaledobject("llama", NS))


def with_a_batch_job(
    double: KubeDouble, start: Callable[..., KubernetesInventory]
) -> tuple[KubernetesInventory, int]:
    """The seeded cluster with an 8-GPU training pod on gpu-a, an inventory synced to it (4
    schedulable replicas), and how many times the pods had been listed by then."""
    seed(double)
    double.apply(k8s.pod("batch", "training", node="gpu-a", gpus=8))
    inventory = start()
    wait_state(inventory, lambda s: s.gpu_schedulable_replicas == 4)
    return inventory, double.count("pods", watch=False)


def llama_pod(name: str, **kw: Any) -> dict[str, Any]:
    """A pod owned by the llama Deployment, requesting 2 GPUs unless told otherwise."""
    kw.setdefault("gpus", 2)
    return k8s.pod(name, NS, labels={"app": "llama"}, owner="llama-5d8f", **kw)


def state_of(inventory: KubernetesInventory, **kw: Any) -> Callable[[], WorkloadState | Unknown]:
    """A callable reading llama's workload state from the inventory."""
    return lambda: inventory.workload(NS, "llama", **kw)


def known(check: Callable[[WorkloadState], bool]) -> Callable[[WorkloadState | Unknown], bool]:
    """A predicate true for a known WorkloadState that passes ``check``."""
    return lambda s: isinstance(s, WorkloadState) and check(s)


def wait_state(
    inventory: KubernetesInventory, check: Callable[[WorkloadState], bool], **kw: Any
) -> WorkloadState:
    """The first known llama state that passes ``check``, polled until it appears."""
    state = eventually(state_of(inventory, **kw), known(check))
    assert isinstance(state, WorkloadState)
    return state


def set_phase(phase: str) -> Callable[[dict[str, Any]], None]:
    """A modifier that sets a pod's phase and marks the pod not Ready."""

    def change(obj: dict[str, Any]) -> None:
        obj["status"]["phase"] = phase
        for condition in obj["status"]["conditions"]:
            if condition["type"] in ("Ready", "ContainersReady"):
                condition["status"] = "False"

    return change


# ---- the double speaks the API well enough for the client's typed models ----------------


def test_double_objects_deserialize_into_client_models(double: KubeDouble) -> None:
    """The double's lists, pages, reads, custom objects, watches and 404s parse as client models."""
    seed(double)
    double.apply(llama_pod("p1", node="gpu-a", ready=True))
    double.apply(llama_pod("p2"))
    api = client.ApiClient(client.Configuration(host=double.url))
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    nodes = core.list_node()
    assert [present(n.metadata).name for n in nodes.items] == ["gpu-a", "gpu-b"]
    assert present(present(nodes.items[0].status).allocatable)[GPU] == "8"
    list_version = present(present(nodes.metadata).resource_version)
    assert int(list_version) >= int(present(present(nodes.items[1].metadata).resource_version))
    first = core.list_pod_for_all_namespaces(limit=1)
    assert present(first.metadata)._continue
    assert len(first.items) == 1
    assert present(core.read_namespaced_pod("p1", NS).spec).node_name == "gpu-a"
    template = present(apps.read_namespaced_deployment("llama", NS).spec).template
    container = present(template.spec).containers[0]
    assert present(present(container.resources).limits)[GPU] == "2"
    custom = client.CustomObjectsApi(api)
    found = custom.get_namespaced_custom_object("keda.sh", "v1alpha1", NS, "scaledobjects", "llama")
    assert isinstance(found, dict)
    assert found["kind"] == "ScaledObject"
    # kubernetes.watch has no annotations: its Watch is used untyped
    stream: Any = watch.Watch()  # type: ignore[no-untyped-call]
    events = []
    for event in stream.stream(core.list_node, resource_version="0"):
        events.append((event["type"], event["object"].metadata.name))
        if len(events) == 2:
            stream.stop()
    assert events == [("ADDED", "gpu-a"), ("ADDED", "gpu-b")]
    with pytest.raises(client.exceptions.ApiException) as missing:
        core.read_namespaced_pod("nope", NS)
    assert missing.value.status == 404


# ---- listing, watching, answering from the cache -----------------------------------------


def test_lists_pages_then_answers_from_the_cache(
    double: KubeDouble, start: Callable[..., KubernetesInventory]
) -> None:
    """The inventory lists in pages, counts replicas and GPU room per node, and reads from its cache."""
    seed(double, nodes=(("gpu-a", 8), ("gpu-b", 8), ("gpu-c", 8)), replicas=3)
    double.apply(llama_pod("llama-1", node="gpu-a", ready=True))
    double.apply(llama_pod("llama-2", node="gpu-b"))
    double.apply(llama_pod("llama-3"))
    inventory = start()
    assert inventory.synced
    state = inventory.workload(NS, "llama")
    assert isinstance(state, WorkloadState)
    assert replica_counts(state) == (3, 1, 1, 1)
    assert (state.gpus_per_replica, state.gpu_resource, state.gpu_schedulable_replicas) == (2, GPU, 3 + 3 + 4)
    assert state.explanation == (
        "Deployment inference/llama: 3 current (1 ready, 1 starting, 1 pending);"
        " 10 more replicas of 2 nvidia.com/gpu fit: gpu-c fits 4 (8 of 8 nvidia.com/gpu free),"
        " gpu-a fits 3 (6 of 8 nvidia.com/gpu free), gpu-b fits 3 (6 of 8 nvidia.com/gpu free)"
    )
    # three nodes with page_size 2: the list pages with continue tokens
    assert any("continue" in r.query for r in double.requests if r.resource == "nodes")
    # reads never call the API
    before = len(double.requests)
    for _ in range(100):
        inventory.workload(NS, "llama")
    assert len(double.requests) == before


def test_fragmented_gpus_and_pods_freeing_them_through_watch_events(
    double: KubeDouble, start: Callable[..., KubernetesInventory]
) -> None:
    """Fragmented free GPUs fit no replica; watch events that free or take GPUs change the room."""
    seed(double)
    for node in ("gpu-a", "gpu-b"):
        double.apply(k8s.pod(f"batch-{node}", "training", node=node, gpus=7, ready=True))
    inventory = start()
    state = wait_state(inventory, lambda s: True)
    assert state.gpu_schedulable_replicas == 0  # one free GPU on each node is not a 2-GPU slot
    assert "gpu-a fits 0 (1 of 8 nvidia.com/gpu free, needs 2 nvidia.com/gpu)" in state.explanation

    double.modify("Pod", "training", "batch-gpu-a", set_phase("Succeeded"))  # MODIFIED: terminal
    wait_state(inventory, lambda s: s.gpu_schedulable_replicas == 4)
    double.delete("Pod", "training", "batch-gpu-b")  # DELETED
    wait_state(inventory, lambda s: s.gpu_schedulable_replicas == 8)
    double.apply(k8s.pod("batch-again", "training", node="gpu-b", gpus=8))  # ADDED
    state = wait_state(inventory, lambda s: s.gpu_schedulable_replicas == 4)
    assert "gpu-b fits 0 (0 of 8 nvidia.com/gpu free" in state.explanation


def test_node_changes_taints_cordon_and_readiness(
    double: KubeDouble, start: Callable[..., KubernetesInventory]
) -> None:
    """Untolerated taints, cordoning, NotReady and deletion each take a node's GPU room away."""
    seed(double, nodes=(("gpu-a", 4),))
    inventory = start()
    wait_state(inventory, lambda s: s.gpu_schedulable_replicas == 2)

    def taint(obj: dict[str, Any]) -> None:
        obj["spec"]["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]

    double.modify("Node", "", "gpu-a", taint)
    state = wait_state(inventory, lambda s: s.gpu_schedulable_replicas == 0)
    assert "gpu-a fits 0 (taint nvidia.com/gpu=present:NoSchedule not tolerated)" in state.explanation

    tolerating = k8s.deployment(
        "llama", NS, replicas=2, gpus=2, tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}]
    )
    double.apply(tolerating)  # the Deployment's template changes: MODIFIED
    wait_state(inventory, lambda s: s.gpu_schedulable_replicas == 2)

    double.modify("Node", "", "gpu-a", lambda o: o["spec"].update(unschedulable=True))
    state = wait_state(inventory, lambda s: s.gpu_schedulable_replicas == 0)
    assert "gpu-a fits 0 (cordoned)" in state.explanation
    double.modify("Node", "", "gpu-a", lambda o: o["spec"].pop("unschedulable"))
    wait_state(inventory, lambda s: s.gpu_schedulable_replicas == 2)

    def not_ready(obj: dict[str, Any]) -> None:
        for condition in obj["status"]["conditions"]:
            if condition["type"] == "Ready":
                condition["status"] = "Unknown"

    double.modify("Node", "", "gpu-a", not_ready)
    state = wait_state(inventory, lambda s: s.gpu_schedulable_replicas == 0)
    assert "gpu-a fits 0 (NotReady)" in state.explanation
    double.delete("Node", "", "gpu-a")
    # The last GPU node gone: nothing offers the GPUs, so they cannot be counted (never "0 fit").
    state = wait_state(inventory, lambda s: not s.nodes)
    assert state.gpu_schedulable_replicas is None
    assert state.explanation.endswith(
        "GPUs cannot be counted: no node's allocatable has nvidia.com/gpu and no ResourceSlice"
        " publishes a device of a DeviceClass serving it"
    )


def test_node_selector_and_required_affinity(
    double: KubeDouble, start: Callable[..., KubernetesInventory]
) -> None:
    """Only nodes matching nodeSelector and required affinity count; the others say which excluded them."""
    double.apply(k8s.node("h100-1", 8, labels={"gpu": "h100", "nvidia.com/gpu.memory": "81559"}))
    double.apply(k8s.node("h100-2", 8, labels={"gpu": "h100", "nvidia.com/gpu.memory": "81559"}))
    double.apply(k8s.node("a100-1", 8, labels={"gpu": "a100", "nvidia.com/gpu.memory": "40960"}))
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["40960"]}
                        ],
                        "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["h100-2"]}],
                    }
                ]
            }
        }
    }
    double.apply(k8s.deployment("llama", NS, gpus=4, node_selector={"gpu": "h100"}, affinity=affinity))
    double.apply(k8s.scaledobject("llama", NS))
    inventory = start()
    state = wait_state(inventory, lambda s: True)
    assert state.gpu_schedulable_replicas == 2
    assert [(f.node, f.code) for f in state.nodes] == [
        ("h100-1", "fits"),
        ("a100-1", "node_selector"),
        ("h100-2", "affinity"),
    ]


def test_mig_profiles(double: KubeDouble, start: Callable[..., KubernetesInventory]) -> None:
    """A MIG profile counts as its own GPU resource; nodes without it are reported apart."""
    mig = "nvidia.com/mig-1g.10gb"
    double.apply(k8s.node("mig-a", 7, mig))
    double.apply(k8s.node("full-a", 8))
    double.apply(k8s.deployment("llama", NS, gpus=1, resource=mig))
    double.apply(k8s.scaledobject("llama", NS))
    double.apply(llama_pod("llama-1", node="mig-a", gpus=1, resource=mig, ready=True))
    inventory = start()
    state = wait_state(inventory, lambda s: True)
    assert (state.gpu_resource, state.gpus_per_replica, state.gpu_schedulable_replicas) == (mig, 1, 6)
    assert state.explanation.endswith(f"mig-a fits 6 (6 of 7 {mig} free); 1 nodes without {mig}")


def test_replica_progression_pending_starting_ready(
    double: KubeDouble, start: Callable[..., KubernetesInventory]
) -> None:
    """Replicas count as pending, starting or Ready as pods progress; deleting and foreign pods do not."""
    seed(double, replicas=2)
    inventory = start()

    def counts(s: WorkloadState) -> tuple[int, int, int, int]:
        return (s.current_replicas, s.ready_replicas, s.starting_replicas, s.pending_replicas)

    # the Deployment wants 2 and no pod exists yet: both are pending
    assert counts(wait_state(inventory, lambda s: True)) == (2, 0, 0, 2)
    double.apply(llama_pod("llama-1"))  # created, not scheduled
    double.apply(llama_pod("llama-2"))
    wait_state(inventory, lambda s: counts(s) == (2, 0, 0, 2))
    double.apply(llama_pod("llama-1", node="gpu-a"))  # scheduled: starting, holds its GPUs
    state = wait_state(inventory, lambda s: counts(s) == (2, 0, 1, 1))
    assert state.gpu_schedulable_replicas == 3 + 4
    double.apply(llama_pod("llama-1", node="gpu-a", ready=True))
    wait_state(inventory, lambda s: counts(s) == (2, 1, 0, 1))
    # the Deployment is scaled to 5: three more are pending before their pods exist
    double.modify("Deployment", NS, "llama", lambda o: o["spec"].update(replicas=5))
    state = wait_state(inventory, lambda s: counts(s) == (5, 1, 0, 4))
    assert "4 pending incl. 3 not yet created" in state.explanation
    # a pod being deleted no longer counts; a pod of another app never did
    double.apply(llama_pod("llama-1", node="gpu-a", ready=True, deleting=True))
    double.apply(k8s.pod("mistral-1", NS, labels={"app": "mistral"}, node="gpu-b", ready=True))
    wait_state(inventory, lambda s: counts(s) == (5, 0, 0, 5))


def test_override_and_template_without_gpu(
    double: KubeDouble, start: Callable[..., KubernetesInventory]
) -> None:
    """A template requesting no GPU leaves GPU room unknown unless gpus_per_replica is overridden."""
    seed(double, gpus=0)
    inventory = start()
    state = wait_state(inventory, lambda s: True)
    assert state.gpu_schedulable_replicas is None
    assert "GPU room unknown: the pod template requests no GPU" in state.explanation
    state = wait_state(inventory, lambda s: True, gpus_per_replica_override=4)
    assert (state.gpu_schedulable_replicas, state.gpus_per_replica, state.gpu_resource) == (4, 4, GPU)


# ---- what cannot be answered -------------------------------------------------------------


def test_missing_and_unsupported_targets(
    double: KubeDouble, start: Callable[..., KubernetesInventory]
) -> None:
    """Missing ScaledObjects, non-Deployment targets and absent Deployments are Unknown with a reason."""
    seed(double)
    double.apply(k8s.scaledobject("sts", NS, target="llama-sts", kind="StatefulSet", api_version="apps/v1"))
    double.apply(k8s.scaledobject("orphan", NS, target="gone"))
    inventory = start()
    assert inventory.workload(NS, "nope") == Unknown("ScaledObject inference/nope not found")
    assert inventory.workload(NS, "sts") == Unknown(
        "ScaledObject inference/sts scales StatefulSet llama-sts (apps/v1);"
        " only apps/v1 Deployments are supported"
    )
    assert inventory.workload(NS, "orphan") == Unknown(
        "Deployment inference/gone (scaleTargetRef of ScaledObject inference/orphan) not found"
    )
    assert inventory.workload("other", "llama") == Unknown("ScaledObject other/llama not found")
    # the ScaledObject is retargeted: the watch delivers it
    double.apply(k8s.scaledobject("sts", NS, target="llama"))
    eventually(lambda: inventory.workload(NS, "sts"), lambda s: isinstance(s, WorkloadState))


def unlisted(
    double: KubeDouble, start: Callable[..., KubernetesInventory], log: CaptureLog, status: int, resource: str
) -> tuple[KubernetesInventory, Unknown]:
    """An inventory started on the seeded double while listing ``resource`` fails with ``status``,
    once its watch has failed and every other resource it needs is listed (each lists on a thread
    of its own, so the failure alone says nothing of the others), and the Unknown it answers for llama."""
    seed(double)
    double.fail(status, resource=resource)
    inventory = start(sync=False)
    eventually(lambda: log.events("kubernetes_watch_failed", resource), bool)
    # A watch opens once its list has been taken in: then that resource is synced.
    assert all(double.wait_watchers(other) for other in REQUIRED if other != resource)
    state = inventory.workload(NS, "llama")
    assert isinstance(state, Unknown)
    return inventory, state


def test_not_synced_is_unknown_until_the_first_list(
    double: KubeDouble, start: Callable[..., KubernetesInventory], log: CaptureLog
) -> None:
    """Until the first list succeeds the state is Unknown with the API error; after it, known."""
    inventory, state = unlisted(double, start, log, 500, "nodes")
    assert not inventory.synced
    assert not inventory.wait_synced(0.05)
    assert state.reason == (
        "Kubernetes inventory unavailable: nodes not listed yet"
        " (HTTP 500 Internal Server Error: injected fault 500)"
    )
    double.heal()
    assert inventory.wait_synced(5)
    wait_state(inventory, lambda s: s.gpu_schedulable_replicas == 8)


def test_keda_missing_says_so(
    double: KubeDouble, start: Callable[..., KubernetesInventory], log: CaptureLog
) -> None:
    """A 404 on ScaledObjects gives an Unknown that asks whether KEDA is installed."""
    _, state = unlisted(double, start, log, 404, "scaledobjects")
    assert "is KEDA installed?" in state.reason


# ---- failures and recovery ---------------------------------------------------------------


def test_api_500s_turn_unknown_after_the_grace_period_then_recover(
    double: KubeDouble, start: Callable[..., KubernetesInventory], log: CaptureLog
) -> None:
    """Under API 500s the last state answers for the grace period, then Unknown; it recovers in place."""
    seed(double)
    now = [1000.0]
    inventory = start(options=dataclasses.replace(FAST, failure_grace_seconds=30), clock=lambda: now[0])
    wait_state(inventory, lambda s: s.gpu_schedulable_replicas == 8)

    double.fail(500)
    double.drop_watches()
    # the drop is logged first, then the 500 of the re-list (a new warning when the error changes)
    eventually(
        lambda: log.events("kubernetes_watch_failed", "pods"),
        lambda events: any("HTTP 500" in kw["error"] for kw in events),
    )
    # within the grace period the last known state still answers
    assert isinstance(inventory.workload(NS, "llama"), WorkloadState)
    now[0] += 31
    state = inventory.workload(NS, "llama")
    assert isinstance(state, Unknown)
    assert "pods watch failing for 31s (HTTP 500 Internal Server Error: injected fault 500)" in state.reason
    assert inventory.problem() == state.reason
    # retries go on with backoff, but each distinct error is logged once: the drop, then the 500s
    eventually(lambda: double.count("pods", status=500), lambda n: n >= 5)
    errors = [kw["error"] for kw in log.events("kubernetes_watch_failed", "pods")]
    assert [e.split(":")[0] for e in errors] == ["ProtocolError", "HTTP 500 Internal Server Error"]

    double.apply(llama_pod("llama-1", node="gpu-a", ready=True))  # a change made during the outage
    double.heal()
    state = wait_state(inventory, lambda s: s.ready_replicas == 1)  # the same inventory, no restart
    assert state.gpu_schedulable_replicas == 3 + 4
    assert log.events("kubernetes_watch_recovered", "pods")


def test_dropped_watch_relists_and_catches_changes_made_while_disconnected(
    double: KubeDouble, start: Callable[..., KubernetesInventory], log: CaptureLog
) -> None:
    """A dropped watch re-lists on reconnecting and so catches changes made while disconnected."""
    inventory, lists_before = with_a_batch_job(double, start)

    double.fail(500, resource="pods")  # the client cannot reconnect...
    assert double.drop_watches("pods") == 1  # ...after its watch is cut mid-stream
    eventually(lambda: double.count("pods", status=500), lambda n: n >= 1)
    double.modify("Pod", "training", "batch", set_phase("Succeeded"))  # nobody is watching
    double.heal()
    wait_state(inventory, lambda s: s.gpu_schedulable_replicas == 8)
    assert double.count("pods", watch=False, status=200) > lists_before  # caught by a fresh list
    assert "ProtocolError" in log.events("kubernetes_watch_failed", "pods")[0]["error"]


def test_410_gone_on_an_open_watch_relists(
    double: KubeDouble, start: Callable[..., KubernetesInventory], log: CaptureLog
) -> None:
    """A 410 on an open watch causes exactly one re-list and is not logged as a failure."""
    inventory, lists_before = with_a_batch_job(double, start)

    # the change never reaches the watch (it lagged), then history is compacted: ERROR 410
    double.modify("Pod", "training", "batch", set_phase("Failed"), notify=False)
    assert double.expire("pods") == 1
    wait_state(inventory, lambda s: s.gpu_schedulable_replicas == 8)
    assert double.count("pods", watch=False) == lists_before + 1
    assert not log.events("kubernetes_watch_failed")  # 410 is routine, not a failure


def test_410_gone_when_resuming_a_watch_relists(
    double: KubeDouble, start: Callable[..., KubernetesInventory]
) -> None:
    """A 410 when resuming from a compacted version causes exactly one re-list."""
    inventory, lists_before = with_a_batch_job(double, start)

    double.delete("Pod", "training", "batch", notify=False)
    double.expire(tell_watches=False)  # compacted; the open watch does not know yet
    assert double.end_watches("pods") == 1  # the stream ends; resuming from the old version gets 410
    wait_state(inventory, lambda s: s.gpu_schedulable_replicas == 8)
    assert double.count("pods", watch=False) == lists_before + 1


def test_clean_watch_end_resumes_from_the_last_version_without_listing(
    double: KubeDouble, start: Callable[..., KubernetesInventory], log: CaptureLog
) -> None:
    """A watch that ends cleanly resumes from the last version seen, without listing again."""
    seed(double)
    inventory = start()
    wait_state(inventory, lambda s: s.gpu_schedulable_replicas == 8)
    lists_before = double.count(watch=False)
    double.apply(llama_pod("llama-1", node="gpu-a"))
    wait_state(inventory, lambda s: s.starting_replicas == 1)
    last_seen = double.get("Pod", NS, "llama-1")["metadata"]["resourceVersion"]  # type: ignore[index]
    watches_before = double.count("pods", watch=True)

    assert double.end_watches("pods") == 1
    double.apply(llama_pod("llama-2", node="gpu-b"))  # replayed from history or sent live
    wait_state(inventory, lambda s: s.starting_replicas == 2)
    resumed = [r for r in double.requests if r.resource == "pods" and r.watch][watches_before:]
    assert resumed
    assert resumed[0].query["resourceVersion"] == last_seen
    assert double.count(watch=False) == lists_before
    assert not log.events("kubernetes_watch_failed")


@pytest.mark.e2e
def test_events_split_across_chunks_or_sharing_one(log: CaptureLog) -> None:
    """Watch events split across chunks, or several sharing one chunk, are all applied."""
    with KubeDouble(odd_chunks=True) as double:
        seed(double)
        api = client.ApiClient(client.Configuration(host=double.url))
        with KubernetesInventory(api, log=log, options=FAST) as inventory:
            assert inventory.wait_synced(5)
            assert double.wait_watchers("pods")
            double.apply(llama_pod("llama-1", node="gpu-a", ready=True))  # one event, two chunks
            wait_state(inventory, lambda s: s.ready_replicas == 1)
            double.delete("Pod", NS, "llama-1", notify=False)
            double.apply(llama_pod("llama-2", node="gpu-b"), notify=False)
            assert double.end_watches("pods") == 1  # the resumed watch replays both in one chunk
            wait_state(inventory, lambda s: (s.ready_replicas, s.starting_replicas) == (0, 1))
        assert not log.events("kubernetes_watch_failed")


def test_bookmarks_move_the_resume_version(
    double: KubeDouble, start: Callable[..., KubernetesInventory]
) -> None:
    """A bookmark moves the version the next watch resumes from; watches ask for bookmarks."""
    seed(double)
    inventory = start()
    wait_state(inventory, lambda s: True)
    double.apply(k8s.node("gpu-c", 8))  # moves the cluster's version; pods see nothing
    bookmark_version = str(double.rv)
    watches_before = double.count("pods", watch=True)
    assert double.bookmark("pods") == 1
    assert double.end_watches("pods") == 1
    eventually(lambda: double.count("pods", watch=True), lambda n: n > watches_before)
    resumed = [r for r in double.requests if r.resource == "pods" and r.watch][watches_before]
    assert resumed.query["resourceVersion"] == bookmark_version
    assert resumed.query["allowWatchBookmarks"] == "true"


def test_a_malformed_object_is_skipped_not_fatal(
    double: KubeDouble,
    start: Callable[..., KubernetesInventory],
    log: CaptureLog,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An object that fails to parse is skipped and logged while the watch goes on."""
    real = scaler_inventory.pod_from_json  # what scaler.sources.kubernetes imports and calls

    def fragile(obj: Any) -> Any:
        if obj["metadata"]["name"] == "poison":
            raise ValueError("unexpected shape")
        return real(obj)

    monkeypatch.setattr(source, "pod_from_json", fragile)
    seed(double)
    inventory = start()
    double.apply(k8s.pod("poison", NS, labels={"app": "llama"}, node="gpu-a"))
    double.apply(llama_pod("llama-1", node="gpu-a", ready=True))
    wait_state(inventory, lambda s: s.ready_replicas == 1 and s.starting_replicas == 0)
    skipped = log.events("kubernetes_object_skipped", "pods")
    assert skipped == [
        {"resource": "pods", "object": "inference/poison", "error": "ValueError: unexpected shape"}
    ]


# ---- configuration, secrets, lifecycle, threads ------------------------------------------


@pytest.mark.e2e
def test_from_kubeconfig_with_a_token_that_is_never_logged(tmp_path: Path, log: CaptureLog) -> None:
    """A kubeconfig token authenticates and is never logged; a wrong one's 401 reason omits it."""
    token = "tok-5f2a9c-very-secret"
    with KubeDouble(token=token) as double:
        seed(double)
        inventory = KubernetesInventory.from_config(
            str(k8s.kubeconfig(tmp_path / "config", double.url, token)), log=log, options=FAST
        )
        with inventory:
            assert inventory.wait_synced(5)
            assert isinstance(inventory.workload(NS, "llama"), WorkloadState)
            double.fail(500)
            double.drop_watches()
            eventually(lambda: log.events("kubernetes_watch_failed"), lambda e: len(e) >= 4)
            double.heal()
            eventually(inventory.problem, lambda p: p is None)
        assert token not in repr(log.records)

        wrong = KubernetesInventory.from_config(
            str(k8s.kubeconfig(tmp_path / "wrong", double.url, "not-the-token")), log=log, options=FAST
        )
        with wrong:
            state = eventually(
                lambda: wrong.workload(NS, "llama"), lambda s: "401" in getattr(s, "reason", "")
            )
            assert isinstance(state, Unknown)
            assert "not-the-token" not in state.reason


def test_from_config_defaults_to_kubeconfig_env_outside_a_cluster(
    double: KubeDouble, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside a cluster, from_config(None) reads the kubeconfig that KUBECONFIG names."""
    seed(double)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(k8s.kubeconfig(tmp_path / "config", double.url, "t")))
    with KubernetesInventory.from_config(None, options=FAST) as inventory:
        assert inventory.wait_synced(5)


def test_from_config_uses_the_service_account_inside_a_cluster(
    double: KubeDouble, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside a cluster, from_config(None) uses the service account over HTTPS and ignores KUBECONFIG."""
    from kubernetes.config import incluster_config

    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_text("not a real CA")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(tmp_path / "token"))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(tmp_path / "ca.crt"))
    host, port = double.url.removeprefix("http://").split(":")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))  # must not be read
    inventory = KubernetesInventory.from_config(None, options=FAST)
    with inventory:
        # in-cluster means HTTPS with the service account's CA; the plain-HTTP double cannot answer that
        state = eventually(
            lambda: inventory.workload(NS, "llama"), lambda s: "SSL" in getattr(s, "reason", "")
        )
    assert isinstance(state, Unknown)
    assert double.count(status=200) == 0


def test_from_config_errors_name_the_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Config errors name their source: the kubeconfig path or the in-cluster service account."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(KubernetesConfigError, match=r"the kubeconfig .*absent does not exist"):
        KubernetesInventory.from_config(str(tmp_path / "absent"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    with pytest.raises(KubernetesConfigError, match="in-cluster service account"):
        KubernetesInventory.from_config(None)


def test_stop_closes_open_watches_promptly(
    double: KubeDouble, start: Callable[..., KubernetesInventory]
) -> None:
    """stop() interrupts every open watch (they would otherwise run to the server's 30 s timeout):
    when it returns, no watch thread is left, the double's watches close, and a restart is refused."""
    seed(double)
    inventory = start()
    assert double.wait_watchers("pods")
    assert double.wait_watchers("scaledobjects")
    inventory.stop()  # joins each thread, for 5 s at most: a watch left blocked would outlive it
    eventually(double.watchers, lambda n: n == 0)
    assert not [t for t in threading.enumerate() if t.name.startswith("k8s-watch-")]
    with pytest.raises(RuntimeError, match="already"):
        inventory.start()


def test_reads_are_consistent_while_watches_write(
    double: KubeDouble, start: Callable[..., KubernetesInventory]
) -> None:
    """Reads racing watch writes always see a consistent WorkloadState and never raise."""
    seed(double, replicas=4)
    inventory = start()
    wait_state(inventory, lambda s: True)
    errors: list[BaseException] = []
    seen: list[WorkloadState | Unknown] = []
    done = threading.Event()

    def reader() -> None:
        try:
            while not done.is_set():
                seen.append(inventory.workload(NS, "llama"))
        except BaseException as exc:  # noqa: BLE001, RUF100 - any failure in a reader is surfaced below
            errors.append(exc)

    readers = [threading.Thread(target=reader) for _ in range(3)]
    for thread in readers:
        thread.start()
    for i in range(20):
        double.apply(llama_pod(f"llama-{i % 4}", node="gpu-a" if i % 2 else None, ready=i % 3 == 0, gpus=1))
    # the last writes leave llama-1 and llama-3 bound, llama-0 and llama-2 unscheduled
    wait_state(inventory, lambda s: (s.starting_replicas + s.ready_replicas, s.pending_replicas) == (2, 2))
    done.set()
    for thread in readers:
        thread.join(5)
    assert not errors
    states = [s for s in seen if isinstance(s, WorkloadState)]
    assert len(states) == len(seen) > 0
    assert all(
        s.current_replicas == s.ready_replicas + s.starting_replicas + s.pending_replicas for s in states
    )


def test_cold_start_is_measured_from_the_pods_timestamps(
    double: KubeDouble, start: Callable[..., KubernetesInventory]
) -> None:
    """Seven Ready pods that took 180-300 s from creation to Ready (2 s of it Pending): p90 288 s."""
    seed(double, replicas=7)
    for i, seconds in enumerate((180, 200, 210, 240, 260, 280, 300)):
        double.apply(
            llama_pod(
                f"llama-{i}",
                node="gpu-a" if i < 4 else "gpu-b",
                ready=True,
                created=f"2026-12-01T08:{10 + i:02d}:00Z",
                scheduled_at=f"2026-12-01T08:{10 + i:02d}:02Z",
                ready_at=f"2026-12-01T08:{10 + i + seconds // 60:02d}:{seconds % 60:02d}Z",
            )
        )
    double.apply(llama_pod("llama-new", node="gpu-b", created="2026-12-01T09:00:00Z"))  # not Ready yet
    inventory = start()
    state = wait_state(inventory, lambda s: s.cold_start.samples == 7)
    assert state.cold_start.lead_p90_s == pytest.approx(288.0)
    assert state.cold_start.pending_p90_s == pytest.approx(2.0)
    assert state.cold_start.startup_p90_s == pytest.approx(286.0)
    # scaled down: the measurement remembers the pods that are gone
    for i in range(5):
        double.delete("Pod", NS, f"llama-{i}")
    state = wait_state(inventory, lambda s: s.ready_replicas == 2)
    assert state.cold_start.samples == 7
    assert state.cold_start.lead_p90_s == pytest.approx(288.0)


def test_too_few_measured_pods_keep_the_configured_or_default_lead(
    double: KubeDouble, start: Callable[..., KubernetesInventory]
) -> None:
    """Three measured pods are not enough: the decision keeps the configured lead, or 180 s."""
    from scaler.sources.live import LiveSource
    from scaler.sources.prometheus import PrometheusReader

    seed(double, replicas=3)
    for i in range(3):
        double.apply(
            llama_pod(
                f"llama-{i}",
                node="gpu-a",
                ready=True,
                created="2026-12-01T08:00:00Z",
                ready_at="2026-12-01T08:07:00Z",
            )
        )
    inventory = start()
    state = wait_state(inventory, lambda s: s.cold_start.samples == 3)
    assert state.cold_start.lead_p90_s == pytest.approx(420.0)
    source = LiveSource(PrometheusReader(None), inventory)
    for metadata, lead in (({}, (180.0, "default")), ({"coldStartSeconds": "240"}, (240.0, "configured"))):
        target = target_of(TargetKey(NS, "llama"), metadata, "fp")
        obs = source._observe([target], datetime(2026, 12, 1, 9, 0, tzinfo=UTC))[TargetKey(NS, "llama")]
        assert obs.cold_start_samples == 3
        assert obs.cold_start_seconds == pytest.approx(420.0)
        decision = target.engine.decide(obs)
        assert decision.lead is not None
        assert (decision.lead.seconds, decision.lead.source) == lead


# ---- did the decision land? --------------------------------------------------------------

CPU_ONLY = [
    {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
    }
]


def landing_after_refreshes(inventory: KubernetesInventory, metadata: dict[str, str]) -> Decision:
    """Decide at 0, 60 and 120 s through the live source; the last says whether the targets landed."""
    from scaler.sources.live import LiveSource
    from scaler.sources.prometheus import PrometheusReader

    source = LiveSource(PrometheusReader(None), inventory)
    target = target_of(TargetKey(NS, "llama"), metadata, "fp")
    decisions = []
    for second in (0, 60, 120):
        now = datetime(2026, 12, 1, 9, 0, tzinfo=UTC) + timedelta(seconds=second)
        decisions.append(target.engine.decide(source._observe([target], now)[TargetKey(NS, "llama")]))
    return decisions[-1]


@pytest.mark.parametrize(
    ("hpa", "fallback", "metadata", "reason", "gap"),
    [
        # KEDA rewrote the HPA to a CPU target while the scaler was unreachable (KEDA issue #7729)
        (k8s.hpa("llama", NS, metrics=CPU_ONLY), False, {"minReplicas": "3"}, "metric_missing", 1),
        # KEDA serves its fallback replicas
        (k8s.hpa("llama", NS), True, {"minReplicas": "3"}, "fallback", 1),
        # the scaler asks for more than the HPA's maxReplicas
        (k8s.hpa("llama", NS, max_replicas=2, current=2, desired=2), False, {"minReplicas": "4"}, "max", 2),
        # no HPA at all: the ScaledObject is not (yet) scaling
        (None, False, {"minReplicas": "3"}, "no_hpa", 1),
    ],
    ids=["metric-missing", "fallback", "hpa-at-max", "no-hpa"],
)
def test_the_landing_reason_read_from_the_hpa_and_the_scaledobject(
    double: KubeDouble,
    start: Callable[..., KubernetesInventory],
    hpa: dict[str, Any] | None,
    fallback: bool,
    metadata: dict[str, str],
    reason: str,
    gap: int,
) -> None:
    """The Deployment runs 2; the scaler asks for more; the API says why it stays at 2."""
    seed(double, replicas=2)
    double.apply(k8s.scaledobject("llama", NS, fallback=fallback))
    for i in range(2):
        double.apply(llama_pod(f"llama-{i}", node="gpu-a", ready=True))
    if hpa is not None:
        double.apply(hpa)
    inventory = start()
    state = wait_state(inventory, lambda s: s.ready_replicas == 2)
    assert state.hpa_read
    assert state.deployment_replicas == 2
    assert (state.hpa is None) == (hpa is None)
    assert state.scaledobject_fallback == fallback
    decision = landing_after_refreshes(inventory, metadata)
    assert decision.landing is not None
    assert (decision.landing.landed, decision.landing.gap, decision.landing.reason) == (2, gap, reason)
    assert any(note.startswith("not landed: Deployment at 2") for note in decision.notes)


def test_hpas_that_cannot_be_read_leave_the_inventory_standing_and_the_reason_unknown(
    double: KubeDouble, start: Callable[..., KubernetesInventory]
) -> None:
    """An older ClusterRole without horizontalpodautoscalers: 403 on their list; the GPU check still works."""
    seed(double, replicas=2)
    for i in range(2):
        double.apply(llama_pod(f"llama-{i}", node="gpu-a", ready=True))
    double.fail(403, resource="horizontalpodautoscalers")
    inventory = start(sync=False)
    assert inventory.wait_synced(5), inventory.problem()
    state = wait_state(inventory, lambda s: s.ready_replicas == 2)
    assert not state.hpa_read
    assert state.hpa is None
    assert state.gpu_schedulable_replicas is not None
    assert state.gpu_schedulable_replicas > 0
    decision = landing_after_refreshes(inventory, {"minReplicas": "3"})
    assert decision.landing is not None
    assert decision.landing.reason == "hpa_unknown"
