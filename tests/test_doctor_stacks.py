"""scaler doctor on the stack around the servers, through the real CLI and the Kubernetes API double:
a router's queue (a real Prometheus scraping a simulated llm-d EPP with flow control on),
prefill/decode pools under one ScaledObject, and metric names their upstream removed."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaler.sim.fleet import PodLoad, SimulatedFleet
from scaler.sim.prometheus import LocalPrometheus
from scaler.sim.router import RouterLoad, SimulatedRouter
from tests import k8s_double as k8s
from tests.conftest import require_prometheus
from tests.test_doctor import NS, doctor, healthy, kind

pytestmark = pytest.mark.e2e  # every test reads the Kubernetes API double over HTTP

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
ROLE = "llm-d.ai/role"


@pytest.fixture(scope="module", params=[("current", "legacy"), ("legacy",)], ids=["llm-d-router", "gie-v1.5"])
def epp(request: pytest.FixtureRequest) -> Iterator[LocalPrometheus]:
    """A real Prometheus scraping two vLLM pods and llm-d's EPP holding 30 requests in its
    flow-control queue (both name generations, as llm-d-router writes them, or the older only)."""
    require_prometheus()
    fleet = SimulatedFleet(model=MODEL)
    fleet.set_pods(["vllm-0", "vllm-1"])
    fleet.set_fleet_load(PodLoad(waiting=10, running=10))
    router = SimulatedRouter("llm-d", pool="llama-pool", model=MODEL, generations=request.param)
    router.set_load(RouterLoad(queued=30, saturation=1.0))
    fleet.start()
    router.start()
    prometheus = LocalPrometheus(scrape_interval_s=0.5)
    try:
        prometheus.start([fleet.address, router.address])
        name = (
            f"{'llm_d_epp' if 'current' in request.param else 'inference_extension'}_flow_control_queue_size"
        )
        assert prometheus.wait_for(f"sum({name}) == 30", timeout_s=30), prometheus.log_tail()
        assert prometheus.wait_for("count(vllm:num_requests_running) >= 2", timeout_s=30)
        yield prometheus
    finally:
        prometheus.close()
        router.stop()
        fleet.stop()


def found(findings: list[dict[str, str]], check: str) -> list[dict[str, str]]:
    """The findings of one check."""
    return [f for f in findings if f["check"] == check]


def ours(objs: list[dict[str, Any]]) -> dict[str, str]:
    """The metadata of this scaler's trigger in the healthy cluster's ScaledObject."""
    metadata: dict[str, str] = kind(objs, "ScaledObject")["spec"]["triggers"][0]["metadata"]
    return metadata


def unread(
    objs: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str
) -> list[dict[str, str]]:
    """The ``router-queue-unread`` findings doctor reports for ``objs`` against the Prometheus at ``url``."""
    _, findings = doctor(objs, tmp_path, capsys, "--prometheus", url)
    return found(findings, "router-queue-unread")


@pytest.mark.prometheus
def test_flow_control_with_only_the_servers_queue_read_is_an_error(
    epp: LocalPrometheus, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The EPP's queue series exist for the model and the trigger reads only vLLM's queue: an
    error naming the router and its pool; with router: llm-d, or for another model, none."""
    objs = healthy()
    code, findings = doctor(objs, tmp_path, capsys, "--prometheus", epp.url)
    (finding,) = found(findings, "router-queue-unread")
    assert (finding["severity"], finding["object"], code) == ("error", f"ScaledObject {NS}/llama", 1)
    assert "llm-d pool llama-pool" in finding["problem"]
    assert "router: llm-d and inferencePool: llama-pool" in finding["fix"]
    ours(objs).update({"router": "llm-d", "inferencePool": "llama-pool"})
    assert unread(objs, tmp_path, capsys, epp.url) == []
    other = healthy()
    ours(other)["labelSelector"] = 'model_name="mistralai/Mistral-7B-Instruct"'
    assert unread(other, tmp_path, capsys, epp.url) == []


