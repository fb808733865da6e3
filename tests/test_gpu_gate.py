"""The GPU gate on clusters that hand out GPUs through DRA and admit pods through Kueue, end to end.

The real ``kubernetes`` client against the local API double (``tests/k8s_double.py``) serving
ResourceSlices, DeviceClasses, ResourceClaims, ResourceClaimTemplates, ClusterQueues, LocalQueues
and scheduling-gated pods in the shapes the API server, the NVIDIA DRA driver and Kueue write;
decisions through the live source and the engine. Every wait polls; nothing sleeps hoping.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client

from scaler.model import ClampKind, Decision, Note, NoteKind
from scaler.sources.kubernetes import KubernetesInventory, Unknown, WorkloadState
from scaler.sources.live import LiveSource
from scaler.sources.prometheus import PrometheusReader
from scaler.targets.registry import TargetKey
from tests import k8s_double as k8s
from tests.helpers import eventually, target_of
from tests.k8s_double import KubeDouble
from tests.test_kubernetes import FAST, CaptureLog  # the inventory tests' short timeouts and paging

pytestmark = pytest.mark.e2e  # every test serves the API double on a loopback port

NS = "inference"
# A pre-warm window asking for 10 replicas at 09:00: a scale-up the gate must let through, or hold.
PREWARM_10 = {
    "minReplicas": "1",
    "maxReplicas": "16",
    "prewarmStart": "0 8 * * *",
    "prewarmEnd": "0 20 * * *",
    "prewarmReplicas": "10",
}
NINE = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def log() -> CaptureLog:
    """A fresh log capture."""
    return CaptureLog()


@pytest.fixture
def start(log: CaptureLog) -> Iterator[Callable[..., KubernetesInventory]]:
    """Start an inventory against a double (after the test seeded it) and wait for the first sync."""
    started: list[KubernetesInventory] = []

    def run(double: KubeDouble) -> KubernetesInventory:
        inventory = KubernetesInventory(
            client.ApiClient(client.Configuration(host=double.url)), log=log, options=FAST
        )
        started.append(inventory)
        inventory.start()
        assert inventory.wait_synced(5), inventory.problem()
        return inventory

    yield run
    for inventory in started:
        inventory.stop()


def settled(
    inventory: KubernetesInventory, check: Callable[[WorkloadState], bool] = lambda s: True
) -> WorkloadState:
    """llama's state once every optional list has come in (no "not listed yet") and ``check`` holds."""

    def ready(state: WorkloadState | Unknown) -> bool:
        return (
            isinstance(state, WorkloadState)
            and "not listed yet" not in state.explanation + state.kueue_explanation
            and check(state)
        )

    state = eventually(lambda: inventory.workload(NS, "llama"), ready)
    assert isinstance(state, WorkloadState)
    return state


def decide(inventory: KubernetesInventory, metadata: dict[str, str]) -> Decision:
    """One decision at 09:00 through the live source (no Prometheus: the pre-warm window asks)."""
    source = LiveSource(PrometheusReader(None), inventory)
    target = target_of(TargetKey(NS, "llama"), metadata, "fp")
    return target.engine.decide(source._observe([target], NINE)[TargetKey(NS, "llama")])


def notes_of(decision: Decision, kind: NoteKind) -> list[Note]:
    """The decision's notes of ``kind``, in order."""
    return [n for n in decision.notes if n.kind is kind]


def llama_pod(name: str, **kw: Any) -> dict[str, Any]:
    """A pod of the llama Deployment, requesting 2 nvidia.com/gpu unless told otherwise."""
    kw.setdefault("gpus", 2)
    return k8s.pod(name, NS, labels={"app": "llama"}, owner="llama-5d8f", **kw)


