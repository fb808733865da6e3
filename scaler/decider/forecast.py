"""The demand forecast: a level and a trend, a held plan, and the plan's own past errors. Pure.

One forecaster per demand series (the offered prompt tokens per second, the offered
concurrency; ``scaler.decider.demand``), sampled at irregular times:

    level  <- level + alpha (value - (level + trend dt))       alpha = 1 - exp(-dt / 60 s)
    trend  <- trend + beta (slope of the level - trend)         beta  = 1 - exp(-dt / 300 s)
    point(h) = max(0, level + trend h)
    planned  = the largest max(level, point(lead)) made within the last lead

Holt's linear smoothing in continuous time, so a missed refresh does not change the model.
The plan is held for one cold start: a replica released now cannot be back sooner, so a dip
shorter than that releases nothing.

**The errors.** Every plan made for ``t + lead`` is checked when that time comes:

    error = max(0, actual - planned) / max(planned, floor)

``floor`` is what the floor's replicas hold (``minReplicas`` times one replica's capacity in
the series' units; 0 while that is unknown): a miss the floor absorbs anyway costs nothing,
so a surge from near idle, unbounded as a ratio to its plan, counts as what it is against the
fleet that is always there. The errors of the last ``error_window_s`` are what the load signal
sizes against (``scaler.decider.signals.load``). The margin shown with a decision is their empirical
``q`` quantile, ``q`` the objective's percentile: with ``n`` errors, the
``ceil((n + 1) q)``-th smallest (the split-conformal rule, which covers the next error with
probability at least ``q`` when errors are exchangeable); while there are too few for that,
the largest seen, and 0 with none: a new target starts from the demand it sees.

*Example*: a plan of 2 sequences at night, 20 arrive (a floor of 2 replicas of 24 slots
holds 48): the error is 18 / 48 = 0.38, not 9. A plan of 52 sequences met by a burst of 250:
(250 - 52) / 52 = 3.8. With 240 checks in the last hour and ``q = 0.995`` the margin is the
largest of them.
"""

from __future__ import annotations

import math
from array import array
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from scaler.decider.params import DEFAULT, DeciderParams
from scaler.decider.stages import ALL, Stages

# How much a full ring grows: doubling keeps an append O(1) amortised.
RING_GROWTH = 2
# Rate windows (the level's time constant) before a forecast is scored: by then the first value
# weighs e^-2 = 14% in the level, so the first checks do not score a start-up transient.
WARM_UP_WINDOWS = 2


def warm_up_s(params: DeciderParams) -> float:
    """Seconds from a series' first value until it is a demand: ``WARM_UP_WINDOWS`` rate windows (120 s
    at the default 60 s). The forecast is scored from then on, and ``signals.last_known`` holds the
    standing replicas until then."""
    return WARM_UP_WINDOWS * params.rate_window_s


@dataclass(frozen=True, slots=True)
class Forecast:
    """A forecast of one series: level, trend (units per second) and relative margin."""

    level: float
    trend: float
    planned: float  # the largest peak planned within the last lead: what to size for, before errors
    held_s: float  # how long ago ``planned`` was planned (0: it is the peak planned now)
    margin: float
    errors: tuple[float, ...] = ()  # the checked errors, largest first

    @property
    def checks(self) -> int:
        """Errors checked within the window."""
        return len(self.errors)


class _TimedWindow:
    """Time-ordered ``(t, value)`` pairs, appended at the end and expired from the front.

    A ring of two flat arrays of doubles rather than a deque of tuples: the error window
    holds up to an hour of checks per series, two series per ScaledObject, and for a
    thousand ScaledObjects the tuples took 44 MB; the ring takes 8 MB.
    """

    __slots__ = ("_head", "_size", "_t", "_v")

    def __init__(self, pairs: Iterable[tuple[float, float]] = ()) -> None:
        self._t = array("d", [0.0])
        self._v = array("d", [0.0])
        self._head = 0
        self._size = 0
        for t, v in pairs:
            self.append(float(t), float(v))

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[tuple[float, float]]:
        return zip(self._slice(self._t), self._slice(self._v), strict=True)

    def values(self) -> array[float]:
        """The values, oldest first (sliced out of the ring, not walked in Python)."""
        return self._slice(self._v)

    def _slice(self, ring: array[float]) -> array[float]:
        end = self._head + self._size
        if end <= len(ring):
            return ring[self._head : end]
        return ring[self._head :] + ring[: end - len(ring)]

    def append(self, t: float, value: float) -> None:
        cap = len(self._t)
        if self._size == cap:
            pairs = list(self)
            self._t = array("d", [0.0]) * (RING_GROWTH * cap)
            self._v = array("d", [0.0]) * (RING_GROWTH * cap)
            for i, (pt, pv) in enumerate(pairs):
                self._t[i] = pt
                self._v[i] = pv
            self._head, cap = 0, RING_GROWTH * cap
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


