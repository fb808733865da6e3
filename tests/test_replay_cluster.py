"""Cluster model invariants: Pending without GPUs, cold start, draining, routing, slots, TTFT; the
serving models (dispatch, waiting, the phase-time histograms) as the replay exports them."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from scaler.model import Observation
from scaler.replay.fleet.cluster import Cluster, ClusterConfig, ClusterError
from scaler.replay.keda import scaledobject_model
from scaler.replay.policies import KedaPolicy, TickInputs
from scaler.replay.replay import RunResult, run
from scaler.replay.trace import Trace
from scaler.sim.pods import PodState

CFG = ClusterConfig(
    prefill_tokens_per_s=1000.0,
    decode_slots=2,
    decode_tokens_per_s_per_seq=10.0,
    cold_start_s=100.0,
    gpus_per_replica=2,
    gpus_free=6,
)


def test_ttft_is_prefill_time_on_an_idle_pod() -> None:
    """On an idle pod the first token comes after the prompt's prefill time alone."""
    cluster = Cluster(CFG, initial_ready=1)
    _, first, end = cluster.assign(0.0, prompt_tokens=500, output_tokens=1)
    assert first == pytest.approx(0.5)
    assert end == pytest.approx(0.5)


def test_prefill_queue_is_first_come_first_served() -> None:
    """A later prompt waits for the earlier prefill to finish before its own starts."""
    cluster = Cluster(CFG, initial_ready=1)
    cluster.assign(0.0, 1000, 1)  # prefills until 1.0
    _, first, _ = cluster.assign(0.2, 500, 1)
    assert first == pytest.approx(1.5)  # waits 0.8 s, then 0.5 s of prefill: TTFT 1.3 s


def test_a_request_waits_for_a_free_batch_slot() -> None:
    """With every decode slot taken, a request starts prefill only when the first slot frees."""
    cluster = Cluster(CFG, initial_ready=1)
    _, _, end_a = cluster.assign(0.0, 100, 101)  # ~10 s of decode
    _, _, end_b = cluster.assign(0.0, 100, 101)
    _, first, _ = cluster.assign(0.5, 100, 1)  # both slots taken: waits for the first to free
    assert first == pytest.approx(min(end_a, end_b) + 0.1)
    assert first > 9.0


def test_least_loaded_routing() -> None:
    """Requests go to the Ready pod with the fewest in flight."""
    cluster = Cluster(CFG.with_overrides(decode_slots=8), initial_ready=3)
    for t in (0.0, 0.01, 0.02):
        cluster.assign(t, 10, 100)
    loads = cluster.ready_loads(0.05)
    assert loads == [1, 1, 1]  # one each, not three on the first
    cluster.assign(0.06, 10, 100)
    assert sorted(cluster.ready_loads(0.07)) == [1, 1, 2]


def test_pending_when_no_gpu_is_free_then_scheduled_when_one_frees() -> None:
    """Pods beyond free GPUs stay Pending, and scaling down removes Pending pods before Ready ones."""
    cluster = Cluster(CFG, initial_ready=2)  # 4 of 6 GPUs bound
    cluster.scale_to(4, now=0.0)
    view = cluster.view(0.0)
    assert (view.ready, view.starting, view.pending, view.gpus_free) == (2, 1, 1, 0)
    assert view.replicas == 4
    # The starting pod is Ready one cold start later; the Pending one still waits.
    view = cluster.view(100.0)
    assert (view.ready, view.pending) == (3, 1)
    # Scale to 3: the Pending pod goes first, nothing drains.
    cluster.scale_to(3, now=110.0)
    view = cluster.view(110.0)
    assert (view.ready, view.pending, view.draining) == (3, 0, 0)
    cluster.advance(3600.0)
    assert cluster.pending_pod_seconds == pytest.approx(110.0)


