"""Trend-aware forecaster for a rate series sampled at irregular times.

Holt's linear smoothing in continuous time (level and trend with time constants,
so a missed refresh does not change the model), plus two guards:

* an uncertainty margin learned from the forecaster's own misses: every forecast
  made for ``t + horizon`` (the larger of the level and the trend's value there: what
  the scaler sizes for, before the margin) is checked when that time comes, as a miss relative to
  what was forecast, ``(actual - forecast) / forecast`` (at most ``max_relative_miss``, 4:
  a surge to five times the forecast or more counts as 400%, so one surge from near idle
  cannot dominate the hour). The margin is ``margin_multiplier`` times the root
  mean square of the relative under-forecasts (over-forecasts count as zero) in the
  last ``error_window_s``, times the level, so it shrinks with the load instead of
  carrying a burst's absolute misses into a lull. Until ``min_error_checks`` checks
  exist it is ``initial_margin_fraction`` of the level: a new series starts
  conservatively and earns its way down. Forecasts made in the series' first
  ``warmup_s`` are not scored: rate windows that are still filling make a ramp that
  is not in the traffic; nor are forecasts made while the fleet is saturated (its rates
  are then what it could serve, not what was asked, and the catch-up that follows would
  count as misses for an hour);
* a recent-peak guard: the forecast never falls below the largest value seen in
  the last ``peak_window_s``, so a burst is not smoothed away while it is happening.

Why this shape: replays of real traces showed that the margin, not the smoother,
decides whether a latency objective is met; a plain moving average lags ramps by
half its window, while the trend term follows a ramp one cold start ahead.
"""

from __future__ import annotations

import math
from array import array
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ForecastParams:
    """Time constants and margin settings of the forecaster (module docstring)."""

    level_time_constant_s: float = 60.0
    trend_time_constant_s: float = 300.0
    error_window_s: float = 3600.0
    margin_multiplier: float = 4.0  # 4 semi-RMS = 2.8 sigma: 99.7% one-sided cover of a Gaussian miss
    min_error_checks: int = 8
    initial_margin_fraction: float = 0.3
    peak_window_s: float = 60.0
    warmup_s: float = 120.0  # the rate window (60 s) and one level time constant
    max_relative_miss: float = 4.0  # a surge to 5x the forecast or more counts as 400%


@dataclass(frozen=True, slots=True)
class Forecast:
    """A forecast of one series, read at any horizon with ``at``."""

    level: float
    trend: float  # units per second
    margin: float
    peak: float
    last_value: float

    def point(self, horizon_s: float) -> float:
        """Level plus trend ``horizon_s`` seconds ahead, at least 0, without margin or peak guard."""
        return max(0.0, self.level + self.trend * horizon_s)

    def at(self, horizon_s: float, margin_scale: float = 1.0) -> float:
        """Point forecast plus (scaled) margin, never below the recent peak."""
        return max(self.point(horizon_s) + margin_scale * self.margin, self.peak)

    def max_over(self, horizon_s: float, margin_scale: float = 1.0) -> float:
        """The largest value forecast anywhere in [0, horizon]: linear, so an end point."""
        return max(self.at(0.0, margin_scale), self.at(horizon_s, margin_scale))


class _TimedWindow:
    """Time-ordered ``(t, value)`` pairs, appended at the end and expired from the front.

    A ring of two flat arrays of doubles rather than a deque of tuples: the error window
    holds up to an hour of checks per series, two series per ScaledObject, and for a
    thousand ScaledObjects the tuples took 44 MB; the ring takes 8 MB.
    """

    __slots__ = ("_head", "_size", "_t", "_v")

    def __init__(self, pairs: Iterable[tuple[float, float]] = ()) -> None:
        self._t = array("d", bytes(8 * 8))
        self._v = array("d", bytes(8 * 8))
        self._head = 0
        self._size = 0
        for t, v in pairs:
            self.append(float(t), float(v))

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[tuple[float, float]]:
        cap = len(self._t)
        for i in range(self._head, self._head + self._size):
            yield self._t[i % cap], self._v[i % cap]

    def append(self, t: float, value: float) -> None:
        cap = len(self._t)
        if self._size == cap:
            pairs = list(self)
            self._t = array("d", bytes(16 * cap))
            self._v = array("d", bytes(16 * cap))
            for i, (pt, pv) in enumerate(pairs):
                self._t[i] = pt
                self._v[i] = pv
            self._head, cap = 0, 2 * cap
        end = (self._head + self._size) % cap
        self._t[end] = t
        self._v[end] = value
        self._size += 1

    def expire_before(self, cutoff: float) -> list[float]:
        """Drop the pairs older than ``cutoff`` and return their values, oldest first."""
        cap = len(self._t)
        dropped = []
        while self._size and self._t[self._head] < cutoff:
            dropped.append(self._v[self._head])
            self._head = (self._head + 1) % cap
            self._size -= 1
        return dropped


