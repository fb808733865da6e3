"""The reference policy: five parameters, beside the decider in every replay so its complexity has to
earn its place. Pure.

What a platform team would write without this scaler, done well:

* **demand** in replicas of the resource that binds, with ``P`` and ``G`` the ScaledObject's
  ``promptTokensPerSecondPerReplica`` and ``generationTokensPerSecondPerReplica`` (a replica's token
  rates, each with the GPU on it alone, as its operators measured them): where prefill and decode
  share a replica's GPU (vLLM: every engine step does both, ``shares_gpu``), their shares of its time
  add, ``prompt tokens/s / P + generated tokens/s / G``; where they run on resources of their own,
  the larger binds, ``max(prompt tokens/s / P, generated tokens/s / G)``. (With the larger where
  they share, a saturated replica busy half on each reads as half a replica, and the fleet is
  never sized up: 0.00 % within the objective for six hours of ServeGen in the benchmark's
  ``shared`` world.)
* a **damped-trend forecast** of it one cold start ahead (Holt's level and trend in continuous time;
  the trend's effect fades with ``trend_s``, so a ramp is followed and not extrapolated forever):

      forecast(h) = level + trend x trend_s x (1 - exp(-h / trend_s))

* a **margin** from its own past errors at that lead: the ``margin_quantile`` of
  ``max(0, actual / forecast - 1)`` over the last ``error_window_s``, each forecast checked one lead
  after it was made;
* a **utilisation target**: ``replicas = ceil(forecast x (1 + margin) / utilisation)``, at least
  ``minReplicas``, at most ``maxReplicas``.

The five parameters are ``REFERENCE``'s fields; the lead is the cold start (``coldStartSeconds``, or
the measured one the decider reads), which is not tuned. It runs through KEDA and the HPA as the
decider does, with the HPA's default behaviour (a scale-down stabilised over five minutes).

*Example*: 20,000 prompt tokens/s against ``P`` = 5,000 and 1,000 generated tokens/s against
``G`` = 432 is 4 replicas of prefill and 2.3 of decode: 4 on resources of their own (6.3 sharing a
GPU; what follows takes 4). Rising by 20 per second, the forecast
180 s ahead (``trend_s`` 300) is ``4 + 0.004 x 300 x 0.45 = 4.54``; past errors at the 0.95 quantile
of 10% make it 5.0, and at 80% utilisation the policy asks 7.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from scaler.decider.spec import DeciderSpec
from scaler.model import Decision, Observation, Proposal, Signal


@dataclass(frozen=True, slots=True)
class ReferenceParams:
    """The reference policy's five parameters (module docstring)."""

    level_s: float = 60.0
    """Seconds: the level's time constant, the rate window the token rates are read over."""
    trend_s: float = 300.0
    """Seconds: the trend's time constant, both how it is averaged and how its effect fades ahead."""
    margin_quantile: float = 0.95
    """The quantile of the forecast's past relative misses added as a margin."""
    error_window_s: float = 3600.0
    """Seconds of past misses the margin is read over."""
    utilisation: float = 0.8
    """The share of the binding resource's capacity the fleet is sized to use."""


REFERENCE = ReferenceParams()
# Seconds: the lead while neither a cold start is configured nor one measured (the decider's own
# default, scaler.decider.coldstart).
DEFAULT_LEAD_S = 180.0


class ReferenceDecider:
    """The reference policy as a decider: ``decide(observation)`` returns a ``Decision`` whose load
    proposal is the policy's replicas (module docstring)."""

    def __init__(
        self, spec: DeciderSpec, params: ReferenceParams = REFERENCE, shares_gpu: bool = True
    ) -> None:
        self.spec = spec
        self.params = params
        self.shares_gpu = shares_gpu  # prefill and decode on one GPU's time (module docstring), not tuned
        self.level: float | None = None
        self.trend = 0.0
        self.t: float | None = None
        self._checks: deque[tuple[float, float]] = deque()  # (due, forecast)
        self._misses: deque[tuple[float, float]] = deque()  # (checked at, relative miss)
        self.complete_at: float | None = None  # when its token rates were last read (Decision.stale)

    def _demand(self, obs: Observation) -> float | None:
        """Replicas of the binding resource the served token rates take."""
        spec, parts = self.spec, []
        p, g = spec.prompt_tokens_per_second_per_replica, spec.generation_tokens_per_second_per_replica
        if p and obs.prompt_tokens_per_s is not None:
            parts.append(obs.prompt_tokens_per_s / p)
        if g and obs.generation_tokens_per_s is not None:
            parts.append(obs.generation_tokens_per_s / g)
        if not parts:
            return None
        return sum(parts) if self.shares_gpu else max(parts)

    def _lead(self, obs: Observation) -> float:
        if self.spec.cold_start_seconds is not None:
            return self.spec.cold_start_seconds
        return obs.cold_start_seconds if obs.cold_start_seconds else DEFAULT_LEAD_S

    def _forecast(self, horizon_s: float) -> float:
        assert self.level is not None
        tau = self.params.trend_s
        return max(0.0, self.level + self.trend * tau * (1.0 - math.exp(-horizon_s / tau)))

    def decide(self, obs: Observation) -> Decision:
        """The policy's decision at ``obs`` (module docstring)."""
        t, demand, lead = obs.timestamp, self._demand(obs), self._lead(obs)
        replicas = self.spec.min_replicas
        if demand is not None:
            self.complete_at = t
            while self._checks and self._checks[0][0] <= t:
                _, planned = self._checks.popleft()
                if planned > 0:
                    self._misses.append((t, max(0.0, demand / planned - 1.0)))
            while self._misses and self._misses[0][0] < t - self.params.error_window_s:
                self._misses.popleft()
            if self.level is None or self.t is None:
                self.level = demand
            else:
                dt = max(0.0, t - self.t)
                alpha = 1.0 - math.exp(-dt / self.params.level_s)
                beta = 1.0 - math.exp(-dt / self.params.trend_s)
                predicted = self.level + self.trend * dt
                level = predicted + alpha * (demand - predicted)
                if dt > 0:
                    self.trend += beta * ((level - self.level) / dt - self.trend)
                self.level = max(0.0, level)
            self.t = t
            forecast = self._forecast(lead)
            self._checks.append((t + lead, forecast))
            misses = sorted(m for _, m in self._misses)
            margin = (
                misses[min(len(misses) - 1, int(self.params.margin_quantile * len(misses)))]
                if misses
                else 0.0
            )
            replicas = max(replicas, math.ceil(round(forecast * (1.0 + margin) / self.params.utilisation, 9)))
        replicas = min(self.spec.max_replicas, replicas)
        proposal = Proposal(Signal.LOAD, replicas, "the reference policy")
        return Decision(
            now=obs.now,
            replicas=max(1, replicas),
            binding=Signal.LOAD,
            proposals={Signal.LOAD: replicas, Signal.FLOOR: self.spec.min_replicas},
            signal_reasons={Signal.LOAD: proposal.reason},
            clamps=(),
            notes=(),
            reason=f"{replicas} replicas: the reference policy",
            observation=obs,
            inputs_complete_at=self.complete_at,
        )