def test_draining_pod_finishes_in_flight_requests_then_frees_its_gpus() -> None:
    """A draining pod gets no new requests, keeps its GPUs until its last request ends, then goes."""
    cluster = Cluster(CFG.with_overrides(gpus_free=4), initial_ready=2)
    cluster.assign(0.0, 100, 1)  # pod 0, ends at 0.1
    _, _, end = cluster.assign(0.01, 100, 201)  # pod 1 (least loaded), decodes ~20 s
    cluster.scale_to(1, now=1.0)  # the newest Ready pod (1) drains
    assert [p.index for p in cluster.draining] == [1]
    pod = cluster.draining[0]
    assert pod.state is PodState.DRAINING
    assert cluster.view(1.0).gpus_free == 2 - 2 + 0  # still bound while it drains
    # New requests go to the remaining Ready pod only.
    cluster.assign(2.0, 100, 1)
    assert [p.index for p in cluster.ready] == [0]
    assert cluster.view(end - 0.01).draining == 1
    view = cluster.view(end + 0.01)
    assert view.draining == 0
    assert view.gpus_free == 2
    state: PodState = pod.state  # re-read: advancing the cluster has changed it
    assert state is PodState.GONE


def test_scale_up_creates_pods_that_become_ready_after_the_cold_start() -> None:
    """New pods become Ready exactly one cold start after the scale-up."""
    cluster = Cluster(CFG.with_overrides(gpus_free=8), initial_ready=1)
    cluster.scale_to(3, now=10.0)
    assert cluster.view(109.0).ready == 1
    assert cluster.view(110.0).ready == 3


def test_gpu_seconds_count_bound_pods() -> None:
    """GPU-seconds count every GPU bound to a pod, Ready or starting, over the elapsed time."""
    cluster = Cluster(CFG, initial_ready=1)
    cluster.scale_to(2, now=0.0)
    cluster.advance(3600.0)
    assert cluster.gpu_seconds == pytest.approx(2 * 2 * 3600.0)


def test_requests_wait_for_a_starting_pod_when_none_is_ready() -> None:
    """With no Ready pod, a request waits for the starting pod's cold start, then prefills."""
    cluster = Cluster(CFG, initial_ready=0)
    cluster.scale_to(1, now=0.0)
    _, first, _ = cluster.assign(5.0, 100, 1)
    assert first == pytest.approx(100.1)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"decode_slots": 0}, "decode_slots"),
        ({"prefill_tokens_per_s": -1.0}, "prefill_tokens_per_s"),
        ({"gpus_free": 1}, "gpus_free"),
    ],
    ids=["zero-decode-slots", "negative-prefill-rate", "gpus-free-below-one-replica"],
)
def test_config_validation(changes: dict[str, object], message: str) -> None:
    """An invalid cluster setting raises ClusterError naming the setting."""
    with pytest.raises(ClusterError, match=message):
        CFG.with_overrides(**changes)


def test_config_from_mapping_rejects_unknown_keys() -> None:
    """Unknown cluster keys are refused; known ones are read."""
    with pytest.raises(ClusterError, match="unknown cluster keys"):
        ClusterConfig.from_mapping({"gpus": 4})
    assert ClusterConfig.from_mapping({"gpus_free": 8}).gpus_free == 8


@pytest.mark.parametrize(
    ("physics", "decode_end"),
    [
        # shared: prefill of 1 s on a 10 s busy window slows decoding by 10%: 100 tokens at 9/s
        ("shared", 1.0 + 100 / (10.0 * 0.9)),
        # separate: decoding runs at its own rate whatever prefill does
        ("separate", 1.0 + 100 / 10.0),
    ],
    ids=["shared", "separate"],
)
def test_physics_decides_whether_prefill_slows_decode(physics: str, decode_end: float) -> None:
    """Shared physics adds prefill and decode as GPU time; separate keeps them apart."""
    cluster = Cluster(CFG.with_overrides(physics=physics), initial_ready=1)
    _, first, end = cluster.assign(0.0, prompt_tokens=1000, output_tokens=101)
    assert first == pytest.approx(1.0)
    assert end == pytest.approx(decode_end)


@pytest.mark.parametrize(
    ("physics", "prompt", "generation", "expected"),
    [
        ("shared", 500.0, 10.0, 0.5 + 0.5),  # 500/1000 + 10/(2 * 10): added
        ("separate", 500.0, 10.0, 0.5),  # the tighter of the two
        ("separate", 100.0, 16.0, 0.8),
    ],
    ids=["shared-adds", "separate-max-prefill", "separate-max-decode"],
)
def test_busy_fraction_follows_the_physics(
    physics: str, prompt: float, generation: float, expected: float
) -> None:
    """What a replica's capacity is, in each physics, as the baseline's GPU utilisation reads it."""
    assert CFG.with_overrides(physics=physics).busy_fraction(prompt, generation) == pytest.approx(expected)