class SeriesForecaster:
    """Mutable per-series state. Deterministic: equal updates in equal order give equal forecasts."""

    def __init__(self, horizon_s: float, params: ForecastParams | None = None) -> None:
        self.params = params or ForecastParams()
        self.horizon_s = horizon_s
        self.level: float | None = None
        self.trend = 0.0
        self.last_t: float | None = None
        self.last_value = 0.0
        self._peaks: deque[tuple[float, float]] = deque()
        self._checks: deque[tuple[float, float]] = deque()  # (due time, forecast) awaiting the actual
        self._errors = _TimedWindow()  # (time, (actual - forecast) / forecast, at most 1)
        self._under_sq = 0.0  # running sum of squared relative under-forecasts in _errors
        self.first_t: float | None = None

    @property
    def samples_checked(self) -> int:
        """Forecasts scored against the actual value, within the error window."""
        return len(self._errors)

    def update(self, t: float, value: float, demand: bool = True) -> None:
        """Feed one sample. ``demand=False``: the value is what a saturated fleet could serve,
        not what was asked, so a forecast made from it is not checked against what follows."""
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"forecaster needs finite values >= 0, got {value!r}")
        if self.last_t is not None and t <= self.last_t:
            return  # out of order or repeated: ignore, never rewrite history
        self._check_due(t, value)
        if self.first_t is None:
            self.first_t = t
        if self.level is None or self.last_t is None:
            self.level = value
        else:
            dt = t - self.last_t
            alpha = 1.0 - math.exp(-dt / self.params.level_time_constant_s)
            beta = 1.0 - math.exp(-dt / self.params.trend_time_constant_s)
            predicted = self.level + self.trend * dt
            new_level = predicted + alpha * (value - predicted)
            self.trend += beta * ((new_level - self.level) / dt - self.trend)
            self.level = max(0.0, new_level)
        self.last_t = t
        self.last_value = value
        self._peaks.append((t, value))
        while self._peaks and self._peaks[0][0] < t - self.params.peak_window_s:
            self._peaks.popleft()
        if t - self.first_t >= self.params.warmup_s and demand:
            # Checked is what the scaler sizes for, before the margin: the largest point
            # forecast over the horizon (the hold keeps the level while the trend points down).
            assert self.level is not None
            self._checks.append((t + self.horizon_s, max(self.level, self._point(self.horizon_s))))

    def _point(self, horizon_s: float) -> float:
        assert self.level is not None
        return max(0.0, self.level + self.trend * horizon_s)

    def _check_due(self, t: float, actual: float) -> None:
        # A check is scored against the first sample at or after its due time; after a
        # gap in the data (more than a quarter horizon late) it is dropped, not scored.
        tolerance = max(30.0, 0.25 * self.horizon_s)
        while self._checks and self._checks[0][0] <= t:
            due, predicted = self._checks.popleft()
            if t - due <= tolerance:
                cap = self.params.max_relative_miss
                error = min(cap, (actual - predicted) / predicted) if predicted > 0 else cap * (actual > 0)
                self._errors.append(t, error)
                self._under_sq += max(error, 0.0) ** 2
        for old in self._errors.expire_before(t - self.params.error_window_s):
            self._under_sq -= max(old, 0.0) ** 2
        if not self._errors:
            self._under_sq = 0.0

    def margin(self) -> float:
        """The uncertainty margin in the series' units (module docstring): a share of the level."""
        level = self.level or 0.0
        if not self._errors:
            return self.params.initial_margin_fraction * level
        semi_rms = math.sqrt(max(self._under_sq, 0.0) / len(self._errors))
        learned = self.params.margin_multiplier * semi_rms * level
        if len(self._errors) < self.params.min_error_checks:
            return max(learned, self.params.initial_margin_fraction * level)
        return learned

    def forecast(self) -> Forecast | None:
        """The current forecast, or None before the first sample."""
        if self.level is None:
            return None
        peak = max((v for _, v in self._peaks), default=0.0)
        return Forecast(self.level, self.trend, self.margin(), peak, self.last_value)
