"""llm-d's flow control in the replay: the router holds what the pool cannot take, the servers' queue
levels off, and the scaler sees the backlog only where its metadata names the router."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np
import pytest

from scaler.decider.flowcontrol import pool_saturation
from scaler.inputs import Input, Reading
from scaler.replay.fleet.cluster import ClusterConfig
from scaler.replay.keda import ScaledObjectModel, scaledobject_model
from scaler.replay.policies import ClairvoyantPolicy, KedaPolicy, TickInputs
from scaler.replay.replay import run
from scaler.replay.trace import Trace
from scaler.sim.fleet import PodLoad
from scaler.sim.router import saturation_of

START = datetime.fromisoformat("2026-12-07T10:00:00+00:00")
# Two pods of 8 batch slots; short requests, so a slot frees every tenth of a second or so.
FLEET = ClusterConfig(decode_slots=8, cold_start_s=60, gpus_free=16, router="llm-d")


def overload(rate: float = 40.0, minutes: float = 5.0, prompt: int = 200, output: int = 20) -> Trace:
    """Poisson-like arrivals at ``rate`` per second, about twice what two pods of FLEET serve."""
    rng = np.random.default_rng(0)
    count = int(rate * minutes * 60)
    arrivals = np.sort(rng.random(count) * minutes * 60)
    return Trace(arrivals, np.full(count, prompt), np.full(count, output), "overload")


class Watch:
    """A policy that records what each tick showed and leaves the replicas to ``inner``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.min_replicas = inner.min_replicas
        self.max_replicas = inner.max_replicas
        self.ticks: list[TickInputs] = []
        self.targets: list[int] = []  # the scaler's target at each refresh (KedaPolicy only)

    def tick(self, tick: TickInputs) -> int | None:
        """Record the tick (its series read now, while they are the tick's), then let the inner policy act."""
        assert tick.readings is not None
        self.ticks.append(tick)
        decisions = getattr(self.inner, "decisions", 0)
        wanted: int | None = self.inner.tick(tick)
        if getattr(self.inner, "decisions", 0) != decisions:
            self.targets.append(self.inner.latest.replicas)
        return wanted


def read(tick: TickInputs, name: Input) -> Any:
    """What the tick's readings hold for ``name`` (None: not read)."""
    return tick.readings.values.get(name)


def fixed(replicas: int) -> ClairvoyantPolicy:
    """A policy that holds ``replicas`` throughout."""
    return ClairvoyantPolicy("fixed", [replicas] * 60, 60.0, 60.0, replicas)


@pytest.mark.parametrize(
    ("kv_full", "waiting_per_pod", "kv"),
    [(0.5, (4.9, 5.6), (0.45, 0.5)), (1.0, (0.0, 0.1), (0.78, 0.85))],
    ids=["max-num-seqs-bound", "kv-cache-bound"],
)
def test_flow_control_holds_the_servers_queue_at_its_threshold_and_the_rest_in_the_router(
    kv_full: float, waiting_per_pod: tuple[float, float], kv: tuple[float, float]
) -> None:
    """Two pods offered twice what they serve: with the router, the servers' queue levels off near 5
    per pod (or their KV cache near 0.8, where the cache bounds the batch) while the backlog grows in
    the router; without it, the same backlog piles up in the servers' queue."""
    cfg = FLEET.with_overrides(kv_cache_usage_full_batch=kv_full)
    watch = Watch(fixed(2))
    result = run(overload(), cfg, watch, START, 2, warmup_s=0)
    held = [t for t in watch.ticks if read(t, Input.ROUTER_QUEUE_WAITING)]
    assert len(held) > 0.9 * len(watch.ticks)
    assert max(read(t, Input.ROUTER_QUEUE_WAITING) or 0 for t in held) > 1000
    per_pod = [read(t, Input.QUEUE_WAITING) / read(t, Input.READY_REPLICAS) for t in held]
    assert waiting_per_pod[0] <= float(np.mean(per_pod)) <= waiting_per_pod[1]
    assert max(per_pod) <= 5.5  # never past the threshold by more than what one dispatch adds
    assert kv[0] <= float(np.mean([read(t, Input.KV_CACHE_USAGE) for t in held])) <= kv[1]
    assert all(
        read(t, Input.ROUTER_SATURATION) is not None and read(t, Input.ROUTER_SATURATION) >= 0.99
        for t in held[5:]
    )
    # The TTFT scored is the users', router queue included; the servers' own histogram stays fast.
    assert float(np.median(result.ttft)) > 60.0
    servers = held[-1].readings.histograms.get(Reading.TTFT)
    assert servers is not None
    assert servers[2.5] / servers[float("inf")] > 0.99
    direct = Watch(fixed(2))
    run(overload(), cfg.with_overrides(router="none"), direct, START, 2, warmup_s=0)
    assert all(read(t, Input.ROUTER_QUEUE_WAITING) is None for t in direct.ticks)
    assert (
        max(read(t, Input.QUEUE_WAITING) for t in direct.ticks) > 1000
    )  # no router: the servers hold the backlog


