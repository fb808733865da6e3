"""Cluster model invariants: Pending without GPUs, cold start, draining, routing, slots, TTFT."""

from __future__ import annotations

import pytest

from scaler.pods import PodState
from scaler.replay.cluster import Cluster, ClusterConfig, ClusterError

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
    first, end = cluster.assign(0.0, prompt_tokens=500, output_tokens=1)
    assert first == pytest.approx(0.5)
    assert end == pytest.approx(0.5)


def test_prefill_queue_is_first_come_first_served() -> None:
    """A later prompt waits for the earlier prefill to finish before its own starts."""
    cluster = Cluster(CFG, initial_ready=1)
    cluster.assign(0.0, 1000, 1)  # prefills until 1.0
    first, _ = cluster.assign(0.2, 500, 1)
    assert first == pytest.approx(1.5)  # waits 0.8 s, then 0.5 s of prefill: TTFT 1.3 s


def test_a_request_waits_for_a_free_batch_slot() -> None:
    """With every decode slot taken, a request starts prefill only when the first slot frees."""
    cluster = Cluster(CFG, initial_ready=1)
    _, end_a = cluster.assign(0.0, 100, 101)  # ~10 s of decode
    _, end_b = cluster.assign(0.0, 100, 101)
    first, _ = cluster.assign(0.5, 100, 1)  # both slots taken: waits for the first to free
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
    _, end = cluster.assign(0.01, 100, 201)  # pod 1 (least loaded), decodes ~20 s
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
    first, _ = cluster.assign(5.0, 100, 1)
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
    first, end = cluster.assign(0.0, prompt_tokens=1000, output_tokens=101)
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
