"""GPU-hours against the clairvoyant and the static pool at its peak, and the hours the user's own floor
and pre-warm windows held (scaler/replay/held.py, scaler/replay/report.py)."""

from __future__ import annotations

import dataclasses
from datetime import datetime

import numpy as np
import pytest

from scaler.model import Signal
from scaler.replay.compare import STATIC, compare
from scaler.replay.held import FLOOR_ABOVE_KEY, FLOOR_KEY, PREWARM_KEY, HeldLog, held_gpu_seconds
from scaler.replay.keda import PodSeries
from scaler.replay.policies import KedaPolicy
from scaler.replay.replay import RunResult
from scaler.replay.report import all_figures, own_lines, scale_lines, table
from tests.helpers import WEEKDAY_CRON
from tests.test_compare import BOUNDS, CLUSTER, OBJECTIVE_S, _queue_so, _trace
from tests.test_replay_policies import so, tick

MONDAY_10 = datetime.fromisoformat("2026-12-07T10:00:00+08:00")  # inside WEEKDAY_CRON's window
MONDAY_13 = datetime.fromisoformat("2026-12-07T13:00:00+08:00")  # outside it
# The synthetic trace from 08:55 Shanghai: its first five minutes before WEEKDAY_CRON's window opens at 09:00.
CALM = (0.3, 0.3, 1.2, 1.2, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3)  # requests/s a minute: a small rise
TRACE_START = datetime.fromisoformat("2026-12-07T08:55:00+08:00")


def _result(ticks_t: list[float], gpus: list[int], horizon_s: float) -> RunResult:
    """A run of ``ticks_t`` with ``gpus`` bound after each tick (only what the split reads)."""
    empty = np.zeros(0)
    return RunResult(
        "r",
        empty,
        empty,
        horizon_s,
        float(np.sum(np.diff(np.append(ticks_t, horizon_s)) * np.asarray(gpus))),
        0.0,
        0,
        max(gpus),
        0.0,
        np.asarray(ticks_t, dtype=np.float64),
        np.asarray(gpus, dtype=np.int64),
        np.asarray(gpus, dtype=np.int64),
        np.zeros(len(gpus), dtype=np.int64),
        np.asarray(gpus, dtype=np.int64),
    )


def test_the_docstring_s_worked_example() -> None:
    """6 replicas bound, demand 2, floor 3, a window 6, 2 GPUs each, a 5 s tick: 10 and 30 GPU-seconds;
    10 of the floor's above a clairvoyant's floor of 2, none above one of 3."""
    log = HeldLog()
    log.record(0.0, 2, 3, 6)
    held = held_gpu_seconds(log, _result([0.0], [12], 5.0), gpus_per_replica=2, reference_floor=2)
    assert held == {FLOOR_KEY: 10.0, PREWARM_KEY: 30.0, FLOOR_ABOVE_KEY: 10.0}
    same = held_gpu_seconds(log, _result([0.0], [12], 5.0), gpus_per_replica=2, reference_floor=3)
    assert same[FLOOR_ABOVE_KEY] == 0.0


def test_replicas_the_demand_asked_for_or_the_hpa_kept_after_a_window_are_not_counted() -> None:
    """The asks in force at a tick are the last recorded; replicas within the demand's ask, or held
    after the window stopped asking, count for neither; fewer bound than asked counts what is bound."""
    log = HeldLog()
    log.record(-30.0, 5, 2, 0)  # during the warm-up: the demand asks 5, nothing is the user's
    log.record(10.0, 2, 2, 6)  # a window opens: it asks 6, the demand 2
    log.record(20.0, 2, 2, 0)  # it closes; the HPA keeps 6 a while
    result = _result([0.0, 5.0, 10.0, 15.0, 20.0, 25.0], [5, 5, 4, 6, 6, 6], 30.0)
    held = held_gpu_seconds(log, result, gpus_per_replica=1)
    assert held[FLOOR_KEY] == 0.0
    assert held[PREWARM_KEY] == (2 + 4) * 5.0  # 4 and 6 bound over a demand of 2, then nothing