@pytest.mark.prometheus
def test_a_keda_trigger_on_the_servers_queue_is_flagged_too(
    epp: LocalPrometheus, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plain KEDA trigger on vllm:num_requests_waiting is flagged; one more on the EPP's queue clears it."""
    objs = healthy()
    so = kind(objs, "ScaledObject")
    server = {"serverAddress": epp.url, "threshold": "10"}
    so["spec"]["triggers"] = [
        {
            "type": "prometheus",
            "metadata": {**server, "query": f'sum(vllm:num_requests_waiting{{model_name="{MODEL}"}})'},
        }
    ]
    assert [f["object"] for f in unread(objs, tmp_path, capsys, epp.url)] == [f"ScaledObject {NS}/llama"]
    router_queue = 'sum(llm_d_epp_flow_control_queue_size{inference_pool="llama-pool"})'
    so["spec"]["triggers"].append({"type": "prometheus", "metadata": {**server, "query": router_queue}})
    assert unread(objs, tmp_path, capsys, epp.url) == []


@pytest.mark.prometheus
def test_without_a_router_queue_nothing_is_flagged(
    prometheus: LocalPrometheus, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Prometheus with the servers' series and no EPP's: flow control is off, no finding."""
    assert prometheus.wait_for("count(vllm:num_requests_running) >= 2", timeout_s=30)
    assert unread(healthy(), tmp_path, capsys, prometheus.url) == []


def pd_deployment(name: str, role: str, selector: dict[str, str], model: str = "llama") -> dict[str, Any]:
    """A Deployment whose pods carry llm-d's role label and model label, selected by ``selector``."""
    deployment = k8s.deployment(name, NS, match_labels=selector)
    deployment["spec"]["template"]["metadata"]["labels"] = {
        **selector,
        ROLE: role,
        "llm-d.ai/model": model,
    }
    return deployment


def test_one_selector_over_both_roles_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The scaled Deployment's selector takes the prefill pods as well as its decode pods: an error."""
    objs = healthy()
    objs.remove(kind(objs, "Deployment"))
    objs += [
        pd_deployment("vllm-llama", "decode", {"app": "llama"}),
        pd_deployment("vllm-llama-prefill", "prefill", {"app": "llama", ROLE: "prefill"}),
    ]
    code, findings = doctor(objs, tmp_path, capsys)
    (finding,) = found(findings, "pd-one-scaledobject")
    assert (finding["severity"], finding["object"], code) == ("error", f"ScaledObject {NS}/llama", 1)
    assert f"{NS}/vllm-llama-prefill" in finding["problem"]


def test_one_scaledobject_for_a_pd_model_is_a_warning_until_each_role_has_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Decode scaled, the same model's prefill Deployment scaled by none: a warning; a second
    ScaledObject for the prefill pool clears it. Another model's prefill pool is not this one's."""
    objs = healthy()
    objs.remove(kind(objs, "Deployment"))
    objs += [
        pd_deployment("vllm-llama", "decode", {"app": "llama", ROLE: "decode"}),
        pd_deployment("vllm-llama-prefill", "prefill", {"app": "llama", ROLE: "prefill"}),
        pd_deployment("vllm-qwen-prefill", "prefill", {"app": "qwen", ROLE: "prefill"}, model="qwen"),
    ]
    _, findings = doctor(objs, tmp_path, capsys)
    (finding,) = found(findings, "pd-one-scaledobject")
    assert (finding["severity"], finding["object"]) == ("warning", f"ScaledObject {NS}/llama")
    assert f"no ScaledObject scales {NS}/vllm-llama-prefill, the model's prefill pool" in finding["problem"]
    prefill = copy.deepcopy(kind(objs, "ScaledObject"))
    prefill["metadata"]["name"] = "llama-prefill"
    prefill["spec"]["scaleTargetRef"]["name"] = "vllm-llama-prefill"
    objs.append(prefill)
    _, findings = doctor(objs, tmp_path, capsys)
    assert found(findings, "pd-one-scaledobject") == []


def test_a_removed_vllm_name_in_a_users_query_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """vLLM's removed ITL name in a KEDA trigger's query, and its removed KV name in this scaler's
    custom query: a warning each, with the name to read instead."""
    objs = healthy()
    so = kind(objs, "ScaledObject")
    ours(objs).update(
        {"engine": "custom", "queueQuery": "sum(my_queue)", "kvCacheQuery": "avg(vllm:gpu_cache_usage_perc)"}
    )
    itl = "histogram_quantile(0.9, sum by (le) (rate(vllm:time_per_output_token_seconds_bucket[1m])))"
    so["spec"]["triggers"].append(
        {
            "type": "prometheus",
            "metadata": {"serverAddress": "http://p:9090", "query": itl, "threshold": "0.1"},
        }
    )
    _, findings = doctor(objs, tmp_path, capsys)
    removed = sorted(
        (f["severity"], f["problem"].split(",")[0], f["fix"]) for f in found(findings, "removed-metric")
    )
    assert removed == [
        (
            "warning",
            "triggers[0] kvCacheQuery reads vllm:gpu_cache_usage_perc",
            "read vllm:kv_cache_usage_perc",
        ),
        (
            "warning",
            "triggers[1] query reads vllm:time_per_output_token_seconds",
            "read vllm:inter_token_latency_seconds",
        ),
    ]
