"""scaler doctor on how GPUs are handed out: GPUs the gate cannot count (DRA), and Kueue quotas below
``maxReplicaCount``. Against the API double serving DRA and Kueue, through the real client."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from scaler.cli import main
from tests import k8s_double as k8s
from tests.test_doctor import NS, healthy, kind

pytestmark = pytest.mark.e2e  # every test reads the Kubernetes API double over HTTP

QUEUE = {"kueue.x-k8s.io/queue-name": "gpus"}


def doctor(
    objs: Iterable[dict[str, Any]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    *,
    unserved: Iterable[str] = (),
    forbidden: Iterable[str] = (),
) -> list[tuple[str, str, str, str, str]]:
    """``scaler doctor --output json`` against a double; the findings but the not-scraped note."""
    with k8s.KubeDouble(token="t", unserved=unserved) as double:
        for obj in objs:
            double.apply(obj)
        for resource in forbidden:
            double.fail(403, resource=resource)
        config = k8s.kubeconfig(tmp_path / "kubeconfig", double.url, "t")
        main(["doctor", "--kubeconfig", str(config), "--output", "json"])
    found = json.loads(capsys.readouterr().out)
    return [
        (f["severity"], f["check"], f["object"], f["problem"], f["fix"])
        for f in found
        if f["check"] != "not-scraped"
    ]


def with_dra_node(extended: bool) -> list[dict[str, Any]]:
    """The healthy cluster plus a node whose GPUs are published only as a ResourceSlice, and the NVIDIA class
    (serving nvidia.com/gpu through DRA when ``extended``)."""
    return [
        *healthy(),
        k8s.node("dra-a", gpus=0, taints=[("nvidia.com/gpu", "present", "NoSchedule")]),
        k8s.resourceslice("dra-a", 8),
        k8s.deviceclass("gpu.nvidia.com", k8s.WHOLE_GPU, "nvidia.com/gpu" if extended else None),
    ]


def test_dra_only_gpus_a_request_cannot_reach_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A node with GPUs only in ResourceSlices and no DeviceClass serving nvidia.com/gpu: the Deployment's
    request (and the gate) cannot use them. With extendedResourceName set, no finding."""
    findings = doctor(with_dra_node(extended=False), tmp_path, capsys)
    assert [(s, c, o) for s, c, o, _, _ in findings] == [
        ("warning", "gpu-uncounted", f"Deployment {NS}/vllm-llama")
    ]
    problem, fix = findings[0][3:]
    assert problem.startswith(
        "node dra-a publishes GPUs only through DRA (ResourceSlices) and no DeviceClass serves"
    )
    assert "extendedResourceName: nvidia.com/gpu" in fix
    assert doctor(with_dra_node(extended=True), tmp_path, capsys) == []


def test_gpus_no_node_offers_are_uncounted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No allocatable GPU, no slice anywhere: the GPU check cannot clamp this workload, and doctor says so."""
    objs = [o for o in healthy() if o["kind"] != "Node"] + [k8s.node("cpu-a", 0)]
    findings = doctor(objs, tmp_path, capsys)
    assert [(s, c, o) for s, c, o, _, _ in findings] == [
        ("warning", "gpu-uncounted", f"Deployment {NS}/vllm-llama")
    ]
    assert "GPUs cannot be counted: no node's allocatable has nvidia.com/gpu" in findings[0][3]


def test_resourceslices_doctor_may_not_read_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 403 on resourceslices is a finding with the RBAC fix, not a crash; a cluster without DRA or Kueue
    (404) is not a finding at all."""
    findings = doctor(healthy(), tmp_path, capsys, forbidden=["resourceslices"])
    assert [(s, c, o) for s, c, o, _, _ in findings] == [
        ("warning", "gpu-uncounted", "resource.k8s.io/resourceslices")
    ]
    assert "HTTP 403" in findings[0][3]
    assert "rbac.yaml" in findings[0][4]
    assert doctor(healthy(), tmp_path, capsys, unserved=[k8s.DRA, k8s.KUEUE]) == []


def under_kueue(
    nominal: int, *peers: dict[str, Any], borrowing_limit: int | None = None
) -> list[dict[str, Any]]:
    """The healthy cluster (maxReplicaCount 8, 1 GPU a replica) with its Deployment submitted to LocalQueue
    ``gpus`` of ClusterQueue gpu-cq (``nominal`` GPUs; in cohort ml with ``peers``)."""
    objs = healthy()
    kind(objs, "Deployment")["spec"]["template"]["metadata"]["labels"].update(QUEUE)
    cohort = "ml" if peers else None
    objs.append(k8s.clusterqueue("gpu-cq", nominal, 0, cohort=cohort, borrowing_limit=borrowing_limit))
    objs += [k8s.clusterqueue(f"peer-{i}", cohort="ml", **p) for i, p in enumerate(peers)]
    objs.append(k8s.localqueue("gpus", NS, "gpu-cq"))
    return objs


def test_a_max_replica_count_the_queue_can_never_admit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """maxReplicaCount 8 of 1 GPU: 8 of nominal quota holds it; 4 does not, unless a cohort peer lends 4."""
    assert doctor(under_kueue(8), tmp_path, capsys) == []
    findings = doctor(under_kueue(4), tmp_path, capsys)
    assert [(s, c, o) for s, c, o, _, _ in findings] == [
        ("warning", "kueue-quota", f"ScaledObject {NS}/llama")
    ]
    assert "maxReplicaCount 8 exceeds what ClusterQueue gpu-cq can ever admit: 4 replicas" in findings[0][3]
    assert findings[0][4].startswith("set maxReplicaCount (and maxReplicas) to 4")
    assert doctor(under_kueue(4, {"nominal": 8, "used": 0, "lending_limit": 4}), tmp_path, capsys) == []
    capped = doctor(under_kueue(4, {"nominal": 8, "used": 0}, borrowing_limit=2), tmp_path, capsys)
    assert "can ever admit: 6 replicas" in capped[0][3]


def test_a_queue_that_does_not_exist_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A queue-name label naming no LocalQueue: every new replica would wait behind the admission gate."""
    objs = [o for o in under_kueue(8) if o["kind"] != "LocalQueue"]
    findings = doctor(objs, tmp_path, capsys)
    assert [(s, c, o) for s, c, o, _, _ in findings] == [("error", "kueue-quota", f"ScaledObject {NS}/llama")]
    assert "LocalQueue inference/gpus does not exist" in findings[0][3]