def seed_dra_only(double: KubeDouble, running: int = 1) -> None:
    """A node whose eight H100s are published only as a ResourceSlice (no allocatable), the NVIDIA
    DeviceClass serving ``nvidia.com/gpu`` through DRA, and llama (2 GPUs a replica) with ``running``
    replicas, each holding its GPUs through the claim the scheduler wrote for it."""
    double.apply(k8s.node("dra-a", gpus=0))
    double.apply(k8s.resourceslice("dra-a", 8))
    double.apply(k8s.deviceclass("gpu.nvidia.com", k8s.WHOLE_GPU, "nvidia.com/gpu"))
    double.apply(k8s.deviceclass("mig.nvidia.com", k8s.MIG))
    double.apply(k8s.deployment("llama", NS, replicas=running, gpus=2))
    double.apply(k8s.scaledobject("llama", NS))
    for i in range(running):
        claim = f"llama-{i}-extended-resources-{i:05d}"
        double.apply(llama_pod(f"llama-{i}", node="dra-a", ready=True, extended_claim=claim))
        double.apply(
            k8s.resourceclaim(
                claim, NS, "dra-a", [f"gpu-{2 * i}", f"gpu-{2 * i + 1}"], pod=f"llama-{i}", extended=True
            )
        )


def test_the_double_serves_dra_and_kueue_objects_the_client_parses() -> None:
    """ResourceSlices, DeviceClasses, claims and templates parse into the client's typed v1 models
    (which refuse a missing required field); Kueue's objects come back as served."""
    with KubeDouble() as double:
        seed_dra_only(double)
        for s in k8s.resourceslices_mig("mig-a"):
            double.apply(s)
        double.apply(k8s.resourceclaimtemplate("one-mig", NS, "mig.nvidia.com"))
        double.apply(k8s.clusterqueue("gpu-cq", 8, 2))
        double.apply(k8s.localqueue("gpus", NS, "gpu-cq"))
        api = client.ApiClient(client.Configuration(host=double.url))
        # The typed models, read untyped: each field is optional in their annotations.
        resource: Any = client.ResourceV1Api(api)
        slices = {s.metadata.name: s for s in resource.list_resource_slice().items}
        assert slices["dra-a-gpu.nvidia.com-x7k2p"].spec.devices[0].attributes["type"].string == "gpu"
        counters = slices["mig-a-gpu.nvidia.com-counters"].spec.shared_counters[0]
        assert counters.counters["memory-slice-7"].value == "1"
        mig = slices["mig-a-gpu.nvidia.com-devices"].spec.devices[1]
        assert mig.consumes_counters[0].counter_set == "gpu-0-counter-set"
        classes = {c.metadata.name: c for c in resource.list_device_class().items}
        assert classes["gpu.nvidia.com"].spec.extended_resource_name == "nvidia.com/gpu"
        claim = resource.list_resource_claim_for_all_namespaces().items[0]
        assert [r.device for r in claim.status.allocation.devices.results] == ["gpu-0", "gpu-1"]
        template = resource.list_namespaced_resource_claim_template(NS).items[0]
        assert template.spec.spec.devices.requests[0].exactly.device_class_name == "mig.nvidia.com"
        core: Any = client.CoreV1Api(api)
        pod = core.read_namespaced_pod("llama-0", NS)
        assert (
            pod.status.extended_resource_claim_status.resource_claim_name
            == "llama-0-extended-resources-00000"
        )
        custom: Any = client.CustomObjectsApi(api)
        queue = custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "clusterqueues", "gpu-cq")
        assert queue["status"]["flavorsReservation"][0]["resources"][2] == {
            "name": "nvidia.com/gpu",
            "total": "2",
            "borrowed": "0",
        }


