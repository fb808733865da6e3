"""A router in front of the servers, end to end: a real Prometheus scrapes a simulated vLLM fleet and
a simulated llm-d EPP (or Dynamo frontend); the live source reads them and the engine decides, one
refresh per call, so "within two refreshes" is counted, not timed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from scaler.model import Decision, Observation
from scaler.service.app import wall_clock
from scaler.sim.fleet import PodLoad, SimulatedFleet
from scaler.sim.prometheus import LocalPrometheus
from scaler.sim.router import RouterLoad, SimulatedRouter, saturation_of
from scaler.sources.kubernetes import KubernetesInventory
from scaler.sources.live import LiveSource
from scaler.sources.prometheus import PrometheusReader
from scaler.targets.registry import Target, TargetKey
from tests.conftest import require_prometheus
from tests.helpers import target_of
from tests.k8s_double import KubeDouble
from tests.test_kubernetes import FAST, NS, llama_pod, seed

pytestmark = pytest.mark.prometheus

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
LLM_D = {
    "labelSelector": f'model_name="{MODEL}"',
    "router": "llm-d",
    "inferencePool": "llama-pool",
    "minReplicas": "2",
    "maxReplicas": "60",
    "targetQueuePerReplica": "10",
    "coldStartSeconds": "60",
}


class Stack:
    """The fleet, the router and the Prometheus scraping both."""

    def __init__(self, fleet: SimulatedFleet, router: SimulatedRouter, prometheus: LocalPrometheus) -> None:
        self.fleet, self.router, self.prometheus = fleet, router, prometheus


@pytest.fixture(params=["llm-d"])
def stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    """Two vLLM pods behind a router, both scraped by a real Prometheus every 0.5 s."""
    require_prometheus()
    fleet = SimulatedFleet(model=MODEL)
    fleet.set_pods(["vllm-0", "vllm-1"])
    fleet.start()
    router = SimulatedRouter(request.param, model=MODEL)
    router.start()
    prometheus = LocalPrometheus(scrape_interval_s=0.5)
    try:
        prometheus.start([fleet.address, router.address])
        yield Stack(fleet, router, prometheus)
    finally:
        prometheus.close()
        router.stop()
        fleet.stop()


def target(metadata: dict[str, str], name: str = "llama") -> Target:
    """A registered-like target for ``metadata``."""
    return target_of(TargetKey(NS, name), metadata)


def observe(source: LiveSource, t: Target) -> Observation:
    """One refresh's observation of ``t``, read now."""
    return asyncio.run(source.observe([t], wall_clock()))[t.key]


def refresh(source: LiveSource, t: Target) -> Decision:
    """One refresh: observe ``t`` and decide."""
    return t.engine.decide(observe(source, t))


