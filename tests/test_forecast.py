"""The forecaster: follows ramps, holds a cold start's peak, and takes its margin from its own errors."""

from __future__ import annotations

import math
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.decider.forecast import Forecaster, _TimedWindow
from scaler.decider.params import DeciderParams

LEAD = 180.0


def feed(f: Forecaster, values: list[float], start: float = 0.0, step: float = 15.0) -> float:
    """Feed ``values`` every ``step`` seconds from ``start``; returns the time after the last."""
    t = start
    for v in values:
        f.update(t, v, LEAD)
        t += step
    return t


def test_constant_series_converges_with_no_trend_and_no_margin() -> None:
    """A constant series forecasts its level, no trend, and, never missed, no margin."""
    f = Forecaster()
    feed(f, [100.0] * 200)
    fc = f.forecast(0.995)
    assert fc is not None
    assert fc.level == pytest.approx(100.0)
    assert fc.trend == pytest.approx(0.0, abs=1e-6)
    assert fc.margin == 0.0
    assert fc.planned == pytest.approx(100.0)
    assert fc.checks > 100


def test_ramp_is_followed_one_lead_ahead() -> None:
    """On a steady ramp the trend is the slope and the plan is within 10% of the value a lead later."""
    f = Forecaster()
    feed(f, [i * 15.0 for i in range(120)])  # +1 unit per second
    fc = f.forecast(0.995)
    assert fc is not None
    assert fc.trend == pytest.approx(1.0, rel=0.05)
    assert fc.planned == pytest.approx(119 * 15.0 + LEAD, rel=0.1)


def test_a_dip_shorter_than_a_lead_releases_nothing() -> None:
    """The plan holds the largest peak of the last lead: a 90 s dip does not lower it."""
    f = Forecaster()
    t = feed(f, [100.0] * 60)
    t = feed(f, [40.0] * 6, start=t)  # 90 s at 40
    fc = f.forecast(0.995)
    assert fc is not None
    assert fc.level < 70.0
    assert fc.planned == pytest.approx(100.0, rel=0.02)
    assert fc.held_s > 0
    feed(f, [40.0] * 20, start=t)  # five more minutes: the old peak has left the lead
    later = f.forecast(0.995)
    assert later is not None
    assert later.planned < 45.0


def test_margin_is_the_conformal_quantile_of_past_errors() -> None:
    """Errors are actual over planned minus one; the margin is their ceil((n+1)q)-th smallest."""
    f = Forecaster()
    t = feed(f, [100.0] * 80)
    # one sample at 130 (a miss of +30%, checked against the plan made a lead before it)
    f.update(t, 130.0, LEAD)
    t = feed(f, [100.0] * 5, start=t + 15)
    fc = f.forecast(0.995)
    assert fc is not None
    assert fc.errors[0] == pytest.approx(0.30, abs=0.01)
    assert fc.margin == pytest.approx(0.30, abs=0.01)  # with this few checks, the largest
    assert all(e >= 0 for e in fc.errors)  # a plan the demand fell short of counts as no miss
    assert f.forecast(0.5) is not None
    assert f.forecast(0.5).margin == 0.0  # type: ignore[union-attr]


def test_a_miss_counts_against_the_larger_of_its_plan_and_the_floor() -> None:
    """A surge from near idle is a miss against what the floor holds, not a ratio to a tiny plan;
    a surge above the floor keeps its full ratio, however large."""
    f = Forecaster()
    t = feed(f, [2.0] * 80)
    f.update(t, 20.0, LEAD)  # 2 planned, 20 came: 9 times the plan
    feed(f, [2.0] * 5, start=t + 15)
    assert f.forecast(0.995).errors[0] == pytest.approx(9.0, rel=0.01)  # type: ignore[union-attr]
    against_floor = f.forecast(0.995, floor=48.0)  # two replicas of 24 slots are always there
    assert against_floor is not None
    assert against_floor.errors[0] == pytest.approx(18.0 / 48.0, rel=0.01)
    assert against_floor.margin == pytest.approx(18.0 / 48.0, rel=0.01)
    burst = Forecaster()
    t = feed(burst, [52.0] * 80)
    burst.update(t, 250.0, LEAD)  # a burst of nearly five times the plan, above the floor
    feed(burst, [52.0] * 5, start=t + 15)
    assert burst.forecast(0.995, floor=48.0).errors[0] == pytest.approx(198 / 52, rel=0.01)  # type: ignore[union-attr]


def test_margin_widens_after_misses_and_narrows_after_calm() -> None:
    """Misses raise the margin; an error window of calm later, they have expired and it is near 0."""
    params = DeciderParams(error_window_s=1800.0)
    f = Forecaster(params)
    t = feed(f, [100.0] * 40)
    for _ in range(10):  # a jumpy quarter of an hour: +40% every other minute
        t = feed(f, [140.0, 100.0, 100.0, 100.0], start=t)
    widened = f.forecast(0.99)
    assert widened is not None
    assert widened.margin > 0.2
    feed(f, [100.0] * 140, start=t)  # 35 calm minutes: longer than the error window
    calm = f.forecast(0.99)
    assert calm is not None
    assert calm.margin < 0.01


def test_first_two_level_time_constants_are_not_scored() -> None:
    """While the level still remembers its first value, its forecasts are not checked."""
    f = Forecaster()
    feed(f, [0.0] + [100.0] * 7)  # 105 s: under two 60 s time constants
    feed(f, [100.0] * 12, start=120.0)
    fc = f.forecast(0.995)
    assert fc is not None
    assert fc.margin == 0.0  # the plans made from the first sample's 0 were never checked


def test_out_of_order_and_repeated_samples_are_ignored() -> None:
    """A sample at or before the last one's time leaves the state unchanged."""
    f = Forecaster()
    f.update(100.0, 5.0, LEAD)
    before = (f.forecast(0.99), f.last_t)
    f.update(100.0, 50.0, LEAD)
    f.update(50.0, 50.0, LEAD)
    assert (f.forecast(0.99), f.last_t) == before


def test_rejects_nan_and_negative() -> None:
    """NaN, infinite and negative values raise ValueError."""
    f = Forecaster()
    for bad in (math.nan, math.inf, -1.0):
        with pytest.raises(ValueError, match="finite values >= 0"):
            f.update(1.0, bad, LEAD)


def test_gap_in_data_does_not_score_stale_checks() -> None:
    """A check whose time passed during a gap in the data is dropped, not scored."""
    f = Forecaster()
    feed(f, [1.0] * 20)
    f.update(10_000.0, 1000.0, LEAD)  # hours later
    assert f.checks == 0 or max(v for _, v in f._errors) < 1.0


@settings(max_examples=300, deadline=None)
@given(
    ops=st.lists(
        st.one_of(
            st.tuples(st.just("append"), st.floats(0, 100), st.floats(-1e6, 1e6)),
            st.tuples(st.just("expire"), st.floats(0, 100), st.just(0.0)),
        ),
        max_size=300,
    )
)
def test_timed_window_behaves_like_a_deque_of_pairs(ops: list[tuple[str, float, float]]) -> None:
    """The timed window appends and expires exactly as a deque of (time, value) pairs."""
    window, reference = _TimedWindow(), deque[tuple[float, float]]()
    t = 0.0
    for op, step, value in ops:
        if op == "append":
            t += step
            window.append(t, value)
            reference.append((t, value))
        else:
            cutoff = t - step
            expected = []
            while reference and reference[0][0] < cutoff:
                expected.append(reference.popleft()[1])
            assert window.expire_before(cutoff) == expected
        assert len(window) == len(reference)
        assert list(window) == list(reference)