def test_a_dra_only_gpu_node_takes_the_scale_up(start: Callable[..., KubernetesInventory]) -> None:
    """The node's allocatable has no nvidia.com/gpu; its GPUs are a ResourceSlice. One replica holds
    two of them through its claim: 3 more fit, and the pre-warm scale-up to 4 goes through (an
    allocatable-only count saw 0 free GPUs here and would have held it at 1)."""
    with KubeDouble() as double:
        seed_dra_only(double, running=1)
        inventory = start(double)
        state = settled(inventory)
        assert state.gpu_schedulable_replicas == 3
        assert "dra-a fits 3 (6 of 8 gpu.nvidia.com (nvidia.com/gpu) devices free (DRA))" in state.explanation
        decision = decide(inventory, PREWARM_10)
        assert decision.replicas == 4
        gpu = next(c for c in decision.clamps if c.kind is ClampKind.GPU_INVENTORY)
        assert (gpu.before, gpu.after) == (10, 4)
        # A second replica's claim takes two more devices: the room follows the claims' watch.
        double.apply(llama_pod("llama-1", node="dra-a", extended_claim="llama-1-extended-resources-00001"))
        double.apply(
            k8s.resourceclaim(
                "llama-1-extended-resources-00001",
                NS,
                "dra-a",
                ["gpu-2", "gpu-3"],
                pod="llama-1",
                extended=True,
            )
        )
        # The claim's and the pod's watches run on their threads: wait for both, not the first.
        state = settled(inventory, lambda s: s.gpu_schedulable_replicas == 2 and s.starting_replicas == 1)
        assert state.starting_replicas == 1


def test_a_mig_partitioned_gpu_counts_through_its_counters(start: Callable[..., KubernetesInventory]) -> None:
    """An A100 published as partitionable devices (shared counters in one slice, devices in another).
    A replica claims one 1g.5gb MIG device (a ResourceClaimTemplate of mig.nvidia.com with a profile
    selector). Two are allocated: 5 more fit. The whole GPU then fits nothing, though no claim names it."""
    with KubeDouble() as double:
        double.apply(k8s.node("mig-a", gpus=0))
        for s in k8s.resourceslices_mig("mig-a"):
            double.apply(s)
        double.apply(k8s.deviceclass("gpu.nvidia.com", k8s.WHOLE_GPU, "nvidia.com/gpu"))
        double.apply(k8s.deviceclass("mig.nvidia.com", k8s.MIG))
        profile = "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"
        double.apply(k8s.resourceclaimtemplate("one-1g", NS, "mig.nvidia.com", 1, [profile]))
        double.apply(k8s.resourceclaimtemplate("whole", NS, "gpu.nvidia.com", 1))
        double.apply(k8s.deployment("llama", NS, replicas=2, gpus=0, claim_template="one-1g"))
        double.apply(k8s.deployment("big", NS, replicas=0, gpus=0, claim_template="whole"))
        double.apply(k8s.scaledobject("llama", NS))
        double.apply(k8s.scaledobject("big", NS))
        for i in range(2):
            double.apply(llama_pod(f"llama-{i}", node="mig-a", ready=True, gpus=0, claim_template="one-1g"))
            double.apply(
                k8s.resourceclaim(
                    f"llama-{i}-gpu",
                    NS,
                    "mig-a",
                    [f"gpu-0-mig-1g5gb-{i}"],
                    pod=f"llama-{i}",
                    device_class="mig.nvidia.com",
                )
            )
        inventory = start(double)
        state = settled(inventory)
        assert state.gpu_resource == "mig.nvidia.com"
        assert state.gpu_schedulable_replicas == 5
        assert "mig-a fits 5 (5 of 7 mig.nvidia.com devices free (DRA))" in state.explanation
        big = eventually(
            lambda: inventory.workload(NS, "big"), lambda s: isinstance(s, WorkloadState) and bool(s.nodes)
        )
        assert isinstance(big, WorkloadState)
        assert big.gpu_schedulable_replicas == 0
        assert (
            "mig-a fits 0 (0 of 1 gpu.nvidia.com devices free (DRA), needs 1 gpu.nvidia.com)"
            in big.explanation
        )
        # Both MIG claims released: the whole GPU is free again.
        for i in range(2):
            double.delete("ResourceClaim", NS, f"llama-{i}-gpu")
        big = eventually(
            lambda: inventory.workload(NS, "big"),
            lambda s: isinstance(s, WorkloadState) and s.gpu_schedulable_replicas == 1,
        )


