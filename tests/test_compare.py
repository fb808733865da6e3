"""The replay comparison: every policy plus the clairvoyant reference over one small synthetic trace."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from scaler.replay import compare as compare_module
from scaler.replay.compare import (
    BUCKET_S,
    ClairvoyantSearch,
    Comparison,
    busy_per_bucket,
    clairvoyant,
    compare,
    initial_ready,
    within,
)
from scaler.replay.fleet.cluster import ClusterConfig
from scaler.replay.keda import ScaledObjectModel, scaledobject_model
from scaler.replay.replay import RunResult
from scaler.replay.replay import run as real_run
from scaler.replay.trace import Trace

START = datetime(2026, 12, 1, tzinfo=UTC)
OBJECTIVE_S = 2.0
GOAL = 0.995  # clairvoyant's default attainment goal
# Two GPUs a replica on 16 free GPUs: at most 8 replicas; a two-minute cold start.
CLUSTER = ClusterConfig(cold_start_s=120.0, gpus_free=16, gpus_per_replica=2)
BOUNDS = (1, 8)
# Requests per second in each of ten minutes: calm, a two-minute burst, calm again.
RATES = (0.3, 0.3, 2.5, 2.5, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3)


def _trace(rates: tuple[float, ...] = RATES, seed: int = 11) -> Trace:
    """Seeded Poisson arrivals, constant within each minute; 6000-token prompts, 200 tokens out."""
    rng = np.random.default_rng(seed)
    counts = rng.poisson(np.asarray(rates) * BUCKET_S)
    arrivals = np.sort(
        np.concatenate([m * BUCKET_S + rng.random(c) * BUCKET_S for m, c in enumerate(counts)])
    )
    n = len(arrivals)
    return Trace(arrivals, np.full(n, 6000, dtype=np.int64), np.full(n, 200, dtype=np.int64), "synthetic")


def _queue_so(name: str, low: int, high: int) -> ScaledObjectModel:
    return scaledobject_model(
        {
            "metadata": {"name": name},
            "spec": {
                "minReplicaCount": low,
                "maxReplicaCount": high,
                "pollingInterval": 15,
                "triggers": [
                    {
                        "type": "prometheus",
                        "metadata": {"query": "sum(vllm:num_requests_waiting)", "threshold": "2"},
                    }
                ],
            },
        }
    )


def _scaler_so() -> ScaledObjectModel:
    return scaledobject_model(
        {
            "metadata": {"name": "scaler"},
            "spec": {
                "minReplicaCount": 1,
                "maxReplicaCount": 8,
                "triggers": [
                    {
                        "type": "external",
                        "metadata": {
                            "scalerAddress": "scaler:9090",
                            "targetQueuePerReplica": "2",
                            "coldStartSeconds": "120",
                        },
                    }
                ],
            },
        }
    )


POLICIES = (
    ("pinned-1", _queue_so("pinned-1", 1, 1)),
    ("queue", _queue_so("queue", 1, 8)),
    ("this scaler", _scaler_so()),
    ("pinned-8", _queue_so("pinned-8", 8, 8)),
)


def _attainment(result: RunResult) -> float:
    return float(within(result.ttft, OBJECTIVE_S).mean())


@pytest.fixture(scope="module")
def trace() -> Trace:
    """The ten-minute synthetic trace (a few hundred requests)."""
    return _trace()


@pytest.fixture(scope="module")
def comparison(trace: Trace) -> Comparison:
    """The four policies and the reference over the synthetic trace."""
    return compare(trace, CLUSTER, START, POLICIES, OBJECTIVE_S, BOUNDS)


def _by_name(comparison: Comparison) -> dict[str, RunResult]:
    return {r.name: r for r in comparison.results}


def test_the_synthetic_trace_is_a_few_hundred_requests_over_ten_minutes(trace: Trace) -> None:
    """The fixture trace has the size these tests are meant for."""
    assert 200 <= len(trace) <= 800
    assert 540 <= trace.duration_s < 600


def test_compare_returns_every_policy_then_the_clairvoyant(trace: Trace, comparison: Comparison) -> None:
    """One result per policy, in order, then the reference, each serving every request at a GPU cost."""
    assert [r.name for r in comparison.results] == [name for name, _ in POLICIES] + ["clairvoyant"]
    assert comparison.objective_s == OBJECTIVE_S
    for result in comparison.results:
        assert len(result.ttft) == len(trace)
        assert np.all(np.isfinite(result.ttft))
        assert np.all(result.ttft > 0)
        assert result.horizon_s == 600.0  # the trace's last minute, rounded up
        assert result.gpu_seconds > 0


def test_a_pinned_replica_costs_its_gpus_for_the_whole_horizon(comparison: Comparison) -> None:
    """One replica held throughout binds gpus_per_replica GPUs for all 600 s: 1200 GPU-seconds."""
    pinned = _by_name(comparison)["pinned-1"]
    assert pinned.gpu_seconds == pytest.approx(600.0 * CLUSTER.gpus_per_replica)
    assert pinned.peak_replicas == 1


def test_the_clairvoyant_meets_the_goal_that_an_underprovisioned_policy_misses(
    comparison: Comparison,
) -> None:
    """The reference's attainment reaches the goal, and is what its search reports."""
    results = _by_name(comparison)
    reference = _attainment(results["clairvoyant"])
    assert comparison.search.goal_met
    assert comparison.search.attainment == pytest.approx(reference)
    assert reference >= GOAL
    assert _attainment(results["pinned-1"]) < GOAL <= reference
    assert _attainment(results["queue"]) < GOAL  # slower than the burst: it waits on cold starts


