"""The batch the inter-token latency objective allows, with ``itlObjectiveSeconds`` set. Pure.

A decode step serves every sequence in the batch, so the gap between two tokens grows with the
batch a replica runs. A line is fitted (``Line``, over ``learning_time_constant_s``),

    itl_mean = a + c x                       x = running / ready / S, the share of slots in use

with the ratio of the ITL at the objective's percentile to its mean averaged beside it; the slots
the objective allows a replica are ``S x (itlObjectiveSeconds / ratio - a) / c`` (at most ``S``, at
least 1; none while ``c`` is not above 0), and the load signal sizes the slots on those.

*Example*: 20 ms plus 40 ms at a full batch of 64, a p99 1.5 times the mean, a 60 ms objective:
``64 x (0.040 - 0.020) / 0.040 = 32`` sequences per replica.
"""

from __future__ import annotations

from scaler.decider.capacity.estimate import Line
from scaler.decider.params import DeciderParams
from scaler.model import Observation


class ItlSlots:
    """The sequences per replica within the ITL objective (module docstring)."""

    def __init__(self, objective_s: float | None, params: DeciderParams) -> None:
        self.objective_s = objective_s
        self.params = params
        self.line = Line()
        self.tail: float | None = None  # ITL at the objective's percentile over its mean

    def value(self, slots: float | None) -> float | None:
        """The sequences per replica within the objective, or None: no objective, no line yet, or a
        latency that does not grow with the batch."""
        fitted = self.line.fit(self.params.fit_min_spread)
        if self.objective_s is None or fitted is None or not slots or self.tail is None:
            return None
        intercept, slope = fitted
        if slope <= 0:
            return None
        share = (self.objective_s / self.tail - intercept) / slope
        return max(1.0, min(slots, share * slots))

    def per_sequence(self, slots: float | None) -> tuple[float, float] | None:
        """The line in sequences a replica decodes: ``(a, c / S)``, seconds and seconds a sequence; None
        before a line is fitted, or where the latency does not grow with the batch."""
        fitted = self.line.fit(self.params.fit_min_spread)
        if fitted is None or not slots or fitted[1] <= 0 or fitted[0] < 0:
            return None
        return fitted[0], fitted[1] / slots

    def observe(self, obs: Observation, slots: float | None, steady: bool, weight: float) -> None:
        """Learn from one refresh on a steady fleet; ``weight`` is its share of the time constant."""
        mean, tail = obs.itl_mean_seconds, obs.itl_tail_seconds
        ready, running = obs.ready_replicas, obs.requests_running
        if not (mean and slots and ready and running) or not steady:
            return
        self.line.add(running / ready / slots, mean, weight)
        if tail is not None:
            ratio, old = tail / mean, self.tail
            self.tail = ratio if old is None else old + weight * (ratio - old)