def seed_kueue(
    double: KubeDouble,
    nominal: int,
    used: int,
    admitted: int,
    gated: int,
    version: str = "v1beta1",
    **queue: Any,
) -> None:
    """A 16-GPU node, Kueue's queues (at API ``version``), and llama (2 GPUs a replica, submitted to
    LocalQueue ``gpus``) with ``admitted`` running replicas and ``gated`` pods behind the admission gate."""
    double.apply(k8s.node("gpu-a", 16))
    double.apply(k8s.clusterqueue("gpu-cq", nominal, used, version=version, **queue))
    double.apply(k8s.localqueue("gpus", NS, "gpu-cq", version=version))
    labels = {"kueue.x-k8s.io/queue-name": "gpus"}
    double.apply(k8s.deployment("llama", NS, replicas=admitted + gated, gpus=2, template_labels=labels))
    double.apply(k8s.scaledobject("llama", NS))
    for i in range(admitted):
        double.apply(llama_pod(f"llama-{i}", node="gpu-a", ready=True))
    for i in range(gated):
        double.apply(llama_pod(f"llama-g{i}", scheduling_gates=["kueue.x-k8s.io/admission"]))


def test_a_kueue_quota_that_binds_clamps_the_target(start: Callable[..., KubernetesInventory]) -> None:
    """8 GPUs of nominal quota, 4 reserved by the two admitted replicas, one pod gated: the queue
    admits 2 + 2 = 4 replicas although the node fits 6 more. The gated pod is Pending, not starting."""
    with KubeDouble() as double:
        seed_kueue(double, nominal=8, used=4, admitted=2, gated=1)
        inventory = start(double)
        state = settled(inventory, lambda s: s.kueue_quota_replicas is not None)
        assert (state.ready_replicas, state.starting_replicas, state.pending_replicas) == (2, 0, 1)
        assert state.gated_replicas == 1
        assert state.gpu_schedulable_replicas == 6
        assert state.kueue_quota_replicas == 4
        assert "1 waiting behind kueue.x-k8s.io/admission" in state.kueue_explanation
        decision = decide(inventory, PREWARM_10)
        assert decision.replicas == 4
        assert decision.limited_by is ClampKind.KUEUE_QUOTA
        clamp = next(c for c in decision.clamps if c.kind is ClampKind.KUEUE_QUOTA)
        assert (clamp.before, clamp.after) == (8, 4)  # the GPU inventory clamped 10 -> 2 bound + 6 first
        assert "ClusterQueue gpu-cq admits 2 more replicas" in decision.reason
        assert decision.observation.kueue_quota_replicas == 4
        # The quota grows: Kueue's status follows, and so does the clamp.
        double.apply(k8s.clusterqueue("gpu-cq", 16, 4))
        settled(inventory, lambda s: s.kueue_quota_replicas == 8)


def test_a_cohort_lends_its_unused_quota_up_to_the_borrowing_limit(
    start: Callable[..., KubernetesInventory],
) -> None:
    """The queue's own quota is spent; a cohort peer has 6 GPUs unused, and borrowingLimit 4 caps the loan."""
    with KubeDouble() as double:
        seed_kueue(double, nominal=8, used=8, admitted=4, gated=0, cohort="ml", borrowing_limit=4)
        double.apply(k8s.clusterqueue("peer-cq", 8, 2, cohort="ml"))
        inventory = start(double)
        state = settled(inventory, lambda s: s.kueue_quota_replicas == 6)
        assert "4 more" not in state.kueue_explanation
        assert "ClusterQueue gpu-cq (cohort ml) admits 2 more replicas" in state.kueue_explanation


def test_gpus_that_cannot_be_counted_never_clamp(start: Callable[..., KubernetesInventory]) -> None:
    """No node has nvidia.com/gpu in its allocatable and no ResourceSlice publishes any: the count is
    unknown, not 0. The decision says so and lets the scale-up through."""
    with KubeDouble() as double:
        double.apply(k8s.node("cpu-a", gpus=0))
        double.apply(k8s.deployment("llama", NS, replicas=1, gpus=2))
        double.apply(k8s.scaledobject("llama", NS))
        double.apply(llama_pod("llama-0"))
        inventory = start(double)
        state = settled(inventory)
        assert state.gpu_schedulable_replicas is None
        decision = decide(inventory, PREWARM_10)
        assert decision.replicas == 10
        assert not [c for c in decision.clamps if c.kind is ClampKind.GPU_INVENTORY]
        (skipped,) = notes_of(decision, NoteKind.GPU_CHECK_SKIPPED)
        assert "GPUs cannot be counted: no node's allocatable has nvidia.com/gpu" in skipped