def wait_until(check: Any, timeout_s: float = 30.0) -> None:
    """Poll ``check`` until it is true (Prometheus has scraped what the test set)."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "Prometheus never showed what the test set"
        time.sleep(0.1)


def flow_control(stack: Stack, queued: float) -> None:
    """The EPP with flow control on: while the router holds requests each server holds 5 waiting (4
    while it holds none), and the pool's saturation is what the EPP reads from them (the servers'
    rates stay unknown, so the queue alone decides)."""
    pod = PodLoad(waiting=5 if queued else 4, running=5, kv_cache_usage=0.2)
    for name in stack.fleet.pods:
        stack.fleet.set_pod_load(name, pod)
    saturation = saturation_of([pod] * len(stack.fleet.pods))
    stack.router.set_load(RouterLoad(queued=queued, saturation=saturation))


def test_a_backlog_held_in_the_router_raises_the_target_within_two_refreshes(stack: Stack) -> None:
    """Flow control keeps the servers' queues at 5 a pod while the router's grows from 0 to 400:
    the target rises within two refreshes of the growth; an empty router raises nothing."""
    source = LiveSource(PrometheusReader(stack.prometheus.url, rate_window="5s"))
    routed = target(LLM_D)
    flow_control(stack, 0.0)
    wait_until(lambda: stack.prometheus.query("sum(vllm:num_requests_waiting) == 8"))
    wait_until(lambda: stack.prometheus.query("sum(llm_d_epp_flow_control_queue_size) == 0"))
    quiet = [refresh(source, routed) for _ in range(3)]
    assert [d.replicas for d in quiet] == [2, 2, 2]  # 8 waiting at 10 a replica, under the floor
    assert quiet[-1].observation.router_queue_waiting == 0
    assert quiet[-1].observation.router_saturation == pytest.approx(0.8)  # 4 / 5 on each server
    flow_control(stack, 400.0)
    wait_until(lambda: stack.prometheus.query("sum(llm_d_epp_flow_control_queue_size) == 400"))
    wait_until(lambda: stack.prometheus.query("sum(vllm:num_requests_waiting) == 10"))
    first, second = refresh(source, routed), refresh(source, routed)
    assert first.observation.router_queue_waiting == 400  # both name generations, counted once
    assert first.observation.queue_waiting == 10  # the servers' own queue, as observed
    assert max(first.replicas, second.replicas) == 41  # 410 waiting at two refreshes, 10 a replica


def test_the_router_series_under_both_names_count_once_and_either_alone_is_read(stack: Stack) -> None:
    """llm-d-router writes each series twice (llm_d_epp_* and the older inference_extension_*):
    read once; where only the older name exists, it is read."""
    source = LiveSource(PrometheusReader(stack.prometheus.url, rate_window="5s"))
    t = target(LLM_D)
    flow_control(stack, 120.0)
    wait_until(lambda: stack.prometheus.query("sum(inference_extension_flow_control_queue_size) == 120"))
    wait_until(lambda: stack.prometheus.query("sum(llm_d_epp_flow_control_queue_size) == 120"))
    assert observe(source, t).router_queue_waiting == 120
    stack.router.generations = ("legacy",)
    wait_until(lambda: not stack.prometheus.query("llm_d_epp_flow_control_queue_size"), timeout_s=60)
    assert observe(source, t).router_queue_waiting == 120


def test_gie_v1_5s_saturation_under_its_older_name_alone_is_read(stack: Stack) -> None:
    """GIE v1.5.0 writes the pool saturation only as inference_extension_*: it is read there."""
    source = LiveSource(PrometheusReader(stack.prometheus.url, rate_window="5s"))
    stack.router.generations = ("legacy",)
    stack.router.set_load(RouterLoad(queued=3, saturation=0.6))
    wait_until(lambda: stack.prometheus.query("max(inference_extension_flow_control_pool_saturation) == 0.6"))
    wait_until(lambda: not stack.prometheus.query("llm_d_epp_flow_control_pool_saturation"), timeout_s=60)
    assert observe(source, target(LLM_D)).router_saturation == pytest.approx(0.6)


def test_with_flow_control_off_the_in_flight_series_say_the_epp_holds_no_queue(stack: Stack) -> None:
    """llm-d's default: flow control off, no flow-control series at all; the EPP's in-flight series
    in the target's namespace say it runs and dispatches at once: its queue reads 0, the servers'
    own queue is the waiting demand and decides."""
    source = LiveSource(PrometheusReader(stack.prometheus.url, rate_window="5s"))
    t = target(LLM_D)
    stack.fleet.set_fleet_load(PodLoad(waiting=60, running=10))
    stack.router.set_load(RouterLoad(flow_control=False, inflight=70))
    wait_until(lambda: stack.prometheus.query("sum(llm_d_epp_inflight_requests) == 70"))
    wait_until(lambda: not stack.prometheus.query("llm_d_epp_flow_control_queue_size"), timeout_s=60)
    wait_until(lambda: stack.prometheus.query("sum(vllm:num_requests_waiting) == 60"))
    seen = observe(source, t)
    assert seen.router_queue_waiting == 0
    assert seen.queue_waiting == 60
    assert t.engine.decide(seen).replicas == 6  # 60 waiting at 10 a replica


def test_flow_control_on_with_nothing_queued_yet_reads_an_empty_queue(stack: Stack) -> None:
    """Flow control on writes the pool's saturation every dispatch cycle but a queue series only once
    a request has queued: the saturation alone says the EPP runs for the pool, so its queue is 0."""
    stack.router.inflight = False
    source = LiveSource(PrometheusReader(stack.prometheus.url, rate_window="5s"))
    stack.router.set_load(RouterLoad(queued=None, saturation=0.4))
    wait_until(lambda: stack.prometheus.query("max(llm_d_epp_flow_control_pool_saturation) == 0.4"))
    wait_until(lambda: not stack.prometheus.query("llm_d_epp_inflight_requests"), timeout_s=60)
    assert not stack.prometheus.query("llm_d_epp_flow_control_queue_size")
    assert observe(source, target(LLM_D)).router_queue_waiting == 0


def test_an_epp_not_seen_running_leaves_its_queue_and_the_waiting_demand_unknown(stack: Stack) -> None:
    """No flow-control series and no in-flight series for the target's namespace (the EPP is not
    scraped, or runs elsewhere): its queue is unknown, not 0, and so is the waiting demand: the
    last complete demand holds the target while the servers' queue falls."""
    source = LiveSource(PrometheusReader(stack.prometheus.url, rate_window="5s"))
    t = target(LLM_D)
    stack.fleet.set_fleet_load(PodLoad(waiting=60, running=10))
    stack.router.set_load(RouterLoad(queued=40, saturation=1.2))
    wait_until(lambda: stack.prometheus.query("sum(llm_d_epp_flow_control_queue_size) == 40"))
    wait_until(lambda: stack.prometheus.query("sum(vllm:num_requests_waiting) == 60"))
    before = refresh(source, t)
    assert before.replicas == 10  # 60 in the servers and 40 in the router, 10 a replica
    stack.router.namespace = "elsewhere"  # its endpoints are another namespace's
    stack.router.set_load(RouterLoad(flow_control=False, inflight=70))
    stack.fleet.set_fleet_load(PodLoad(waiting=4, running=10))
    wait_until(
        lambda: stack.prometheus.query('sum(llm_d_epp_inflight_requests{namespace="elsewhere"}) == 70')
    )
    wait_until(lambda: not stack.prometheus.query("llm_d_epp_flow_control_queue_size"), timeout_s=60)
    wait_until(lambda: not stack.prometheus.query("llm_d_epp_flow_control_pool_saturation"), timeout_s=60)
    wait_until(lambda: stack.prometheus.query("sum(vllm:num_requests_waiting) == 4"))
    seen = observe(source, t)
    assert seen.router_queue_waiting is None
    assert "its queue is unknown, not empty" in seen.missing["router_queue_waiting"]
    assert seen.queue_waiting is None
    assert "the router's queue, part of the waiting demand, is unknown" in seen.missing["queue_waiting"]
    held = t.engine.decide(seen)
    assert held.replicas == 10
    assert held.binding.value == "last_known"