def test_policies_that_match_the_clairvoyant_spend_more_gpu_hours(comparison: Comparison) -> None:
    """Every policy at least as good as the reference on this trace costs more GPU time than it."""
    results = _by_name(comparison)
    reference = results["clairvoyant"]
    at_least_as_good = [
        r for r in comparison.results if r.name != "clairvoyant" and _attainment(r) >= _attainment(reference)
    ]
    assert {r.name for r in at_least_as_good} >= {"pinned-8"}
    for result in at_least_as_good:
        assert result.gpu_seconds > reference.gpu_seconds


def test_the_clairvoyant_never_holds_more_than_the_largest_minute_needs(comparison: Comparison) -> None:
    """The reference's replicas peak at its schedule's maximum and stay within the reference bounds."""
    reference = _by_name(comparison)["clairvoyant"]
    schedule = comparison.search.schedule
    assert reference.peak_replicas <= max(schedule)
    cap = min(BOUNDS[1], CLUSTER.max_replicas_on_gpus)
    assert reference.gpu_seconds <= cap * CLUSTER.gpus_per_replica * reference.horizon_s


def test_the_schedule_covers_each_minute_within_bounds_and_at_least_its_busy_time(
    trace: Trace, comparison: Comparison
) -> None:
    """One count per minute, between the bounds, never below the replicas the minute keeps busy."""
    schedule = np.asarray(comparison.search.schedule)
    busy = busy_per_bucket(trace, CLUSTER)
    assert len(schedule) == len(busy) == 10
    cap = min(BOUNDS[1], CLUSTER.max_replicas_on_gpus)
    assert np.all(schedule >= BOUNDS[0])
    assert np.all(schedule <= cap)
    assert np.all(schedule >= np.clip(np.ceil(busy - 1e-9), BOUNDS[0], cap))
    assert schedule[2:4].min() > schedule[5:].max()  # the burst's minutes need more than the calm


