"""The forecaster: follows ramps, keeps bursts, learns its margin from its own misses."""

from __future__ import annotations

import math
import random
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.forecast import ForecastParams, SeriesForecaster, _TimedWindow


def test_constant_series_converges_with_no_trend() -> None:
    """A constant series forecasts its level, no trend and no margin, at any horizon."""
    f = SeriesForecaster(horizon_s=180)
    for i in range(200):
        f.update(i * 15.0, 100.0)
    fc = f.forecast()
    assert fc is not None
    assert fc.level == pytest.approx(100.0)
    assert fc.trend == pytest.approx(0.0, abs=1e-6)
    assert fc.margin == pytest.approx(0.0, abs=1e-6)  # never missed, so no margin
    assert fc.at(180) == pytest.approx(100.0)


def test_ramp_is_followed_one_horizon_ahead() -> None:
    """On a steady ramp the trend is the slope and the +180 s point is within 10% of the truth."""
    f = SeriesForecaster(
        horizon_s=180, params=ForecastParams(margin_multiplier=0.0, initial_margin_fraction=0.0)
    )
    for i in range(120):  # +1 unit per second, sampled every 15 s for 30 minutes
        f.update(i * 15.0, i * 15.0)
    fc = f.forecast()
    assert fc is not None
    t_last = 119 * 15.0
    assert fc.trend == pytest.approx(1.0, rel=0.05)
    # the point forecast at +180 s is within 10% of the true future value
    assert fc.point(180) == pytest.approx(t_last + 180, rel=0.1)


def test_moving_average_would_lag_where_trend_does_not() -> None:
    """On a ramp the forecast's error is under a quarter of a 5-minute moving average's."""
    f = SeriesForecaster(
        horizon_s=300, params=ForecastParams(margin_multiplier=0.0, initial_margin_fraction=0.0)
    )
    values = [i * 15.0 * 2 for i in range(80)]
    for i, v in enumerate(values):
        f.update(i * 15.0, v)
    fc = f.forecast()
    assert fc is not None
    truth = (79 * 15 + 300) * 2
    window_mean = sum(values[-20:]) / 20  # a 5-minute moving average
    assert abs(fc.point(300) - truth) < abs(window_mean - truth) / 4


def test_burst_is_held_by_the_peak_guard() -> None:
    """A one-sample burst holds the forecast at its peak, released once the guard's window passes."""
    f = SeriesForecaster(horizon_s=180)
    for i in range(100):
        f.update(i * 15.0, 10.0)
    f.update(1500.0, 100.0)  # one sample of a 10x burst
    fc = f.forecast()
    assert fc is not None
    assert fc.at(0) >= 100.0
    assert fc.at(180) >= 100.0
    for i in range(1, 10):  # burst gone: the guard releases after its window
        f.update(1500.0 + i * 15.0, 10.0)
    fc = f.forecast()
    assert fc is not None
    assert fc.peak == 10.0


def test_margin_grows_with_under_forecasts_and_is_conservative_at_start() -> None:
    """The margin starts at the initial fraction of the level and grows with noise to k x semi-RMS."""
    params = ForecastParams()
    f = SeriesForecaster(horizon_s=60, params=params)
    f.update(0.0, 100.0)
    fc = f.forecast()
    assert fc is not None
    assert fc.margin == pytest.approx(params.initial_margin_fraction * 100.0)

    rng = random.Random(7)
    quiet = SeriesForecaster(horizon_s=60, params=params)
    noisy = SeriesForecaster(horizon_s=60, params=params)
    for i in range(400):
        quiet.update(i * 15.0, 100.0 + rng.gauss(0, 1))
        noisy.update(i * 15.0, 100.0 + rng.gauss(0, 20))
    q, n = quiet.forecast(), noisy.forecast()
    assert q is not None
    assert n is not None
    assert quiet.samples_checked > params.min_error_checks
    assert n.margin > 5 * q.margin
    # relative errors of N(0, 20%) have a semi-RMS of about 0.2/sqrt(2); the margin is the
    # multiplier times that, times the level of 100, give or take
    expected = params.margin_multiplier * 0.2 / math.sqrt(2) * 100.0
    assert 0.5 * expected < n.margin < 1.5 * expected


def test_out_of_order_and_repeated_samples_are_ignored() -> None:
    """A sample at or before the last one's time leaves the forecaster's state unchanged."""
    f = SeriesForecaster(horizon_s=60)
    f.update(100.0, 5.0)
    before = (f.forecast(), f.last_t, f.last_value)
    f.update(100.0, 50.0)
    f.update(50.0, 50.0)
    assert (f.forecast(), f.last_t, f.last_value) == before


def test_rejects_nan_and_negative() -> None:
    """NaN, infinite and negative values raise ValueError."""
    f = SeriesForecaster(horizon_s=60)
    for bad in (math.nan, math.inf, -1.0):
        with pytest.raises(ValueError, match="finite values >= 0"):
            f.update(1.0, bad)


def test_gap_in_data_does_not_score_stale_checks() -> None:
    """A check whose time passed during a gap in the data is dropped, not scored."""
    f = SeriesForecaster(horizon_s=60)
    f.update(0.0, 1.0)
    f.update(10_000.0, 1000.0)  # hours later: the check due at t=60 is dropped, not scored
    assert f.samples_checked == 0


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