def test_keda_s_asks_split_a_cron_window_from_its_other_triggers() -> None:
    """Inside a cron window the window asks its desiredReplicas and the queue trigger the demand;
    outside it the window asks no more than one."""
    queue = {"type": "prometheus", "metadata": {"query": "sum(vllm:num_requests_waiting)", "threshold": "10"}}
    inside = KedaPolicy("k", so(queue, WEEKDAY_CRON))
    inside.tick(tick(MONDAY_10, pods=PodSeries([20, 10], [5, 5], 0.5, 2, 1, 60)))
    assert inside.asks(2) == (3, 2, 8)  # ceil(30 / 10), minReplicaCount, desiredReplicas
    assert inside.held_log.demand == [3]
    outside = KedaPolicy("k", so(queue, WEEKDAY_CRON))
    outside.tick(tick(MONDAY_13, pods=PodSeries([20, 10], [5, 5], 0.5, 2, 1, 60)))
    assert outside.asks(2) == (3, 2, 1)


def test_this_scaler_s_asks_are_its_demand_signals_floor_and_prewarm() -> None:
    """This scaler's metric is split by its decision's proposals: queue/load/last_known, floor, prewarm."""
    external = {
        "type": "external",
        "metadata": {
            "minReplicas": "3",
            "maxReplicas": "16",
            "targetQueuePerReplica": "10",
            "prewarmStart": "0 9 * * 1-5",
            "prewarmEnd": "0 12 * * 1-5",
            "prewarmReplicas": "7",
            "timezone": "Asia/Shanghai",
        },
    }
    policy = KedaPolicy("s", so(external))
    policy.tick(tick(MONDAY_10, waiting=40))
    assert policy.latest is not None
    asked = policy.latest.proposals
    # One refresh measures no capacity (the load abstains): the demand is the queue's 4.
    assert (policy.latest.replicas, asked[Signal.QUEUE], asked.get(Signal.LOAD)) == (7, 4, None)
    assert policy.asks(2) == (4, 3, 7)  # the demand signals' largest, minReplicas 3, the window's 7
    policy.tick(tick(MONDAY_10, now_s=15.0, waiting=40, ttft_buckets={0.1: 0.0, 0.5: 1.0}))
    demand = max(
        v for k, v in policy.latest.proposals.items() if k in (Signal.QUEUE, Signal.LOAD, Signal.LAST_KNOWN)
    )
    assert policy.asks(2)[0] == demand


@pytest.fixture(scope="module")
def figures() -> dict[str, object]:
    """A queue policy with WEEKDAY_CRON's window over part of a calm synthetic trace, one without, the
    clairvoyant and the static pool, as figures."""
    windowed = _queue_so("windowed", 1, 8)
    windowed = dataclasses.replace(windowed, triggers=(*windowed.triggers, *so(WEEKDAY_CRON).triggers))
    comparison = compare(
        _trace(CALM),
        CLUSTER,
        TRACE_START,
        [
            ("queue", _queue_so("queue", 1, 8)),
            ("windowed", windowed),
            ("floor 3", _queue_so("floor 3", 3, 8)),
        ],
        OBJECTIVE_S,
        BOUNDS,
    )
    assert comparison.static is not None
    return {
        "comparison": comparison,
        "rows": {f.policy: f for f in all_figures(comparison.runs, OBJECTIVE_S)},
    }


def test_the_static_pool_holds_the_clairvoyant_s_peak_for_the_whole_span(figures: dict[str, object]) -> None:
    """Static at peak: the clairvoyant's largest per-minute count Ready throughout, GPU-hours = peak x
    GPUs x span; every row's GPU-hours are divided by it too."""
    comparison = figures["comparison"]
    rows = figures["rows"]
    assert isinstance(rows, dict)
    search = comparison.search  # type: ignore[attr-defined]
    static = comparison.static  # type: ignore[attr-defined]
    assert search.peak == max(search.schedule) > 1
    assert set(static.tick_ready.tolist()) == {search.peak}
    hours = static.horizon_s / 3600
    assert rows[STATIC].gpu_hours == pytest.approx(search.peak * CLUSTER.gpus_per_replica * hours)
    assert rows[STATIC].vs_static == pytest.approx(1.0)
    for f in rows.values():
        assert f.vs_static == pytest.approx(f.gpu_hours / rows[STATIC].gpu_hours)
    assert rows["clairvoyant"].vs_static < 1.0  # it follows the demand below its peak
    assert "vs static" in table(list(rows.values()), OBJECTIVE_S)