class Forecaster:
    """Mutable per-series state. Deterministic: equal updates in equal order give equal forecasts."""

    def __init__(self, params: DeciderParams = DEFAULT, stages: Stages = ALL) -> None:
        self.params = params
        self.stages = stages
        self.level: float | None = None
        self.trend = 0.0
        self.last_t: float | None = None
        self.first_t: float | None = None
        self._checks: deque[tuple[float, float, float]] = deque()  # (due, tolerance, planned)
        self._peaks: deque[tuple[float, float]] = deque()  # (time, peak planned then), decreasing
        self._errors = _TimedWindow()  # (time checked, max(0, actual / planned - 1))
        self._planned = _TimedWindow()  # (time checked, what was planned)

    @property
    def checks(self) -> int:
        """Errors checked within the error window."""
        return len(self._errors)

    def update(self, t: float, value: float, horizon_s: float) -> None:
        """Feed the series' value at ``t``; ``horizon_s`` is the lead the plan made now is for."""
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"forecaster needs finite values >= 0, got {value!r}")
        if self.last_t is not None and t <= self.last_t:
            return  # out of order or repeated: ignore, never rewrite history
        self._check_due(t, value)
        if self.level is None or self.last_t is None:
            self.level, self.first_t = value, t
        else:
            dt = t - self.last_t
            alpha = 1.0 - math.exp(-dt / self.params.rate_window_s)
            beta = 1.0 - math.exp(-dt / self.params.trend_time_constant_s)
            predicted = self.level + self.trend * dt
            new_level = predicted + alpha * (value - predicted)
            self.trend += beta * ((new_level - self.level) / dt - self.trend)
            self.level = max(0.0, new_level)
        self.last_t = t
        # The plan holds the largest peak of the last lead: a replica released now is back
        # only after one, so a dip shorter than that releases nothing.
        peak = max(self.level, self.level + self.trend * horizon_s)
        peaks = self._peaks
        while peaks and peaks[0][0] < t - horizon_s:
            peaks.popleft()
        while peaks and (peaks[-1][1] <= peak or not self.stages.hold_plan):
            peaks.pop()
        peaks.append((t, peak))
        assert self.first_t is not None
        if t - self.first_t < warm_up_s(self.params):
            return  # the level still remembers its first value (e^-2 of it after two time constants)
        # A check is scored against the first sample at or after its due time; one whose time
        # passed in a gap of the data (a sample more than a rate window late) is dropped.
        self._checks.append((t + horizon_s, self.params.rate_window_s, peaks[0][1]))

    def _check_due(self, t: float, actual: float) -> None:
        while self._checks and self._checks[0][0] <= t:
            due, tolerance, planned = self._checks.popleft()
            if t - due <= tolerance and planned > 0:
                self._errors.append(t, max(0.0, actual / planned - 1.0))
                self._planned.append(t, planned)
        cutoff = t - self.params.error_window_s
        self._errors.expire_before(cutoff)
        self._planned.expire_before(cutoff)

    def errors(self, floor: float = 0.0) -> list[float]:
        """The checked errors, each a miss over the larger of its plan and ``floor`` (module docstring)."""
        errors, planned = self._errors.values(), self._planned.values()
        return [e * p / (p if p >= floor else floor) for e, p in zip(errors, planned, strict=True)]

    def forecast(self, quantile: float, floor: float = 0.0) -> Forecast | None:
        """The current forecast with its margin at ``quantile``, or None before the first sample;
        ``floor`` is the demand the fleet's floor holds (module docstring), 0 when unknown."""
        if self.level is None:
            return None
        ascending = sorted(self.errors(floor))
        held_at, planned = self._peaks[0]
        assert self.last_t is not None
        margin = _conformal(ascending, quantile)
        errors = tuple(reversed(ascending))
        return Forecast(self.level, self.trend, planned, self.last_t - held_at, margin, errors)


def _conformal(ascending: Sequence[float], quantile: float) -> float:
    """The ``quantile`` of sorted errors by the split-conformal rule (module docstring), >= 0."""
    if not ascending:
        return 0.0
    rank = math.ceil((len(ascending) + 1) * quantile)
    return max(0.0, ascending[min(rank, len(ascending)) - 1])


class Forecasts:
    """The two series the load signal sizes on, each a ``Forecaster``: the offered prompt tokens per
    second and the offered sequences in service (``scaler.decider.demand``)."""

    def __init__(self, params: DeciderParams = DEFAULT, stages: Stages = ALL) -> None:
        self.params = params
        self.prompt = Forecaster(params, stages)
        self.concurrency = Forecaster(params, stages)

    def update(self, t: float, prompt: float | None, concurrency: float | None, horizon_s: float) -> None:
        """Feed each series its value at ``t`` (None: unknown, not fed)."""
        if prompt is not None:
            self.prompt.update(t, prompt, horizon_s)
        if concurrency is not None:
            self.concurrency.update(t, concurrency, horizon_s)

    def forecast(
        self, quantile: float, floor_prompt: float, floor_concurrency: float
    ) -> tuple[Forecast | None, Forecast | None]:
        """Both forecasts, each miss counted against the larger of its plan and what the floor's
        replicas hold (``floor_*``: module docstring; 0 where that is not counted)."""
        return self.prompt.forecast(quantile, floor_prompt), self.concurrency.forecast(
            quantile, floor_concurrency
        )