def test_unknown_physics_is_refused() -> None:
    """A typo in the cluster YAML is an error naming the choices, not a silent default."""
    with pytest.raises(ClusterError, match="physics must be one of shared, separate"):
        ClusterConfig.from_mapping({"physics": "disaggregated"})


# ---- serving models: dispatch, waiting, phase-time histograms ---------------------------

LONG = 10_000  # output tokens: a request that holds its pod for the whole test (1,000 s at 10/s)


def test_random_dispatch_spreads_requests_evenly_and_blindly_the_same_way_every_run() -> None:
    """A Kubernetes Service: each request to a Ready pod at random, seeded. 4,000 long requests on
    4 pods land about 1,000 on each, but not as a least-outstanding picker would (exactly even at
    every step), and the picks repeat with the seed and change with another."""
    cfg = CFG.with_overrides(decode_slots=5000, gpus_free=8, dispatch="random", dispatch_seed=7)

    def spread(config: ClusterConfig) -> tuple[list[int], int]:
        cluster = Cluster(config, initial_ready=4)
        widest = 0
        for k in range(4000):
            cluster.assign(k * 0.001, 1, LONG)
            loads = cluster.ready_loads(k * 0.001)
            widest = max(widest, max(loads) - min(loads))
        return cluster.ready_loads(4.0), widest

    loads, widest = spread(cfg)
    assert sum(loads) == 4000
    # Binomial(4000, 1/4): a standard deviation of 27; 110 is four of them.
    assert all(abs(n - 1000) <= 110 for n in loads), loads
    assert widest > 1, "random dispatch balanced the outstanding requests: it read the load"
    assert spread(cfg) == (loads, widest)
    assert spread(cfg.with_overrides(dispatch_seed=8))[0] != loads


def test_round_robin_dispatch_takes_the_ready_pods_in_turn_whatever_their_load() -> None:
    """Round robin: pod 0, 1, 2, then pod 0 again though it alone still holds a request."""
    cluster = Cluster(CFG.with_overrides(decode_slots=8, dispatch="round-robin"), initial_ready=3)
    cluster.assign(0.0, 10, LONG)  # pod 0: busy for the whole test
    cluster.assign(0.1, 10, 1)  # pod 1: done at 0.11
    cluster.assign(0.2, 10, 1)  # pod 2: done at 0.21
    assert cluster.ready_loads(1.0) == [1, 0, 0]
    cluster.assign(1.0, 10, LONG)  # pod 0's turn again; least-outstanding would pick pod 1
    assert cluster.ready_loads(1.0) == [2, 0, 0]
    cluster.assign(1.1, 10, LONG)
    cluster.assign(1.2, 10, LONG)
    assert cluster.ready_loads(1.2) == [2, 1, 1]


def test_least_outstanding_is_the_default_dispatch() -> None:
    """Without the key the fleet dispatches as it always has: to the pod with the fewest requests."""
    assert ClusterConfig().dispatch == "least-outstanding"
    cluster = Cluster(CFG.with_overrides(decode_slots=8), initial_ready=3)
    cluster.assign(0.0, 10, LONG)
    cluster.assign(0.1, 10, 1)
    cluster.assign(0.2, 10, 1)
    cluster.assign(1.0, 10, LONG)  # pods 1 and 2 are free: pod 1 (the older) takes it
    assert cluster.ready_loads(1.0) == [1, 1, 0]


@pytest.mark.parametrize(
    ("waiting", "at_half", "at_one_and_half"),
    [
        ("slot", (0, 3), (0, 3)),  # each holds a free slot at once: its prefill queue counts as running
        ("prefill", (2, 1), (1, 2)),  # vLLM V1: waiting until its prefill starts
    ],
    ids=["slot", "prefill"],
)
def test_the_waiting_model_decides_whether_a_prefill_backlog_shows_as_waiting(
    waiting: str, at_half: tuple[int, int], at_one_and_half: tuple[int, int]
) -> None:
    """Three 1,000-token prompts at once on one pod of 1,000 tokens/s and 8 free slots: the same
    schedule (first tokens at 1, 2 and 3 s), counted as (waiting, running) per the waiting model;
    with ``prefill`` the backlog is waiting while running stays below the slots."""
    cluster = Cluster(CFG.with_overrides(decode_slots=8, waiting=waiting), initial_ready=1)
    firsts = [cluster.assign(0.0, 1000, LONG)[1] for _ in range(3)]
    assert firsts == pytest.approx([1.0, 2.0, 3.0])
    for t, (want_waiting, want_running) in ((0.5, at_half), (1.5, at_one_and_half)):
        view = cluster.view(t)
        assert (view.waiting, view.running) == (want_waiting, want_running)
        assert view.running < 8
    assert cluster.view(3.5).waiting == 0


