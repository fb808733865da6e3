"""Prefill and decode pools against a real Prometheus: a simulated vLLM fleet of two pools, its pods
labelled as llm-d labels them (the decode pool with one pod unlabelled, which llm-d counts as
decode), an SGLang fleet labelled by engine_type, and Dynamo's KV router queue per worker type."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scaler.config import parse_metadata
from scaler.sim.fleet import PodLoad, SimulatedFleet
from scaler.sim.prometheus import LocalPrometheus
from scaler.sim.router import RouterLoad, SimulatedRouter
from scaler.sources.presets import PRESETS
from scaler.sources.prometheus import PrometheusReader, TargetInputs, TargetQuery
from tests.conftest import require_prometheus
from tests.helpers import eventually

pytestmark = pytest.mark.prometheus

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SELECTOR = f'model_name="{MODEL}"'
# llm-d labels pods llm-d.ai/role; the scrape's labelmap copies it onto the series as llm_d_ai_role.
PREFILL_PODS = {
    "vllm-prefill-0": {"llm_d_ai_role": "prefill"},
    "vllm-prefill-1": {"llm_d_ai_role": "prefill"},
}
DECODE_PODS = {"vllm-decode-0": {"llm_d_ai_role": "decode"}, "vllm-decode-1": {}}


class Stack:
    """One Prometheus scraping a vLLM fleet of two pools, an SGLang one and a Dynamo router."""

    def __init__(self) -> None:
        self.vllm = SimulatedFleet(namespace="pd", model=MODEL)
        self.vllm.set_pods([*PREFILL_PODS, *DECODE_PODS])
        self.vllm.pod_labels = {**PREFILL_PODS, **DECODE_PODS}
        self.sglang = SimulatedFleet(namespace="pd-sglang", model="qwen", engine="sglang")
        self.sglang.set_pods(["s-prefill", "s-decode", "s-unified"])
        self.sglang.pod_labels = {
            pod: {"engine_type": pod.removeprefix("s-")} for pod in ("s-prefill", "s-decode", "s-unified")
        }
        self.router = SimulatedRouter("dynamo", model=MODEL)
        self.prometheus = LocalPrometheus(scrape_interval_s=0.5)
        for server in (self.vllm, self.sglang, self.router):
            server.start()
        self.prometheus.start([self.vllm.address, self.sglang.address, self.router.address])

    def close(self) -> None:
        """Stop Prometheus and the servers."""
        self.prometheus.close()
        for server in (self.vllm, self.sglang, self.router):
            server.stop()

    def pools(self, prefill: PodLoad, decode: PodLoad) -> None:
        """Set each pool's load, spread evenly over its pods."""
        for pods, load in ((PREFILL_PODS, prefill), (DECODE_PODS, decode)):
            for pod in pods:
                self.vllm.set_pod_load(
                    pod,
                    PodLoad(
                        waiting=load.waiting / len(pods),
                        running=load.running / len(pods),
                        prompt_tokens_per_s=load.prompt_tokens_per_s / len(pods),
                        generation_tokens_per_s=load.generation_tokens_per_s / len(pods),
                        requests_per_s=load.requests_per_s / len(pods),
                        ttft_seconds=load.ttft_seconds,
                        kv_cache_usage=load.kv_cache_usage,
                        itl_seconds=load.itl_seconds,
                    ),
                )


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    """The module's Prometheus and servers, started once."""
    require_prometheus()
    s = Stack()
    yield s
    s.close()


def query(key: str, stack: Stack, **metadata: str) -> TargetQuery:
    """A target on the stack's Prometheus from ScaledObject-style metadata."""
    return TargetQuery(key, parse_metadata(metadata), stack.prometheus.url)


def test_each_role_reads_its_own_pool_and_an_unlabelled_pod_is_decode(stack: Stack) -> None:
    """Prefill pods wait 14 and decode pods 6 (one of them unlabelled): the prefill target reads
    14 on 2 pods, the decode target 6 on 2, role both 20 on 4; one query per family serves all
    three, as it serves one."""
    stack.pools(PodLoad(waiting=14, running=8), PodLoad(waiting=6, running=50))
    reader = PrometheusReader(stack.prometheus.url, rate_window="5s")
    targets = [
        query("prefill", stack, labelSelector=SELECTOR, role="prefill"),
        query("decode", stack, labelSelector=SELECTOR, role="decode"),
        query("both", stack, labelSelector=SELECTOR),
    ]
    before = reader.queries

    def read() -> dict[str, TargetInputs]:
        return reader.read(targets)

    got = eventually(read, lambda g: g["both"].values.get("queue_waiting") == 20, timeout=25, every=0.25)
    assert (reader.queries - before) % len(PRESETS["vllm"].families) == 0
    assert got["prefill"].values["queue_waiting"] == 14
    assert got["prefill"].values["requests_running"] == 8
    assert got["prefill"].values["replicas_reporting"] == 2
    assert got["decode"].values["queue_waiting"] == 6
    assert got["decode"].values["requests_running"] == 50
    assert got["decode"].values["replicas_reporting"] == 2
    assert got["both"].values["replicas_reporting"] == 4


def test_sglang_roles_are_read_by_engine_type(stack: Stack) -> None:
    """SGLang labels its series engine_type: decode reads the decode engine, not the unified one."""
    for pod, waiting in (("s-prefill", 5), ("s-decode", 3), ("s-unified", 11)):
        stack.sglang.set_pod_load(pod, PodLoad(waiting=waiting))
    reader = PrometheusReader(stack.prometheus.url, rate_window="5s")
    selector = 'model_name="qwen"'
    targets = [
        query(role, stack, engine="sglang", labelSelector=selector, role=role)
        for role in ("prefill", "decode")
    ]
    got = eventually(
        lambda: reader.read(targets),
        lambda g: g["prefill"].values.get("queue_waiting") == 5,
        timeout=25,
        every=0.25,
    )
    assert got["decode"].values["queue_waiting"] == 3
    assert got["decode"].values["replicas_reporting"] == 1


def test_dynamo_router_queue_is_read_per_worker_type(stack: Stack) -> None:
    """Dynamo's KV router labels its queue by worker_type: each role reads its own, both the sum."""
    stack.router.set_load(RouterLoad(queued=40, queued_prefill=90))
    reader = PrometheusReader(stack.prometheus.url, rate_window="5s")
    common = {"labelSelector": f'model="{MODEL.lower()}"', "router": "dynamo"}
    targets = [
        query("prefill", stack, **common, role="prefill"),
        query("decode", stack, **common, role="decode"),
        query("both", stack, **common),
    ]
    got = eventually(
        lambda: reader.read(targets),
        lambda g: g["both"].values.get("router_queue_waiting") == 130,
        timeout=25,
        every=0.25,
    )
    assert got["prefill"].values["router_queue_waiting"] == 90
    assert got["decode"].values["router_queue_waiting"] == 40