def test_a_cluster_without_dra_or_kueue_says_so_once(
    start: Callable[..., KubernetesInventory], log: CaptureLog
) -> None:
    """resource.k8s.io and kueue.x-k8s.io answer 404: each resource is logged once as not served
    (never as a failing watch), re-asked quietly, and the allocatable GPUs are counted as before. A
    Deployment that names a Kueue queue gets a note: its quota cannot be read."""
    with KubeDouble(unserved=(k8s.DRA, k8s.KUEUE)) as double:
        double.apply(k8s.node("gpu-a", 8))
        labels = {"kueue.x-k8s.io/queue-name": "gpus"}
        double.apply(k8s.deployment("llama", NS, replicas=1, gpus=2, template_labels=labels))
        double.apply(k8s.scaledobject("llama", NS))
        double.apply(llama_pod("llama-0", node="gpu-a", ready=True))
        inventory = start(double)
        state = settled(inventory)
        assert state.gpu_schedulable_replicas == 3
        # Re-asked on its own schedule (backoff_max_seconds), and still said only once.
        asked = f"{k8s.DRA}/resourceslices"
        eventually(
            lambda: sum(r.path == asked and r.status == 404 for r in list(double.requests)), lambda n: n >= 3
        )
        not_served = log.events("kubernetes_resource_not_served")
        assert sorted(e["resource"] for e in not_served) == [
            "clusterqueues",
            "deviceclasses",
            "localqueues",
            "resourceclaims",
            "resourceclaimtemplates",
            "resourceslices",
        ]
        assert not [
            e
            for e in log.events("kubernetes_watch_failed")
            if e["resource"] in {x["resource"] for x in not_served}
        ]
        decision = decide(inventory, PREWARM_10)
        assert decision.replicas == 4
        (quota_unknown,) = notes_of(decision, NoteKind.KUEUE_QUOTA_UNKNOWN)
        assert "kueue.x-k8s.io not served by this cluster" in quota_unknown


def test_resourceslices_the_scaler_may_not_read_leave_allocatable_counted(
    start: Callable[..., KubernetesInventory], log: CaptureLog
) -> None:
    """An older ClusterRole: 403 on resourceslices. Allocatable GPUs are counted, and the explanation says
    DRA's are not; on a DRA-only node the count is unknown, not 0."""
    with KubeDouble() as double:
        seed_dra_only(double, running=1)
        double.apply(k8s.node("gpu-b", 8))
        double.fail(403, resource="resourceslices")
        inventory = start(double)
        state = eventually(
            lambda: inventory.workload(NS, "llama"),
            lambda s: isinstance(s, WorkloadState) and "HTTP 403" in s.explanation,
        )
        assert isinstance(state, WorkloadState)
        assert state.gpu_schedulable_replicas == 4  # gpu-b's 8 allocatable GPUs; dra-a uncounted
        assert (
            "DRA devices not counted (resourceslices not listed yet (HTTP 403 Forbidden" in state.explanation
        )
        assert "RBAC" in state.explanation
        assert len(log.events("kubernetes_watch_failed", "resourceslices")) == 1
        double.delete("Node", "", "gpu-b")
        state = eventually(
            lambda: inventory.workload(NS, "llama"),
            lambda s: isinstance(s, WorkloadState) and s.gpu_schedulable_replicas is None,
        )
        assert isinstance(state, WorkloadState)
        assert (
            "GPUs cannot be counted: no node's allocatable has nvidia.com/gpu and the DRA objects"
            " cannot be read" in state.explanation
        )


def kueue_reads(double: KubeDouble, version: str) -> int:
    """Successful lists and watches of Kueue's queues at ``version``."""
    prefix = f"/apis/kueue.x-k8s.io/{version}/"
    return sum(r.path.startswith(prefix) and r.status == 200 for r in list(double.requests))


