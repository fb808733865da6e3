"""The prefill rate ``P``: prompt tokens per second one Ready replica computes, measured. Pure.

The engines time a request's phases; where they do, the rate is read from those timings, and no
queueing model stands between the metric and the figure. Each refresh gives at most one reading,
from the first of these that it has (``p`` the prompt tokens per request over the rate window,
``scaler.demand``):

    1. prefill time (vLLM)       P = p / prefill time           first scheduled -> first token
    2. queue time (SGLang)       P = p / (mean TTFT - queue time)  the TTFT the wait leaves
    3. prefill-bound refreshes   P = prompt tokens/s / ready    a replica whose prompts queue
                                                                computes them all the time
    4. nobody waiting            P = p / mean TTFT              a lower bound: the TTFT holds any
                                                                wait the engine does not report

1 and 2 are what a request sees: with chunked prefill sharing steps with decode, scheduling and
tokenisation, the *effective* rate, which is what both the objective's allowance
(``ttftObjectiveSeconds - p / P``) and the prefill's capacity are. 3 reads the capacity where
the fleet shows it (``scaler.capacity.saturation``: requests wait on every replica behind
prompts); it counts replicas whose queue emptied within the window too, so it is a bound from
below, tight when every replica is saturated. 4 needs no model at all: a request's first token
comes after its own prefill, so its TTFT is never shorter. It is the fallback for an engine that
exports no phase time, and it is read only while nobody waits (at this refresh and the previous)
on a fleet steady for a rate window. No dispatch and no spread of service times is assumed: a
model of the queue inverted from the mean TTFT would blame a slower prefill for every wait the
model did not foresee (per-replica queues, heavy-tailed prompts).

Each reading moves the estimate by ``capacity_weight`` in log space (``Estimate``);
``promptTokensPerSecondPerReplica`` is where it starts, and stands until the first reading.

*Example*: 1,155 prompt tokens per request and a mean prefill time of 0.231 s: 5,000 tokens/s.
Without phase times, 4 idle replicas with a mean TTFT of 0.30 s on 1,000-token prompts read
3,333 tokens/s: the replica is at least that fast.
"""

from __future__ import annotations

from scaler.capacity.estimate import Estimate
from scaler.capacity.saturation import Bound, Saturation
from scaler.demand import Demand
from scaler.model import Observation
from scaler.params import DeciderParams

PREFILL_TIME = "prefill-time histogram"
TTFT_LESS_QUEUE = "TTFT less the queue time"
PREFILL_BOUND = "served while prefill-bound"
IDLE_TTFT = "TTFT while nobody waited (a lower bound)"


class PrefillRate:
    """``P`` of the module docstring: one reading per refresh at most, from the best it has."""

    def __init__(self, configured: float | None, params: DeciderParams) -> None:
        self.params = params
        self.estimate = Estimate(configured)
        self.method = "configured" if configured is not None else ""

    @property
    def value(self) -> float | None:
        """Prompt tokens/s one Ready replica computes, or None while unknown."""
        return self.estimate.value

    def reading(self, obs: Observation, demand: Demand, saturation: Saturation) -> tuple[float, str] | None:
        """This refresh's reading of ``P`` and where it came from (module docstring), or None."""
        prompt = demand.prompt_tokens_per_request
        if not prompt or not demand.served_per_s:
            return None
        prefill_s, queue_s, ttft_s = (
            obs.prefill_time_mean_seconds,
            obs.queue_time_mean_seconds,
            obs.ttft_mean_seconds,
        )
        if self.params.phase_times:
            if prefill_s:
                return prompt / prefill_s, PREFILL_TIME
            if queue_s is not None and ttft_s is not None and ttft_s > queue_s:
                return prompt / (ttft_s - queue_s), TTFT_LESS_QUEUE
        ready, rate = obs.ready_replicas, obs.prompt_tokens_per_s
        if saturation.bound is Bound.PREFILL and ready and rate:
            return rate / ready, PREFILL_BOUND
        if saturation.steady and saturation.idle and ttft_s:
            return prompt / ttft_s, IDLE_TTFT
        return None

    def observe(self, obs: Observation, demand: Demand, saturation: Saturation) -> None:
        """Learn from one refresh (in time order)."""
        if not self.params.measure_capacity:
            return
        found = self.reading(obs, demand, saturation)
        if found is not None:
            value, self.method = found
            self.estimate.measure(value, self.params.capacity_weight)