def test_every_run_starts_from_the_reference_need_over_one_cold_start(
    trace: Trace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each policy is replayed from initial_ready: the schedule's largest need within a cold start."""
    calls: list[tuple[str, int]] = []

    def spy(*args: Any, **kwargs: Any) -> RunResult:
        """Record the policy's name and the Ready replicas it starts from, then replay."""
        calls.append((args[2].name, args[4]))
        return real_run(*args, **kwargs)

    monkeypatch.setattr(compare_module, "run", spy)
    result = compare(trace, CLUSTER, START, POLICIES[:2], OBJECTIVE_S, BOUNDS)
    schedule = result.search.schedule
    lead_buckets = int(CLUSTER.cold_start_s // BUCKET_S)
    expected = max(schedule[: lead_buckets + 1])
    assert expected > 1  # the burst begins within the first cold start
    assert initial_ready(result.search, CLUSTER.cold_start_s) == expected
    policy_calls = [c for c in calls if c[0] not in ("clairvoyant", "static at peak")]
    assert policy_calls == [("pinned-1", expected), ("queue", expected)]
    # The static pool starts, and stays, at the clairvoyant's peak.
    assert ("static at peak", max(schedule)) in calls
    assert [c for c in calls if c[0] == "clairvoyant"][-1] == ("clairvoyant", expected)


def _search(schedule: tuple[int, ...]) -> ClairvoyantSearch:
    return ClairvoyantSearch(schedule, 1, 1.0, True)


@pytest.mark.parametrize(
    ("schedule", "lead_s", "expected"),
    [
        ((2, 5, 3, 7, 1), 0.0, 2),
        ((2, 5, 3, 7, 1), 59.0, 2),
        ((2, 5, 3, 7, 1), 60.0, 5),
        ((2, 5, 3, 7, 1), 120.0, 5),
        ((2, 5, 3, 7, 1), 180.0, 7),
        ((4, 1), 600.0, 4),
        ((0, 0), 60.0, 1),
        ((), 60.0, 1),
    ],
    ids=[
        "no-lead",
        "under-a-minute",
        "one-minute",
        "two-minutes",
        "reaches-peak",
        "past-end",
        "zero",
        "empty",
    ],
)
def test_initial_ready_is_the_largest_need_within_the_lead(
    schedule: tuple[int, ...], lead_s: float, expected: int
) -> None:
    """initial_ready takes the most any minute from 0 to ``lead_s`` needs, and at least one replica."""
    assert initial_ready(_search(schedule), lead_s) == expected


def test_busy_time_under_shared_physics_adds_prefill_and_full_batch_decode() -> None:
    """Shared: each minute's prefill plus decode seconds at a full batch, over 60 s."""
    cfg = ClusterConfig(prefill_tokens_per_s=1000.0, decode_slots=10, decode_tokens_per_s_per_seq=10.0)
    # 2000 prompt tokens: 2 s of prefill; 300 output tokens at 100 tokens/s: 3 s; 5 s each.
    trace = Trace(np.array([1.0, 30.0, 150.0]), np.array([2000] * 3), np.array([300] * 3), "hand")
    busy = busy_per_bucket(trace, cfg)
    assert busy.tolist() == pytest.approx([10.0 / 60, 0.0, 5.0 / 60])


def test_busy_time_under_separate_physics_takes_the_tighter_resource() -> None:
    """Separate: the larger of prefill seconds and batch-slot seconds over the slots, per minute."""
    cfg = ClusterConfig(
        prefill_tokens_per_s=1000.0, decode_slots=2, decode_tokens_per_s_per_seq=10.0, physics="separate"
    )
    # Minute 0: 2 s prefill + 299 tokens at 10/s = 31.9 slot-seconds; over 2 slots 15.95 > 2 s prefill.
    # Minute 1: 20 s prefill + 0 decode (one output token) = 20 slot-seconds over 2: 10 < 20 s prefill.
    trace = Trace(np.array([5.0, 70.0]), np.array([2000, 20000]), np.array([300, 1]), "hand")
    busy = busy_per_bucket(trace, cfg)
    assert busy.tolist() == pytest.approx([15.95 / 60, 20.0 / 60])


def test_an_empty_trace_keeps_no_replica_busy() -> None:
    """No requests: one bucket of zero busy time."""
    empty = Trace(np.array([]), np.array([], dtype=np.int64), np.array([], dtype=np.int64), "empty")
    assert busy_per_bucket(empty, CLUSTER).tolist() == [0.0]


def test_a_search_that_cannot_grow_stops_with_the_goal_unmet(trace: Trace, comparison: Comparison) -> None:
    """Capped at one replica, the reference is one replica throughout, misses the goal and stops at once."""
    result, search = clairvoyant(trace, CLUSTER, START, OBJECTIVE_S, 1, 1)
    assert search.schedule == (1,) * 10
    assert search.iterations == 1
    assert not search.goal_met
    assert search.attainment == pytest.approx(_attainment(result))
    # The same single replica as the pinned policy serves the same requests the same way.
    assert search.attainment == pytest.approx(_attainment(_by_name(comparison)["pinned-1"]))


def test_each_search_iteration_adds_at_most_one_replica_per_minute(trace: Trace) -> None:
    """The search starts from ceil(busy) and grows a short minute by one replica per iteration."""
    _, first = clairvoyant(trace, CLUSTER, START, OBJECTIVE_S, *BOUNDS, max_iterations=1)
    _, final = clairvoyant(trace, CLUSTER, START, OBJECTIVE_S, *BOUNDS)
    cap = min(BOUNDS[1], CLUSTER.max_replicas_on_gpus)
    start_need = np.clip(np.ceil(busy_per_bucket(trace, CLUSTER) - 1e-9), BOUNDS[0], cap)
    assert first.iterations == 1
    assert first.schedule == tuple(int(v) for v in start_need)
    assert not first.goal_met  # full utilisation is not enough under a burst
    assert final.iterations > 1
    growth = np.asarray(final.schedule) - start_need
    assert np.all(growth >= 0)
    assert np.all(growth <= final.iterations - 1)
    assert final.goal_met
    assert final.attainment >= GOAL


def test_the_search_stops_at_the_first_schedule_that_meets_the_goal(trace: Trace) -> None:
    """The reference is the first grown schedule meeting the goal: one iteration fewer misses it."""
    _, final = clairvoyant(trace, CLUSTER, START, OBJECTIVE_S, *BOUNDS)
    _, before = clairvoyant(trace, CLUSTER, START, OBJECTIVE_S, *BOUNDS, max_iterations=final.iterations - 1)
    assert final.goal_met
    assert not before.goal_met
    assert before.iterations == final.iterations - 1
    assert sum(before.schedule) < sum(final.schedule)
