"""The prefill rate ``P``: prompt tokens per second one Ready replica computes, measured. Pure.

The engines time a request's phases; where they do, the rate is read from those timings, and no
queueing model stands between the metric and the figure. Each refresh gives at most one reading,
from the first of these that it has (``p`` the prompt tokens per request over the rate window,
``scaler.decider.demand``):

    1. prefill time (vLLM)       P = b x p / prefill time           first scheduled -> first token
    2. queue time (SGLang)       P = p / (mean TTFT - queue time)   the TTFT the wait leaves
    3. nobody waiting            P = p / mean TTFT                  a lower bound: the TTFT holds any
                                                                    wait the engine does not report

1 and 2 are what a request sees: with chunked prefill sharing steps with decode, scheduling and
tokenisation, the *effective* rate, which is what both the objective's allowance
(``ttftObjectiveSeconds - p / P``) and the prefill's capacity are. Where more than one prompt is
in prefill at once on a replica (the prefill's busy share ``b`` above 1,
``scaler.decider.capacity.saturation``: chunked prefill computes chunks of several prompts in one
step), each is computed at its share of the replica's rate, so 1 reads ``P = b x p / prefill
time`` (``b`` at least 1): the replica is not slower, it is shared. *Example*: 1,155-token prompts
taking 0.35 s each with two in prefill at once on average (``b`` 2.0): 6,600 tokens/s each, 13,200
a replica. What that reading is, by Little's law (``b = served x prefill time / ready``): the prompt
tokens a Ready replica served per second. It is the replica's rate where its steps were full of
prefill, and below it otherwise (a step-level vLLM whose steps held room: 0.42-0.81 of its
saturation run's rate, ``BENCHMARKS.md``, issue 35). Read instead as a bound (raised at once, lowered
slowly) it changed nothing that paid over six cells (Azure's hour pooled and random in both worlds,
ServeGen and decode-heavy 6 h in the step world, three capacity conditions: within 0.6 points and
0.05x either way), so it stays a measurement, and the objective's measurement corrects what it
reads low.
3 needs no model at all: a request's first token comes after its own prefill, so its
TTFT is never shorter. It is the fallback for an engine that exports no phase time, and it is read
only while nobody waits (at this refresh and the previous) on a fleet steady for a rate window. No
dispatch and no spread of service times is assumed: a model of the queue inverted from the mean
TTFT would blame a slower prefill for every wait the model did not foresee (per-replica queues,
heavy-tailed prompts). Where it reads low, the measured objective corrects the capacity
(``scaler.decider.calibration``).

The phase times measure ``P`` itself: each such reading moves the estimate by its weight over
``capacity_time_constant_s`` in log space (``Estimate``). 3 is a bound from below, so one above
the estimate raises it at once (the replica was seen that fast); one below lowers it only slowly,
as an exponential average over ``learning_time_constant_s`` (a busier window reads less of the
same replica: the lightest of the last half hour reads most).
``promptTokensPerSecondPerReplica`` is where it starts, and stands until the first reading.

*Example*: 1,155 prompt tokens per request and a mean prefill time of 0.231 s, one prompt in
prefill at a time: 5,000 tokens/s. Without phase times, 4 idle replicas with a mean TTFT of
0.30 s on 1,000-token prompts read 3,333 tokens/s: the replica is at least that fast; a busier
minute's 0.40 s (2,500), 15 s later, then lowers the estimate by 15 / 1,800 of the way only, to
3,325.
"""

from __future__ import annotations

from scaler.decider.capacity.estimate import Estimate
from scaler.decider.capacity.saturation import Saturation
from scaler.decider.demand import Demand
from scaler.decider.params import DeciderParams
from scaler.decider.stages import Stages
from scaler.model import Observation

PREFILL_TIME = "prefill-time histogram"
TTFT_LESS_QUEUE = "TTFT less the queue time"
IDLE_TTFT = "TTFT while nobody waited (a lower bound)"  # a reading that bounds P from below


class PrefillRate:
    """``P`` of the module docstring: one reading per refresh at most, from the best it has."""

    def __init__(self, configured: float | None, params: DeciderParams, stages: Stages) -> None:
        self.params = params
        self.stages = stages
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
        if self.stages.phase_times:
            if prefill_s:
                # Several prompts in prefill at once (chunked prefill: a step holds chunks of all of
                # them) share the replica, each computed at its share of the rate (module docstring).
                overlap = max(1.0, saturation.prefill_busy or 0.0)
                return overlap * prompt / prefill_s, PREFILL_TIME
            if queue_s is not None and ttft_s is not None and ttft_s > queue_s:
                return prompt / (ttft_s - queue_s), TTFT_LESS_QUEUE
        if saturation.steady and saturation.idle and ttft_s:
            return prompt / ttft_s, IDLE_TTFT
        return None

    def observe(
        self, obs: Observation, demand: Demand, saturation: Saturation, fast: float, slow: float
    ) -> None:
        """Learn from one refresh (in time order); ``fast`` and ``slow`` are its weights over the
        capacity's and the slow learners' time constants."""
        if not self.stages.measure_capacity:
            return
        found = self.reading(obs, demand, saturation)
        if found is None:
            return
        value, self.method = found
        if self.method != IDLE_TTFT:
            self.estimate.measure(value, fast)
            return
        current = self.estimate.value
        self.estimate.measure(value, 1.0 if current is None or value > current else slow)
