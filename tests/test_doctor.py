"""scaler doctor against the Kubernetes API double, through the real client: one test per finding.

A healthy cluster (a tainted GPU node, a vLLM Deployment with a preStop hook and a long
grace period, one ScaledObject with only this scaler's trigger, agreeing bounds and a fallback,
an ingress-nginx Ingress with long timeouts, and the scaler as manifests/base deploys it, two
replicas Ready) gives no finding but the note that Prometheus was not asked; each test then adds
one pitfall and expects its finding.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest

from scaler.cli import main
from scaler.manifest import DEFAULT_SCALER_ADDRESS
from scaler.model import Inert, InertReason, Observation
from scaler.outputs.collector import DecisionCollector
from scaler.sim.exposition import MetricsServer
from scaler.sim.fleet import SimulatedFleet
from scaler.sim.prometheus import LocalPrometheus
from scaler.targets.registry import TargetKey
from tests import k8s_double as k8s
from tests.helpers import target_of

pytestmark = pytest.mark.e2e  # every test reads the Kubernetes API double over HTTP

NS = "inference"
GPU_TAINT = ("nvidia.com/gpu", "present", "NoSchedule")
BASE = Path(__file__).resolve().parents[1] / "manifests" / "base"


def scaler_objects(ready: int = 2) -> list[dict[str, Any]]:
    """The scaler as manifests/base deploys it (its Deployment, Service and PodDisruptionBudget),
    the Deployment with ``ready`` replicas Ready."""
    objs = [
        yaml.safe_load((BASE / f"{n}.yaml").read_text())
        for n in ("deployment", "service", "poddisruptionbudget")
    ]
    wanted = objs[0]["spec"]["replicas"]
    objs[0]["status"] = {
        "observedGeneration": 1,
        "replicas": wanted,
        "updatedReplicas": wanted,
        "readyReplicas": ready,
    }
    return objs


def healthy() -> list[dict[str, Any]]:
    """A cluster with no pitfall: tainted GPU node, careful Deployment, agreeing ScaledObject, Ingress."""
    deployment = k8s.deployment(
        "vllm-llama",
        NS,
        replicas=2,
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    )
    pod_spec = deployment["spec"]["template"]["spec"]
    pod_spec["terminationGracePeriodSeconds"] = 600
    pod_spec["containers"][0]["lifecycle"] = {"preStop": {"exec": {"command": ["sleep", "10"]}}}
    so = k8s.scaledobject("llama", NS, target="vllm-llama")
    so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"] = 2, 8
    so["spec"]["triggers"][0]["metadata"] |= {
        "minReplicas": "2",
        "maxReplicas": "8",
        "labelSelector": 'model_name="meta-llama/Llama-3.1-8B-Instruct"',
        "scalerAddress": DEFAULT_SCALER_ADDRESS,
    }
    so["spec"]["fallback"] = {"failureThreshold": 4, "replicas": 4, "behavior": "currentReplicasIfHigher"}
    ingress = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": "llama",
            "namespace": NS,
            "annotations": {
                "nginx.ingress.kubernetes.io/proxy-read-timeout": "600",
                "nginx.ingress.kubernetes.io/proxy-send-timeout": "600",
            },
        },
        "spec": {
            "ingressClassName": "nginx",
            "rules": [
                {
                    "http": {
                        "paths": [
                            {
                                "path": "/",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": "vllm-llama", "port": {"number": 8000}}},
                            }
                        ]
                    }
                }
            ],
        },
    }
    hpa = k8s.hpa("llama", NS, min_replicas=2, max_replicas=8)
    hpa["spec"]["scaleTargetRef"]["name"] = "vllm-llama"  # KEDA's own HPA, on the ScaledObject's target
    return [
        k8s.node("gpu-a", 8, taints=[GPU_TAINT]),
        k8s.node("cpu-a", 0),
        deployment,
        so,
        hpa,
        ingress,
        *scaler_objects(),
    ]


def kind(objs: list[dict[str, Any]], kind_: str) -> dict[str, Any]:
    """The first object of kind ``kind_`` in ``objs``."""
    return next(o for o in objs if o["kind"] == kind_)


def doctor(
    objs: list[dict[str, Any]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    *extra: str,
    version: str = "1.35.0",
) -> tuple[int, list[dict[str, str]]]:
    """Run ``scaler doctor --output json`` against a double serving ``objs``; exit code and findings."""
    with k8s.KubeDouble(token="t", version=version) as double:
        for obj in objs:
            double.apply(obj)
        config = k8s.kubeconfig(tmp_path / "kubeconfig", double.url, "t")
        code = main(["doctor", "--kubeconfig", str(config), "--output", "json", *extra])
    findings: list[dict[str, str]] = json.loads(capsys.readouterr().out)
    return code, findings


def test_a_healthy_cluster_has_no_finding(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A healthy cluster exits 0 with only the note that Prometheus was not asked."""
    code, findings = doctor(healthy(), tmp_path, capsys)
    assert code == 0
    assert [(f["severity"], f["check"], f["object"]) for f in findings] == [
        ("info", "not-scraped", f"ScaledObject {NS}/llama")
    ]