def test_stale_endpoints_make_the_saturation_gauge_ignored(stack: Stack) -> None:
    """Saturation reads 1.0 for endpoints with stale metrics: with any stale it is not read at all."""
    source = LiveSource(PrometheusReader(stack.prometheus.url, rate_window="5s"))
    t = target(LLM_D)
    stack.router.set_load(RouterLoad(saturation=1.0, stale_endpoints=0))
    wait_until(lambda: stack.prometheus.query("max(llm_d_epp_flow_control_pool_saturation) == 1"))
    assert observe(source, t).router_saturation == 1.0
    stack.router.set_load(RouterLoad(saturation=1.0, stale_endpoints=2))
    wait_until(lambda: stack.prometheus.query("max(llm_d_epp_flow_control_stale_endpoints) == 2"))
    stale = observe(source, t)
    assert stale.router_saturation is None
    assert "2 stale endpoints" in stale.missing["router_saturation"]


def test_the_routers_ttft_is_the_one_checked_against_the_objective(stack: Stack) -> None:
    """The router's TTFT counts the time in its queue: its share over the objective is the one
    observed, while the servers' own histogram still gives the requests served and the mean."""
    source = LiveSource(PrometheusReader(stack.prometheus.url, rate_window="5s"))
    t = target(LLM_D)
    stack.fleet.set_fleet_load(
        PodLoad(requests_per_s=4, running=20, ttft_seconds=0.3, prompt_tokens_per_s=4000)
    )
    stack.router.set_load(RouterLoad(queued=50, requests_per_s=4, ttft_seconds=9.0))
    wait_until(lambda: stack.prometheus.query("sum(rate(llm_d_epp_request_ttft_seconds_count[5s])) > 3.8"))
    wait_until(lambda: stack.prometheus.query("sum(rate(vllm:time_to_first_token_seconds_count[5s])) > 3.8"))
    seen = observe(source, t)
    assert seen.ttft_over_objective == pytest.approx(1.0)  # every user waited 9 s
    assert seen.ttft_p99_seconds is not None
    assert seen.ttft_p99_seconds > 5.0
    assert seen.ttft_mean_seconds == pytest.approx(0.3, rel=0.05)  # the servers' own: prefill
    assert seen.requests_per_s == pytest.approx(4.0, rel=0.2)