def scaledobject(**metadata: str) -> ScaledObjectModel:
    """This scaler for 2 to 20 replicas behind an HPA held at 2, so the backlog lasts the replay."""
    meta = {
        "engine": "vllm",
        "minReplicas": "2",
        "maxReplicas": "20",
        "targetQueuePerReplica": "10",
        **metadata,
    }
    return scaledobject_model(
        {
            "kind": "ScaledObject",
            "spec": {
                "minReplicaCount": 2,
                "maxReplicaCount": 2,
                "triggers": [{"type": "external", "metadata": meta}],
            },
        }
    )


def test_with_router_llm_d_the_target_rises_where_the_engine_only_configuration_does_not() -> None:
    """Flow control holds the servers' queue at 5 a pod (their batch bound by max_num_seqs) while the
    router's grows: the ScaledObject with `router: llm-d` reads it and its target rises within two
    refreshes; the same ScaledObject without it sees the flat queue and stays at its floor then, and
    over the replay sizes only what the servers are given (its batch cap measured where requests
    wait for slots): 1.5 times less. The router's TTFT, queue included, is the one it checks
    against the objective."""
    cfg = FLEET.with_overrides(kv_cache_usage_full_batch=0.5)
    routed = Watch(KedaPolicy("router", scaledobject(router="llm-d", inferencePool="pool")))
    engine_only = Watch(KedaPolicy("engine only", scaledobject()))
    for policy in (routed, engine_only):
        run(overload(), cfg, policy, START, 2, warmup_s=0)
    # The first refresh (t=0) sees nothing; the router holds requests from the first second on.
    assert routed.targets[0] == engine_only.targets[0] == 2
    assert max(routed.targets[1:3]) > 2
    assert engine_only.targets[1:3] == [2, 2]
    assert max(routed.targets) >= 1.5 * max(engine_only.targets)
    seen = routed.inner.latest.observation
    flat = engine_only.inner.latest.observation
    assert seen.router_queue_waiting is not None
    assert seen.router_queue_waiting > 1000
    assert flat.router_queue_waiting is None
    assert flat.queue_waiting == seen.queue_waiting == 10  # both see the servers' 5 a pod
    assert seen.ttft_over_objective == pytest.approx(1.0)  # users waited in the router
    assert flat.ttft_over_objective == pytest.approx(0.0)  # the servers answered fast once sent


def keda(query: str) -> ScaledObjectModel:
    """Plain KEDA for 2 to 8 replicas: one prometheus trigger, 10 a replica."""
    trigger = {"type": "prometheus", "metadata": {"query": query, "threshold": "10"}}
    return scaledobject_model(
        {"kind": "ScaledObject", "spec": {"minReplicaCount": 2, "maxReplicaCount": 8, "triggers": [trigger]}}
    )


def test_plain_keda_on_the_servers_queue_stays_at_its_floor_behind_the_router_and_on_the_routers_rises() -> (
    None
):
    """KEDA on `vllm:num_requests_waiting` sees 5 a pod, 10 in all, however long the router's queue:
    it never leaves its floor. The same trigger on `llm_d_epp_flow_control_queue_size` reads the
    replayed router's queue and goes to its maximum."""
    cfg = FLEET.with_overrides(kv_cache_usage_full_batch=0.5)
    servers = Watch(KedaPolicy("servers", keda('sum(vllm:num_requests_waiting{model_name="m"})')))
    router = Watch(KedaPolicy("router", keda('sum(llm_d_epp_flow_control_queue_size{inference_pool="p"})')))
    for policy in (servers, router):
        run(overload(minutes=2.0), cfg, policy, START, 2, warmup_s=0)
    assert max(read(t, Input.ROUTER_QUEUE_WAITING) or 0 for t in servers.ticks) > 1000
    assert max(t.spec_replicas for t in servers.ticks) == 2
    assert max(t.spec_replicas for t in router.ticks) == 8


def test_a_router_named_in_the_metadata_but_not_in_the_cluster_is_missing_not_zero() -> None:
    """`router: llm-d` on a replayed fleet without one: the router's queue is reported missing (as a
    selector matching no series is live), never read as an empty queue."""
    policy = Watch(KedaPolicy("router", scaledobject(router="llm-d", inferencePool="pool")))
    run(overload(minutes=1.0), FLEET.with_overrides(router="none"), policy, START, 2, warmup_s=0)
    seen = policy.inner.latest.observation
    assert seen.router_queue_waiting is None
    assert "no llm-d router" in seen.missing["router_queue_waiting"]


def test_the_replay_and_the_simulated_epp_gate_on_the_same_saturation() -> None:
    """One rule for both: the simulated EPP's saturation from its pods' loads is the replay's
    formula (flowcontrol's worked example: 5 waiting at KV 0.6, 2 waiting at KV 0.9: 1.0625)."""
    pods = [PodLoad(waiting=5, kv_cache_usage=0.6), PodLoad(waiting=2, kv_cache_usage=0.9)]
    assert saturation_of(pods) == pytest.approx(1.0625)
    assert pool_saturation([(5, 0.6), (2, 0.9)]) == pytest.approx(1.0625)
    assert saturation_of([]) == 1.0  # an empty pool fails closed


def test_reports_say_the_fleet_is_behind_the_router() -> None:
    """The replay's report line names the router in front of the fleet, and only when there is one."""
    assert (
        FLEET.describe()
        == "16 GPUs, 1 per replica, cold start 60s, behind llm-d's flow control (router: llm-d)"
    )
    assert "llm-d" not in FLEET.with_overrides(router="none").describe()