def test_with_waiting_prefill_a_request_waiting_for_a_slot_is_first_scheduled_when_its_prefill_starts() -> (
    None
):
    """Every slot busy: a request is scheduled when a slot frees (both waiting models agree there),
    and under ``prefill`` it also waits out the prefill queue before counting as running."""
    for waiting in ("slot", "prefill"):
        cluster = Cluster(CFG.with_overrides(waiting=waiting), initial_ready=1)  # 2 slots
        _, _, end_a = cluster.assign(0.0, 100, 101)
        cluster.assign(0.0, 100, 101)
        scheduled, first, _ = cluster.assign(0.5, 100, 1)
        assert scheduled == pytest.approx(end_a)  # the first slot to free
        assert first == pytest.approx(end_a + 0.1)


def test_serving_model_keys_are_validated_each_named() -> None:
    """A typo in any serving-model key is an error naming every bad key and its choices."""
    with pytest.raises(ClusterError) as raised:
        ClusterConfig.from_mapping(
            {
                "dispatch": "hash",
                "waiting": "kv",
                "phase_histograms": "yes",
                "pod_maxima": 1,
                "dispatch_seed": -1,
            }
        )
    message = str(raised.value)
    assert "dispatch must be one of least-outstanding, random, round-robin, got 'hash'" in message
    assert "waiting must be one of slot, prefill, got 'kv'" in message
    assert "phase_histograms must be true or false, got 'yes'" in message
    assert "pod_maxima must be true or false, got 1" in message
    assert "dispatch_seed must be an integer >= 0, got -1" in message


def test_every_cluster_key_has_its_row_in_the_cluster_reference() -> None:
    """docs/replay.md's CLUSTER.yaml table lists every key the cluster model reads."""
    text = (Path(__file__).resolve().parent.parent / "docs" / "replay.md").read_text()
    missing = [f.name for f in fields(ClusterConfig) if f"\n| `{f.name}` |" not in text]
    assert not missing, f"cluster keys without a row in docs/replay.md: {missing}"


def test_describe_names_the_serving_model_only_where_it_is_not_the_default() -> None:
    """Reports say which serving model ran; the default's words are today's."""
    assert ClusterConfig().describe() == "16 GPUs, 1 per replica, cold start 180s"
    words = ClusterConfig(dispatch="random", dispatch_seed=3, waiting="prefill", phase_histograms=False)
    assert words.describe() == (
        "16 GPUs, 1 per replica, cold start 180s, random dispatch (seed 3),"
        " waiting until its prefill starts (vLLM V1), no phase-time histograms"
    )


class _Recording(KedaPolicy):
    """This scaler on one replica, keeping every Observation it was given, by tick."""

    def __init__(self) -> None:
        external = {"type": "external", "metadata": {"minReplicas": "1", "maxReplicas": "1"}}
        spec = {"minReplicaCount": 1, "maxReplicaCount": 1, "triggers": [external]}
        super().__init__("scaler", scaledobject_model({"kind": "ScaledObject", "spec": spec}))
        self.seen: dict[float, Observation] = {}

    def observation(self, tick: TickInputs) -> Observation:
        self.seen[tick.now_s] = observed = super().observation(tick)
        return observed


PHASE_TRACE = Trace(  # 80 one-token requests in 40 s, 100-600 prompt tokens: 0.7 of a 1,000 tokens/s pod
    np.sort(np.random.default_rng(5).uniform(0.0, 40.0, 80)),
    np.random.default_rng(6).integers(100, 600, 80),
    np.ones(80, dtype=np.int64),
    "phase-times",
)


def _replayed(**changes: object) -> tuple[RunResult, dict[float, Observation]]:
    policy = _Recording()
    config = CFG.with_overrides(decode_slots=100, **changes)
    result = run(PHASE_TRACE, config, policy, datetime(2026, 12, 7, tzinfo=UTC), 1, warmup_s=0.0)
    return result, policy.seen