def test_a_router_queue_with_no_ready_replica_raises_the_target_at_once(stack: Stack) -> None:
    """Every pod down: no server exports a queue, the router holds 60: the target rises above the
    floor at the first refresh that sees it (Kubernetes through the API double says 0 Ready)."""
    require_prometheus()
    with KubeDouble() as double:
        seed(double, replicas=2)
        for name in ("llama-5d8f-a", "llama-5d8f-b"):
            double.apply(llama_pod(name, node="gpu-a"))  # Running, not Ready
        api = client.ApiClient(client.Configuration(host=double.url))
        inventory = KubernetesInventory(api, options=FAST)
        inventory.start()
        try:
            assert inventory.wait_synced(5), inventory.problem()
            stack.fleet.set_pods([])  # no pod serves, so none exports
            stack.router.set_load(RouterLoad(queued=0.0))
            source = LiveSource(PrometheusReader(stack.prometheus.url, rate_window="5s"), inventory)
            t = target(LLM_D)
            wait_until(lambda: not stack.prometheus.query("vllm:num_requests_waiting"), timeout_s=60)
            wait_until(lambda: stack.prometheus.query("sum(llm_d_epp_flow_control_queue_size) == 0"))
            calm = refresh(source, t)
            stack.router.set_load(RouterLoad(queued=60.0))
            wait_until(lambda: stack.prometheus.query("sum(llm_d_epp_flow_control_queue_size) == 60"))
            down = refresh(source, t)
        finally:
            inventory.stop()
    assert calm.replicas == 2
    assert down.observation.ready_replicas == 0
    assert down.observation.queue_waiting is None  # no server to export it
    assert down.replicas == 6  # 60 held in the router at 10 a replica, at once


def test_dynamos_frontend_is_read_as_the_engine_and_its_kv_router_as_the_router() -> None:
    """engine: dynamo reads the frontend's queue, in-flight requests, token rates, TTFT and
    max_num_seqs (the slots); router: dynamo reads its KV router's queue beside it."""
    require_prometheus()
    fleet = SimulatedFleet(model=MODEL, engine="dynamo")
    fleet.set_pods(["worker-0", "worker-1"])
    fleet.max_num_seqs = 48
    router = SimulatedRouter("dynamo", model=MODEL)
    fleet.start()
    router.start()
    prometheus = LocalPrometheus(scrape_interval_s=0.5)
    try:
        prometheus.start([fleet.address, router.address])
        fleet.set_fleet_load(PodLoad(waiting=6, running=30, requests_per_s=3, prompt_tokens_per_s=3000))
        router.set_load(RouterLoad(queued=25))
        wait_until(lambda: prometheus.query("sum(dynamo_frontend_router_queue_pending_requests) == 25"))
        wait_until(
            lambda: prometheus.query("sum(rate(dynamo_frontend_input_sequence_tokens_sum[5s])) > 2900")
        )
        metadata = {"engine": "dynamo", "router": "dynamo", "labelSelector": f'model="{MODEL.lower()}"'}
        seen = observe(LiveSource(PrometheusReader(prometheus.url, rate_window="5s")), target(metadata))
    finally:
        prometheus.close()
        router.stop()
        fleet.stop()
    assert seen.queue_waiting == 6
    assert seen.requests_running == 30
    assert seen.slots_per_replica == 48
    assert seen.router_queue_waiting == 25
    assert seen.prompt_tokens_per_s == pytest.approx(3000, rel=0.05)
    assert seen.requests_per_s == pytest.approx(3.0, rel=0.05)