def test_a_kueue_serving_only_v1beta2_is_read_there(start: Callable[..., KubernetesInventory]) -> None:
    """Kueue serving only v1beta2 (its storage version since 0.16): the queues are read there, a
    v1beta2 ``cohortName`` lends as ``cohort`` did, and the quota clamps as before."""
    with KubeDouble(kueue_versions=("v1beta2",)) as double:
        seed_kueue(
            double, nominal=8, used=8, admitted=4, gated=0, version="v1beta2", cohort="ml", borrowing_limit=4
        )
        double.apply(k8s.clusterqueue("peer-cq", 8, 2, cohort="ml", version="v1beta2"))
        inventory = start(double)
        state = settled(inventory, lambda s: s.kueue_quota_replicas == 6)
        assert "ClusterQueue gpu-cq (cohort ml) admits 2 more replicas" in state.kueue_explanation
        assert kueue_reads(double, "v1beta2") >= 2  # clusterqueues and localqueues
        assert kueue_reads(double, "v1beta1") == 0


def test_a_kueue_serving_only_v1beta1_is_still_read(start: Callable[..., KubernetesInventory]) -> None:
    """An older Kueue serving only v1beta1: v1beta2 answers 404, and v1beta1 is read."""
    with KubeDouble(kueue_versions=("v1beta1",)) as double:
        seed_kueue(double, nominal=8, used=4, admitted=2, gated=1)
        inventory = start(double)
        settled(inventory, lambda s: s.kueue_quota_replicas == 4)
        assert kueue_reads(double, "v1beta1") >= 2
        assert kueue_reads(double, "v1beta2") == 0


def test_a_kueue_serving_neither_version_is_named(
    start: Callable[..., KubernetesInventory], log: CaptureLog
) -> None:
    """Kueue's group answering at neither v1beta2 nor v1beta1: not read as an empty quota but named,
    in the log and in the decision's note for a workload Kueue admits."""
    with KubeDouble(kueue_versions=()) as double:
        seed_kueue(double, nominal=8, used=4, admitted=2, gated=1)
        inventory = start(double)
        settled(inventory)
        reasons = [e["reason"] for e in log.events("kubernetes_resource_not_served")]
        assert any("serves clusterqueues at none of v1beta2, v1beta1" in r for r in reasons)
        decision = decide(inventory, PREWARM_10)
        (quota_unknown,) = notes_of(decision, NoteKind.KUEUE_QUOTA_UNKNOWN)
        assert "at none of v1beta2, v1beta1" in quota_unknown
        assert "a version this scaler does not read" in quota_unknown


def test_a_dra_pool_being_rewritten_is_counted_once_complete(
    start: Callable[..., KubernetesInventory],
) -> None:
    """The driver republishes its pool as generation 2 in two slices and one is out: the GPUs are not
    counted (never from the stale or the partial generation), the decision says which pool and lets
    the scale-up through; once the second slice is published the pool counts and the fit clamps."""
    with KubeDouble() as double:
        seed_dra_only(double, running=1)
        double.delete("ResourceSlice", "", "dra-a-gpu.nvidia.com-x7k2p")
        double.apply(k8s.resourceslice("dra-a", 4, generation=1, name="dra-a-old"))
        double.apply(k8s.resourceslice("dra-a", 4, generation=2, name="dra-a-g2-a", slices=2))
        inventory = start(double)
        state = settled(inventory, lambda s: s.gpu_schedulable_replicas is None)
        assert "gpu.nvidia.com pool dra-a (1 of 2 slices of generation 2)" in state.explanation
        decision = decide(inventory, PREWARM_10)
        assert decision.replicas == 10
        (skipped,) = notes_of(decision, NoteKind.GPU_CHECK_SKIPPED)
        assert "DRA pools not counted until complete" in skipped
        double.apply(k8s.resourceslice("dra-a", 4, generation=2, name="dra-a-g2-b", slices=2, first=4))
        settled(inventory, lambda s: s.gpu_schedulable_replicas == 3)