@pytest.mark.parametrize("waiting", ["slot", "prefill"])
def test_the_phase_histograms_means_are_what_the_requests_saw(waiting: str) -> None:
    """vLLM's queue time (arrival to first scheduled) and prefill time (first scheduled to first
    token), observed as requests finish, read over the last minute: at 60 s every request of the
    trace has finished, so their means are those of the requests' own TTFTs split by the waiting
    model. On one pod with slots to spare, ``prefill``: the prefill time is the prompt's (prompt /
    1,000 tokens/s) and the queue time the rest of the TTFT; ``slot``: the queue time is 0 (a slot
    is free at once) and the prefill time the whole TTFT, its prefill queue included."""
    result, seen = _replayed(waiting=waiting)
    ttft = result.ttft
    compute = PHASE_TRACE.prompt_tokens / 1000.0
    queue, prefill = (ttft - compute, compute) if waiting == "prefill" else (np.zeros_like(ttft), ttft)
    assert float(queue.mean()) > 0.05 or waiting == "slot"  # the pod did queue prompts
    at_a_minute = seen[60.0]
    assert at_a_minute.queue_time_mean_seconds == pytest.approx(float(queue.mean()), abs=1e-9)
    assert at_a_minute.prefill_time_mean_seconds == pytest.approx(float(prefill.mean()), rel=1e-9)
    assert at_a_minute.requests_per_s == pytest.approx(80 / 60)


def test_without_phase_histograms_the_observations_have_no_phase_times() -> None:
    """``phase_histograms: false``, a stack that exports none: the same replay's Observations lack
    both means, where with them (the default) the refreshes after the first finishes have both."""
    _, without = _replayed(waiting="prefill", phase_histograms=False)
    _, default = _replayed(waiting="prefill")
    assert all(
        o.queue_time_mean_seconds is None and o.prefill_time_mean_seconds is None for o in without.values()
    )
    assert default[15.0].queue_time_mean_seconds is not None
    assert default[15.0].prefill_time_mean_seconds is not None


def test_without_pod_maxima_the_observations_have_no_busiest_pod() -> None:
    """``pod_maxima: false``, a stack read as the fleet's sums only: the Observations lack the
    busiest pod's running count, KV cache and prefill, where with them (the default) they carry
    them from the first refresh a pod serves."""
    _, without = _replayed(waiting="prefill", pod_maxima=False)
    _, default = _replayed(waiting="prefill")
    assert all(
        o.requests_running_max is None and o.kv_cache_usage_max is None and o.prefill_busy_max is None
        for o in without.values()
    )
    assert default[15.0].requests_running_max is not None
    assert default[15.0].kv_cache_usage_max is not None


@pytest.mark.parametrize("physics", ["shared", "step"])
def test_a_request_reads_its_own_prompt_from_the_first_refresh_of_the_warm_up(physics: str) -> None:
    """Every series opens at zero together and the policy is first consulted a rate window into the
    warm-up (``scaler.replay.fleet.series``): 1,000-token prompts every 2 s read 1,000 prompt tokens
    a request (prompt tokens/s over requests/s) and 0.5 requests/s from the first refresh on. (With
    the token counters opening at the first minute's rate and the first-token histogram empty, the
    first refreshes read several times that prompt, and a decider read its replicas' prefill as many
    times too fast; consulted from the first second, it read the first minute's ramp as the demand.)"""
    n = 300
    trace = Trace(np.arange(n, dtype=np.float64) * 2.0, np.full(n, 1000), np.full(n, 20), "steady")
    policy = _Recording()
    config = (
        CFG.with_overrides(decode_slots=100)
        if physics == "shared"
        else ClusterConfig.from_mapping({"physics": "step", "gpus_free": 8})
    )
    run(trace, config, policy, datetime(2026, 12, 7, tzinfo=UTC), 1, warmup_s=120.0)
    early = [o for t, o in sorted(policy.seen.items()) if t <= 0.0]  # the warm-up's refreshes
    assert len(early) >= 4
    for obs in early:
        assert obs.requests_per_s is not None
        assert obs.prompt_tokens_per_s is not None
        assert obs.requests_per_s == pytest.approx(0.5, rel=0.1)
        assert obs.prompt_tokens_per_s / obs.requests_per_s == pytest.approx(1000.0, rel=0.1)
