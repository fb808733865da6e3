"""The decode slowdown ``beta``: how much a replica's prefill slows its decoding, measured. Pure.

Where prefill and decode share a replica's forward passes (vLLM's chunked prefill), a sequence
decodes slower while prompts are computed; where they do not, it does not. Which one a replica
is, and how much, is read from the refreshes:

    decoding  = running - served x mean TTFT          sequences past their first token (Little)
    r         = generation_tokens_per_s / decoding    tokens/s each decodes
    f         = prompt_tokens_per_s / (ready x P)     the share of a replica prefill keeps busy
    r         = r0 x (1 - beta x f)                   least squares over the refreshes, beta in [0, 1]

``beta`` 0: decode does not notice prefill; 1: prefill and decode add as GPU time (a replica busy
30% on prompts decodes at 70% speed). The fit is an exponential average over
``learning_time_constant_s`` (``Line``), read on a steady fleet with nobody waiting and at least
one sequence decoding, and used once
``f`` has varied by ``fit_min_spread``.

*Example*: decoding at 20 tokens/s a sequence with prefill 10% busy and at 12 with it 50% busy:
``r0 = 22``, ``beta = 0.91``.
"""

from __future__ import annotations

from scaler.decider.capacity.estimate import Line
from scaler.decider.capacity.saturation import Saturation
from scaler.decider.demand import Demand
from scaler.decider.params import DeciderParams
from scaler.model import Observation


class DecodeSlowdown:
    """``beta`` of the module docstring."""

    def __init__(self, params: DeciderParams) -> None:
        self.params = params
        self.line = Line()

    @property
    def value(self) -> float | None:
        """``beta`` in [0, 1], or None until the refreshes have shown it."""
        fitted = self.line.fit(self.params.fit_min_spread)
        if fitted is None or fitted[0] <= 0:
            return None
        r0, slope = fitted
        return max(0.0, min(1.0, -slope / r0))

    def observe(
        self,
        obs: Observation,
        demand: Demand,
        saturation: Saturation,
        prefill_rate: float | None,
        weight: float,
    ) -> None:
        """Learn from one refresh; ``weight`` is its share of the fit's time constant."""
        served, mean, ready = demand.served_per_s, obs.ttft_mean_seconds, obs.ready_replicas
        running, generated, prompt_rate = (
            obs.requests_running,
            obs.generation_tokens_per_s,
            obs.prompt_tokens_per_s,
        )
        if not (saturation.steady and obs.queue_waiting == 0 and prefill_rate and served and ready):
            return
        if mean is None or not running or not generated or prompt_rate is None:
            return
        decoding = running - served * mean
        if decoding >= 1:  # a decode speed needs a sequence decoding
            self.line.add(prompt_rate / (ready * prefill_rate), generated / decoding, weight)