def add_trigger(trigger: dict[str, Any]) -> Callable[[list[dict[str, Any]]], None]:
    """A change that appends ``trigger`` to the ScaledObject's triggers."""

    def change(objs: list[dict[str, Any]]) -> None:
        kind(objs, "ScaledObject")["spec"]["triggers"].append(trigger)

    return change


def container(key: str, value: Any) -> Callable[[list[dict[str, Any]]], None]:
    """A change that sets the pod's grace period or removes ``key`` from the vLLM container."""

    def change(objs: list[dict[str, Any]]) -> None:
        spec = kind(objs, "Deployment")["spec"]["template"]["spec"]
        if key == "terminationGracePeriodSeconds":
            spec[key] = value
        else:
            del spec["containers"][0][key]

    return change


def untainted(objs: list[dict[str, Any]]) -> None:
    """Remove the GPU node's taints."""
    del next(o for o in objs if o["kind"] == "Node")["spec"]["taints"]


def cpu_hpa(objs: list[dict[str, Any]]) -> None:
    """Add a second HPA scaling the Deployment on CPU utilisation."""
    hpa = copy.deepcopy(kind(objs, "HorizontalPodAutoscaler"))
    hpa["metadata"]["name"] = "vllm-llama-cpu"
    hpa["spec"]["scaleTargetRef"]["name"] = "vllm-llama"
    hpa["spec"]["metrics"] = [
        {
            "type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
        }
    ]
    objs.append(hpa)


def foreign_hpa(objs: list[dict[str, Any]]) -> None:
    """Add the HPA the workload was scaled by before KEDA (on an External metric): KEDA does not own it."""
    hpa = copy.deepcopy(kind(objs, "HorizontalPodAutoscaler"))
    hpa["metadata"]["name"] = "vllm-llama"
    objs.append(hpa)


def adopted_hpa(objs: list[dict[str, Any]]) -> None:
    """The ScaledObject names an existing HPA as its own (advanced.horizontalPodAutoscalerConfig.name)."""
    kind(objs, "HorizontalPodAutoscaler")["metadata"]["name"] = "vllm-llama"
    so = kind(objs, "ScaledObject")
    so["spec"]["advanced"] = {"horizontalPodAutoscalerConfig": {"name": "vllm-llama"}}
    del so["status"]["hpaName"]
    so["metadata"]["annotations"] = {"scaledobject.keda.sh/transfer-hpa-ownership": "true"}


def annotate(key: str, value: str | None) -> Callable[[list[dict[str, Any]]], None]:
    """A change that sets (or, for None, removes) one ingress-nginx annotation on the Ingress."""

    def change(objs: list[dict[str, Any]]) -> None:
        annotations = kind(objs, "Ingress")["metadata"]["annotations"]
        if value is None:
            annotations.pop(f"nginx.ingress.kubernetes.io/{key}")
        else:
            annotations[f"nginx.ingress.kubernetes.io/{key}"] = value

    return change


def bounds(low: int | None, high: int) -> Callable[[list[dict[str, Any]]], None]:
    """A change that sets the ScaledObject's maxReplicaCount, dropping minReplicaCount when None."""

    def change(objs: list[dict[str, Any]]) -> None:
        spec = kind(objs, "ScaledObject")["spec"]
        if low is None:
            del spec["minReplicaCount"]
        spec["maxReplicaCount"] = high

    return change


