"""The running estimates the capacity figures are kept in. Pure.

Three shapes, each a small value the figures' estimators (``prefill``, ``slots``, ``slowdown``,
``itl``) hold:

* ``Estimate``: a figure measured again and again, kept as an exponential average in log space
  (a reading of twice the estimate moves it as far up as one of half moves it down):

      ln x <- ln x + w (ln reading - ln x)        w = 1 - exp(-dt / capacity_time_constant_s)

  with a configured starting point that stands until the first reading. *Example*: 5,000
  configured, readings of 10,000 every 15 s (w = 0.095 over 150 s): 5,336 after one, 9,012 after 19.
* ``Ceiling``: a figure the readings can only show from below (what a replica was seen to run
  while its batch was full: it never runs more than its cap), so a higher reading is taken at
  once and a lower one moves it by ``w``. *Example*: 24, then a reading of 28: 28; then 20: 27.1.
* ``Line``: an exponentially weighted least-squares line ``y = a + b x`` (the same weight, over
  ``learning_time_constant_s``), fitted once ``x`` has spread; the decode slowdown and the
  inter-token latency are read from one each.
"""

from __future__ import annotations

import math


def _finite_positive(value: float) -> bool:
    return value > 0 and math.isfinite(value)


class Estimate:
    """One per-replica figure: a configured start, moved in log space by each reading (module docstring)."""

    __slots__ = ("configured", "ln", "samples", "start")

    def __init__(self, configured: float | None) -> None:
        self.configured = configured
        self.ln = None if configured is None else math.log(configured)
        self.samples = 0
        self.start: float | None = None  # a starting point that is not configured (see ``begin``)

    def measure(self, value: float, weight: float) -> None:
        """Move the estimate toward ``value`` by ``weight`` (the first reading sets it when nothing was
        configured or begun); readings that are not finite and positive are ignored."""
        if not _finite_positive(value):
            return
        ln = math.log(value)
        self.ln = ln if self.ln is None else self.ln + weight * (ln - self.ln)
        self.samples += 1

    def begin(self, value: float) -> None:
        """A starting point derived from configuration (the slots from a configured decode rate), read
        again each refresh until the first measurement."""
        if not self.samples and _finite_positive(value):
            self.ln = math.log(value)
            self.start = value

    @property
    def value(self) -> float | None:
        """The estimate, or None when nothing was configured, begun or measured."""
        if self.ln is None:
            return None
        if not self.samples and self.configured is not None:
            return self.configured
        return math.exp(self.ln)

    @property
    def measured(self) -> bool:
        """Whether a reading has moved it."""
        return self.samples > 0


class Ceiling:
    """A figure readings show only from below: raised at once, lowered by ``weight`` (module docstring)."""

    __slots__ = ("samples", "value")

    def __init__(self) -> None:
        self.value: float | None = None
        self.samples = 0

    def measure(self, value: float, weight: float) -> None:
        """Take a reading: above the ceiling it becomes the ceiling; below, it pulls it down by ``weight``."""
        if not _finite_positive(value):
            return
        old = self.value
        if old is None or value >= old:
            self.value = value
        else:
            self.value = math.exp(math.log(old) + weight * (math.log(value) - math.log(old)))
        self.samples += 1


class Line:
    """An exponentially weighted least-squares fit of ``y = intercept + slope x``."""

    __slots__ = ("n", "samples", "x", "xx", "xy", "y")

    def __init__(self) -> None:
        self.n = self.x = self.y = self.xx = self.xy = 0.0
        self.samples = 0

    def add(self, x: float, y: float, weight: float) -> None:
        """One point, weighted ``weight`` against the ones before (which keep ``1 - weight``)."""
        keep = 1.0 - weight
        self.n = keep * self.n + weight
        self.x = keep * self.x + weight * x
        self.y = keep * self.y + weight * y
        self.xx = keep * self.xx + weight * x * x
        self.xy = keep * self.xy + weight * x * y
        self.samples += 1

    def fit(self, min_spread: float) -> tuple[float, float] | None:
        """``(intercept, slope)``, or None until ``x`` has spread by ``min_spread`` (a standard deviation)."""
        if self.n <= 0:
            return None
        mean_x, mean_y = self.x / self.n, self.y / self.n
        var = self.xx / self.n - mean_x * mean_x
        if var < min_spread * min_spread:
            return None
        slope = (self.xy / self.n - mean_x * mean_y) / var
        return mean_y - slope * mean_x, slope