def test_a_cron_window_s_hours_are_split_out_and_the_ratio_given_without_them(
    figures: dict[str, object],
) -> None:
    """The windowed policy's window hours are counted (the other's are none); without them its ratio is
    lower, and the lines say both."""
    rows = figures["rows"]
    assert isinstance(rows, dict)
    windowed, plain, cv = rows["windowed"], rows["queue"], rows["clairvoyant"]
    assert plain.prewarm_gpu_hours == 0.0
    # The window asks 8 replicas of 2 GPUs from 09:00, the trace's sixth minute: most of its
    # 8 x 2 x 5 / 60 = 1.33 GPU-hours over the demand are the window's.
    assert 0.5 < windowed.prewarm_gpu_hours <= 8 * 2 * 5 / 60
    assert windowed.gpu_hours > plain.gpu_hours
    assert windowed.floor_above_gpu_hours == 0.0  # the same minReplicas as the clairvoyant's
    expected = (windowed.gpu_hours - windowed.prewarm_gpu_hours) / cv.gpu_hours
    assert windowed.vs_clairvoyant_without_own == pytest.approx(expected)
    assert windowed.vs_clairvoyant_without_own < windowed.vs_clairvoyant
    lines = own_lines(list(rows.values()))
    said = next(line for line in lines if line.lstrip().startswith("windowed"))
    assert f"{windowed.prewarm_gpu_hours:,.2f} held for pre-warm windows" in said
    assert f"without them {windowed.vs_clairvoyant_without_own:.2f}x" in said
    assert any(line.lstrip().startswith("clairvoyant") and "no windows; its floor" in line for line in lines)


def test_a_floor_above_the_clairvoyant_s_is_the_policy_s_own(figures: dict[str, object]) -> None:
    """minReplicaCount 3 against the clairvoyant's 1: the replicas it holds above what the demand and
    the clairvoyant's floor ask are counted apart and left out of the ratio without."""
    rows = figures["rows"]
    assert isinstance(rows, dict)
    high, cv = rows["floor 3"], rows["clairvoyant"]
    assert 0 < high.floor_above_gpu_hours <= high.floor_gpu_hours
    assert high.floor_above_gpu_hours <= 2 * CLUSTER.gpus_per_replica * high.hours  # at most 2 above 1
    assert high.vs_clairvoyant_without_own == pytest.approx(
        (high.gpu_hours - high.floor_above_gpu_hours) / cv.gpu_hours
    )
    said = next(line for line in own_lines(list(rows.values())) if line.lstrip().startswith("floor 3"))
    assert f"{high.floor_above_gpu_hours:,.2f} of it above the clairvoyant's" in said


def test_many_scale_changes_for_a_long_cold_start_are_said(figures: dict[str, object]) -> None:
    """Scale changes per hour beside the clairvoyant's; more than twice its rate, at least one an hour,
    with a cold start of two minutes or more gets a note; a shorter cold start, or a few a day, none."""
    rows = figures["rows"]
    assert isinstance(rows, dict)
    cv = rows["clairvoyant"]
    busy = dataclasses.replace(cv, policy="busy", scale_events=3 * max(1, cv.scale_events))
    listed = [*rows.values(), busy]
    long_lines = scale_lines(listed, 300.0)
    assert long_lines[0].startswith(f"scale changes over {cv.hours:,.1f} h: ")
    assert f"busy {busy.scale_events:,} ({busy.scale_events_per_hour:.2f}/h)" in long_lines[0]
    assert any(line.startswith("note: busy changed scale 3.0x as often") for line in long_lines)
    assert not any(line.startswith("note: busy") for line in scale_lines(listed, 60.0))
    week = [dataclasses.replace(f, hours=168.0) for f in listed]  # the same changes over a week
    assert not any(line.startswith("note: busy") for line in scale_lines(week, 300.0))