def both_bounds(high: int) -> Callable[[list[dict[str, Any]]], None]:
    """A change that sets maxReplicaCount and the trigger's maxReplicas to ``high`` together."""

    def change(objs: list[dict[str, Any]]) -> None:
        so = kind(objs, "ScaledObject")
        so["spec"]["maxReplicaCount"] = high
        so["spec"]["triggers"][0]["metadata"]["maxReplicas"] = str(high)

    return change


def scaler_change(change: str) -> Callable[[list[dict[str, Any]]], None]:
    """A change to the scaler's own objects or to the ScaledObject's fallback (``change``)."""

    def apply(objs: list[dict[str, Any]]) -> None:
        scaler = next(
            o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == "llm-gpu-scaler"
        )
        if change == "one-ready":
            scaler["status"]["readyReplicas"] = 1
        elif change == "no-spread":
            del scaler["spec"]["template"]["spec"]["topologySpreadConstraints"]
        elif change == "no-budget":
            objs.remove(kind(objs, "PodDisruptionBudget"))
        elif change == "budget-allows-all":
            kind(objs, "PodDisruptionBudget")["spec"]["minAvailable"] = 0
        elif change == "no-service":
            objs.remove(kind(objs, "Service"))
        elif change == "service-selects-nothing":
            kind(objs, "Service")["spec"]["selector"] = {"app.kubernetes.io/name": "something-else"}
        elif change == "no-fallback":
            del kind(objs, "ScaledObject")["spec"]["fallback"]

    return apply


CRON = {
    "type": "cron",
    "metadata": {"timezone": "UTC", "start": "0 9 * * *", "end": "0 12 * * *", "desiredReplicas": "4"},
}
DCGM = {
    "type": "prometheus",
    "metadata": {"serverAddress": "http://p:9090", "query": "sum(DCGM_FI_DEV_GPU_UTIL)", "threshold": "85"},
}


