"""The replay checked against the fleet as it ran (scaler.replay.ownfleet, issue 36 item 1).

A "history" is made by replaying a trace with a known replica and a known number of replicas per
minute: what it measured is that replay's share within the objective, TTFT mean and served
requests. Replayed through the same replica, the fleet as it ran gives those figures again; through
a replica that decodes a third as fast, the check is off by far more than a point and says so
first, naming the replica's figure that was the default.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from scaler.replay import ownfleet
from scaler.replay.fleet.cluster import ClusterConfig
from scaler.replay.history import Measured
from scaler.replay.policies import TickInputs
from scaler.replay.replay import run
from scaler.replay.trace import RateTrace, Trace

START = datetime(2026, 12, 7, tzinfo=UTC)
TRUE = ClusterConfig(
    prefill_tokens_per_s=3000.0,
    decode_slots=8,
    decode_tokens_per_s_per_seq=14.0,
    cold_start_s=60.0,
    gpus_free=32,
)
# Ready replicas per minute: 5, then 16 through the burst (minutes 12-20), then 5 again.
PODS = (5.0,) * 12 + (16.0,) * 8 + (5.0,) * 20
OBJECTIVE_S = 2.0


def _trace(minutes: int = 40, seed: int = 3) -> Trace:
    """Poisson arrivals at 1.5 requests/s, 6/s from minute 12 to 20."""
    rng = np.random.default_rng(seed)
    times, t = [], 0.0
    while True:
        t += rng.exponential(1 / (6.0 if 720 <= t < 1200 else 1.5))
        if t >= minutes * 60:
            break
        times.append(t)
    n = len(times)
    return Trace(np.asarray(times), rng.integers(200, 2000, n), rng.integers(1, 400, n), "burst.csv")


def _history(trace: Trace, gaps: tuple[tuple[float, float], ...] = ()) -> Measured:
    """What a history measured of ``trace`` served by ``TRUE`` with ``PODS`` Ready replicas a minute."""
    policy = ownfleet.AsRanPolicy(PODS, 60.0, TRUE.cold_start_s, 16)
    result = run(trace, TRUE, policy, START, policy.pods[0])
    seen = np.ones(len(trace), dtype=bool)
    for begin, length in gaps:
        seen &= ~((result.arrivals >= begin) & (result.arrivals < begin + length))
    ttft = result.ttft[seen]
    minutes = np.arange(len(PODS), dtype=np.float64)
    return Measured(
        rates=RateTrace(minutes * 60, np.ones(len(PODS)), 60.0, "history"),
        start=START,
        served=float(np.count_nonzero(result.arrivals[seen] + ttft <= result.horizon_s)),
        arrivals=float(len(trace)),
        objective_s=OBJECTIVE_S,
        within_objective=float(np.mean(ttft <= OBJECTIVE_S)),
        ttft_mean_s=float(ttft.mean()),
        replica_seconds=float(sum(PODS) * 60),
        peak_pods=int(max(PODS)),
        gaps=gaps,
        limits=(),
        pods=PODS,
    )


def _tick(now_s: float) -> TickInputs:
    return TickInputs.seen(now_s, START, 0, 0, None, None)  # type: ignore[arg-type]


def test_a_replica_is_ordered_one_cold_start_before_its_window_and_removed_after_it() -> None:
    """Replicas the history held are Ready by their window; none is removed while it or the next
    cold start's window holds it."""
    policy = ownfleet.AsRanPolicy((2, 2, 5, 5, 3), 60.0, 120.0, 4)
    assert [policy.tick(_tick(t)) for t in (-300, 0, 59, 179, 180, 240, 299, 900)] == [2, 5, 5, 5, 5, 3, 3, 3]
    assert policy.max_replicas == 5  # the history's peak, above the ScaledObject's maximum


def test_the_fleet_replayed_through_its_own_replica_matches_what_it_measured() -> None:
    """The same replica, the same replicas per minute: the measured figures again, within a point."""
    trace = _trace()
    measured = _history(trace)
    own = ownfleet.check(measured, trace, TRUE, START, OBJECTIVE_S, ["GPUs per replica"], 16)
    assert own is not None
    assert own.replayed_within == measured.within_objective
    assert own.replayed_mean_s == measured.ttft_mean_s
    assert own.replayed_served == measured.served
    assert own.off_by == 0.0
    assert not own.off
    lines = own.lines()
    assert lines[0].startswith("own fleet: the replicas the history holds replayed through the replica model")
    assert lines[0].endswith("within 1 point (+0.00)")
    assert 0.5 < own.replayed_within < 1.0  # some first tokens are late: the check has something to match


def test_a_wrong_replica_is_said_first_with_the_default_that_explains_it() -> None:
    """A replica decoding a third as fast: off by far more than a point, said first, the cause named."""
    trace = _trace()
    measured = _history(trace)
    slow = TRUE.with_overrides(decode_tokens_per_s_per_seq=TRUE.decode_tokens_per_s_per_seq / 3)
    own = ownfleet.check(measured, trace, slow, START, OBJECTIVE_S, ["decode", "GPUs per replica"], 16)
    assert own is not None
    assert own.off
    assert own.off_by is not None
    assert own.off_by < -10
    first = own.lines()[0]
    assert first.startswith("WARNING: the replica model does not reproduce your fleet: replayed as it ran,")
    assert "the replica's decode is the cluster model's default, not measured from your fleet" in first
    assert "GPUs per replica" not in first  # it sets the cost, not the latency
    assert f"Every row marked{ownfleet.MARK} is computed from this model" in first
    assert own.to_json()["off"] is True


def test_the_requests_in_the_history_s_gaps_are_left_out_of_both_sides() -> None:
    """The measured count has no first token from a gap; the replayed one leaves the gap's out too."""
    trace = _trace()
    gaps = ((600.0, 300.0),)
    measured = _history(trace, gaps)
    own = ownfleet.check(measured, trace, TRUE, START, OBJECTIVE_S, [], 16)
    assert own is not None
    in_gap = int(np.count_nonzero((trace.arrivals >= 600) & (trace.arrivals < 900)))
    assert in_gap > 300
    assert own.replayed_served == measured.served <= len(trace) - in_gap
    assert not own.off


def test_without_pods_reporting_there_is_nothing_to_check() -> None:
    """No pods reporting in the history: no fleet as it ran to replay."""
    trace = _trace(minutes=5)
    measured = _history(trace)
    bare = Measured(**{**measured.__dict__, "pods": None})
    assert ownfleet.check(bare, trace, TRUE, START, OBJECTIVE_S, [], 16) is None