@pytest.mark.parametrize(
    ("change", "expected", "code"),
    [
        pytest.param(
            add_trigger(CRON),
            {("error", "several-triggers", "ScaledObject inference/llama")},
            1,
            id="several-triggers",
        ),
        pytest.param(
            add_trigger(DCGM),
            {
                ("error", "several-triggers", "ScaledObject inference/llama"),
                ("error", "utilisation-trigger", "ScaledObject inference/llama"),
            },
            1,
            id="gpu-utilisation-trigger",
        ),
        pytest.param(
            cpu_hpa,
            {
                ("error", "utilisation-trigger", "HorizontalPodAutoscaler inference/vllm-llama-cpu"),
                ("error", "hpa-not-owned", "HorizontalPodAutoscaler inference/vllm-llama-cpu"),
            },
            1,
            id="cpu-hpa",
        ),
        pytest.param(
            foreign_hpa,
            {("error", "hpa-not-owned", "HorizontalPodAutoscaler inference/vllm-llama")},
            1,
            id="hpa-not-owned",
        ),
        pytest.param(adopted_hpa, set(), 0, id="hpa-adopted"),
        pytest.param(
            bounds(None, 8),
            {
                ("error", "scale-to-zero", "ScaledObject inference/llama"),
                ("error", "bounds-disagree", "ScaledObject inference/llama"),
            },
            1,
            id="scale-to-zero",
        ),
        pytest.param(
            bounds(2, 6),
            {("error", "bounds-disagree", "ScaledObject inference/llama")},
            1,
            id="bounds-disagree",
        ),
        pytest.param(
            container("lifecycle", None),
            {("warning", "no-prestop", "Deployment inference/vllm-llama")},
            0,
            id="no-prestop",
        ),
        pytest.param(
            container("terminationGracePeriodSeconds", 30),
            {("warning", "short-grace-period", "Deployment inference/vllm-llama")},
            0,
            id="short-grace-period",
        ),
        pytest.param(
            untainted, {("warning", "gpu-node-untainted", "Node gpu-a")}, 0, id="gpu-node-untainted"
        ),
        pytest.param(
            annotate("proxy-read-timeout", None),  # ingress-nginx's default: 60 s
            {("error", "ingress-read-timeout", "Ingress inference/llama")},
            1,
            id="ingress-read-timeout",
        ),
        pytest.param(
            annotate("proxy-send-timeout", "30s"),
            {("error", "ingress-read-timeout", "Ingress inference/llama")},
            1,
            id="ingress-send-timeout",
        ),
        pytest.param(
            annotate("proxy-buffering", "on"),
            {("warning", "ingress-buffering", "Ingress inference/llama")},
            0,
            id="ingress-buffering",
        ),
        pytest.param(
            both_bounds(16),
            {("warning", "hpa-tolerance", "ScaledObject inference/llama")},
            0,
            id="hpa-tolerance",
        ),
        pytest.param(
            scaler_change("one-ready"),
            {("error", "scaler-replicas", "Deployment llm-gpu-scaler/llm-gpu-scaler")},
            1,
            id="scaler-replicas",
        ),
        pytest.param(
            scaler_change("no-spread"),
            {("warning", "scaler-spread", "Deployment llm-gpu-scaler/llm-gpu-scaler")},
            0,
            id="scaler-spread",
        ),
        pytest.param(
            scaler_change("no-budget"),
            {("warning", "scaler-disruption-budget", "Deployment llm-gpu-scaler/llm-gpu-scaler")},
            0,
            id="scaler-no-budget",
        ),
        pytest.param(
            scaler_change("budget-allows-all"),
            {("warning", "scaler-disruption-budget", "Deployment llm-gpu-scaler/llm-gpu-scaler")},
            0,
            id="scaler-budget-allows-all",
        ),
        pytest.param(
            scaler_change("no-service"),
            {("error", "scaler-missing", "Service llm-gpu-scaler/llm-gpu-scaler")},
            1,
            id="scaler-no-service",
        ),
        pytest.param(
            scaler_change("service-selects-nothing"),
            {("error", "scaler-missing", "Service llm-gpu-scaler/llm-gpu-scaler")},
            1,
            id="scaler-service-selects-nothing",
        ),
        pytest.param(
            scaler_change("no-fallback"),
            {("warning", "no-fallback", "ScaledObject inference/llama")},
            0,
            id="no-fallback",
        ),
    ],
)
def test_each_pitfall_is_named(
    change: Callable[[list[dict[str, Any]]], None],
    expected: set[tuple[str, str, str]],
    code: int,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each pitfall gives exactly its findings, each with a problem and a fix, and its exit code."""
    objs = healthy()
    change(objs)
    exit_code, findings = doctor(objs, tmp_path, capsys)
    found = {(f["severity"], f["check"], f["object"]) for f in findings if f["check"] != "not-scraped"}
    assert found == expected
    assert exit_code == code
    assert all(f["problem"] and f["fix"] for f in findings)


def test_the_tolerance_finding_needs_a_cluster_that_takes_a_per_hpa_tolerance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No hpa-tolerance finding before Kubernetes 1.35 or when a scale-up tolerance is set."""
    objs = healthy()
    both_bounds(16)(objs)
    _, findings = doctor(objs, tmp_path, capsys, version="1.34.2")
    assert "hpa-tolerance" not in {f["check"] for f in findings}
    behavior = {"scaleUp": {"tolerance": 0}}
    kind(objs, "ScaledObject")["spec"]["advanced"] = {"horizontalPodAutoscalerConfig": {"behavior": behavior}}
    _, findings = doctor(objs, tmp_path, capsys)
    assert "hpa-tolerance" not in {f["check"] for f in findings}


def test_a_namespace_limits_what_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--namespace limits the findings to ScaledObjects in that namespace."""
    objs = healthy()
    other = k8s.scaledobject("other", "elsewhere")  # minReplicaCount 1 vs the trigger's 1: fine, but
    other["spec"]["triggers"].append(CRON)  # several triggers
    objs.append(other)
    _, everywhere = doctor(objs, tmp_path, capsys)
    assert ("several-triggers", "ScaledObject elsewhere/other") in {
        (f["check"], f["object"]) for f in everywhere
    }
    _, here = doctor(objs, tmp_path, capsys, "--namespace", NS)
    assert {f["object"] for f in here} == {f"ScaledObject {NS}/llama"}


def test_the_scalers_budgets_doctor_may_not_list_are_named_not_guessed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 403 on the scaler's PodDisruptionBudgets is an info finding naming it, not a missing budget."""
    with k8s.KubeDouble(token="t") as double:
        for obj in healthy():
            double.apply(obj)
        double.fail(403, resource="poddisruptionbudgets")
        config = k8s.kubeconfig(tmp_path / "kubeconfig", double.url, "t")
        code = main(["doctor", "--kubeconfig", str(config), "--output", "json"])
    findings = [f for f in json.loads(capsys.readouterr().out) if f["check"] != "not-scraped"]
    assert code == 0
    assert [(f["severity"], f["check"], f["object"]) for f in findings] == [
        ("info", "scaler-availability", "Service llm-gpu-scaler/llm-gpu-scaler")
    ]
    assert "poddisruptionbudgets could not be listed" in findings[0]["problem"]
    assert "HTTP 403" in findings[0]["problem"]


def test_the_text_output_has_one_row_per_finding(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The text output is a table with one row per finding and a count of findings and errors."""
    objs = healthy()
    untainted(objs)
    with k8s.KubeDouble(token="t") as double:
        for obj in objs:
            double.apply(obj)
        config = k8s.kubeconfig(tmp_path / "kubeconfig", double.url, "t")
        assert main(["doctor", "--kubeconfig", str(config)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["SEVERITY", "OBJECT", "PROBLEM"]
    assert lines[1].startswith("warning   Node gpu-a")
    assert " -> taint it" in lines[1]
    assert lines[2].startswith("info      ScaledObject inference/llama")
    assert lines[-1] == "2 findings, 0 errors"


def test_an_unreachable_cluster_is_an_error_not_a_clean_bill(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unreachable API server exits 2 with an error, not a clean report."""
    with k8s.KubeDouble(token="t") as double:
        url = double.url
    config = k8s.kubeconfig(tmp_path / "kubeconfig", url, "t")
    assert main(["doctor", "--kubeconfig", str(config)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"scaler doctor: error: cannot read the cluster: Kubernetes API {url} (kubeconfig {config}):"
        " connection refused (nothing listens at that host and port)"
    )
    for leak in ("MaxRetryError", "HTTPConnectionPool", "NewConnectionError"):
        assert leak not in line


def test_a_refusing_api_server_stops_a_live_dry_run_at_once_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """dry-run --kubeconfig on an API server that refuses connections: exit 2, one line naming it."""
    with k8s.KubeDouble(token="t") as double:
        url = double.url
    config = k8s.kubeconfig(tmp_path / "kubeconfig", url, "t")
    example = Path(__file__).resolve().parent.parent / "scaler" / "examples" / "scaledobject.yaml"
    argv = ["dry-run", "--scaledobject", str(example), "--prometheus", url, "--kubeconfig", str(config)]
    assert main([*argv, "--once"]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # no decision made without the inventory it was asked to read
    assert err.splitlines() == [
        f"scaler dry-run: error: Kubernetes API {url} (kubeconfig {config}):"
        " connection refused (nothing listens at that host and port)"
    ]


def test_credentials_the_api_server_refuses_stop_a_live_dry_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """dry-run --kubeconfig with a token the API server refuses (401): exit 2, one line saying so."""
    example = Path(__file__).resolve().parent.parent / "scaler" / "examples" / "scaledobject.yaml"
    with k8s.KubeDouble(token="right") as double:
        config = k8s.kubeconfig(tmp_path / "kubeconfig", double.url, "wrong")
        argv = ["dry-run", "--scaledobject", str(example), "--prometheus", double.url]
        assert main([*argv, "--kubeconfig", str(config), "--once"]) == 2
        url = double.url
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"scaler dry-run: error: Kubernetes API {url} (kubeconfig {config}): HTTP 401 Unauthorized:"
        " the credentials are refused"
    )


def with_pods(objs: list[dict[str, Any]], *names: str) -> list[dict[str, Any]]:
    """``objs`` with Ready pods of the Deployment vllm-llama, named as the simulated fleet's."""
    pods = [k8s.pod(n, NS, labels={"app": "vllm-llama"}, node="gpu-a", ready=True) for n in names]
    return [*objs, *pods]


@pytest.mark.prometheus
def test_pods_prometheus_does_not_scrape(
    fleet: SimulatedFleet, prometheus: LocalPrometheus, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --prometheus, a selector that matches no series of Ready pods is one inert-no-series error
    naming the values that exist (what the not-scraped check said, with the cause); a matched one is fine."""
    assert prometheus.wait_for("count(vllm:num_requests_running) >= 2", timeout_s=30)
    objs = with_pods(healthy(), "vllm-0", "vllm-1")
    # A scrape that fails (its 0.5 s timeout, on a loaded machine) marks the fleet's series stale at
    # once, and the doctor then says, truthfully, that Prometheus has none: asked again at the
    # next scrapes, a matched selector is fine (and nothing but that stale moment is ever said).
    for _ in range(3):
        _, findings = doctor(objs, tmp_path, capsys, "--prometheus", prometheus.url)
        if not findings:
            break
        assert {f["check"] for f in findings} == {"inert-not-scraped"}, findings
        time.sleep(2 * prometheus.scrape_interval_s)
    assert findings == []  # the fleet's pods carry the model_name, and are the Deployment's
    kind(objs, "ScaledObject")["spec"]["triggers"][0]["metadata"]["labelSelector"] = 'model_name="not-served"'
    code, findings = doctor(objs, tmp_path, capsys, "--prometheus", prometheus.url)
    assert [(f["severity"], f["check"]) for f in findings] == [("error", "inert-no-series")]
    assert 'model_name="not-served" matches no series of engine vllm' in findings[0]["problem"]
    assert "Deployment inference/vllm-llama has 2 Ready pods" in findings[0]["problem"]
    assert "model_name has meta-llama/Llama-3.1-8B-Instruct" in findings[0]["problem"]
    assert code == 1


@pytest.mark.prometheus
def test_a_stranded_router_gauge_a_pod_not_scraped_and_what_the_scaler_reports(
    fleet: SimulatedFleet, prometheus: LocalPrometheus, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """llm-d's in-flight gauge for a pod that is gone (inert-stranded), a third Ready pod without
    series (inert-not-scraped), and a running scaler's llm_scaler_inert{reason="held"} (inert-held)."""
    router = MetricsServer(
        lambda: (
            "# TYPE llm_d_epp_inflight_tokens gauge\n"
            'llm_d_epp_inflight_tokens{endpoint_name="vllm-llama-gone",namespace="inference"} 5000\n'
        )
    )
    target = target_of(TargetKey(NS, "llama"), {"minReplicas": "2", "maxReplicas": "8"})
    decided = target.engine.decide(Observation(now=datetime(2026, 12, 1, tzinfo=UTC), current_replicas=2))
    held = Inert(InertReason.HELD, "the target has equalled the current 2 replicas for 20 refreshes")
    target.latest = replace(decided, inert=(held,))
    registry = CollectorRegistry()
    registry.register(DecisionCollector(lambda: [target], lambda: 0.0, 15.0))
    scaler = MetricsServer(lambda: generate_latest(registry).decode())
    try:
        prometheus.set_targets([fleet.address, router.start(), scaler.start()])
        assert prometheus.wait_for(
            "llm_d_epp_inflight_tokens and on() llm_scaler_inert and on() vllm:num_requests_running",
            timeout_s=30,
        )
        objs = with_pods(healthy(), "vllm-0", "vllm-1", "vllm-llama-c")
        _, findings = doctor(objs, tmp_path, capsys, "--prometheus", prometheus.url)
    finally:
        router.stop()
        scaler.stop()
    found = {f["check"]: f for f in findings}
    assert set(found) == {"inert-stranded", "inert-not-scraped", "inert-held"}
    assert found["inert-stranded"]["severity"] == "warning"
    assert "(vllm-llama-gone)" in found["inert-stranded"]["problem"]
    assert "1 of 3 Ready pods not scraped" in found["inert-not-scraped"]["problem"]
    assert "vllm-llama-c" in found["inert-not-scraped"]["problem"]
    assert found["inert-held"]["problem"].startswith("the running scaler reports it inert: held")
