"""Capacity calibration: what one Ready replica serves, learned from what the scaler reads. Pure.

The token signal needs two numbers users rarely know: how many prompt and generated
tokens per second one replica serves, and how close to that the fleet may run before the
time to first token (TTFT) misses its objective. The configured capacities
(``promptTokensPerSecondPerReplica``, ``generationTokensPerSecondPerReplica``) and
``targetUtilization`` are only the starting point (the *prior*); this module moves them
with evidence, per ScaledObject, from the inputs every refresh already carries: the token
rates, the queue, the Ready replicas and the TTFT.

**Units.** Load is measured in replicas of prior capacity:

    load(p, g) = p / P0 + g / G0            p, g: prompt and generated tokens/s
    x          = load(p, g) / ready          the load one Ready replica carries

with ``P0``, ``G0`` the configured capacities (an unset one drops its term). With none
configured the direction defaults to ``P0 = 1``, ``G0 = 1/5`` (a generated token costs
five prompt tokens, as the example's 9,000 and 1,800 tokens/s say) and the scale is
measured, below. Two numbers are learned: the **capacity** ``s`` (what one replica serves
at its limit, in those units) and the **usable load** ``u <= s`` (what it may carry and
still meet the TTFT objective). The token signal asks for ``ceil(load(forecast) / u)``
replicas; the decision reports capacities ``s * P0`` and ``s * G0`` tokens/s and a usable
fraction ``u / s``. Why one direction is enough: how prefill and decode share a GPU
(added as GPU time, separate resources of which the tighter binds, or in between as with
vLLM's chunked prefill) cannot be told apart on traffic whose token mix is steady, and
along that mix ``u`` is all the token signal needs; a mix that shifts is learned again.

**The TTFT objective sets the usable load.** Each refresh carries the share of the last
rate window's first tokens slower than ``ttftObjectiveSeconds`` (from the histogram's
buckets; without them, estimated from the p95 and p99 by an exponential tail,
``share_over_objective``). A p99 objective allows 1% over it; the calibration spends half,
``budget = 0.5%``, and leaves the rest to forecast misses. A refresh that shows the fleet
loaded as planned moves ``u`` by a stochastic-approximation (Robbins-Monro) step towards
the load whose share over the objective is the budget:

    ln u += ln 2 / T * dt * clamp((budget - over) / budget, -30, 1)

with ``T`` (the doubling time) 15 minutes while the estimate rests on few refreshes,
lengthening to one hour over the first 240. A refresh that meets the objective with room
to spare raises ``u`` by at most a doubling per ``T``; one that misses it lowers ``u`` up to
30 times faster (a refresh with 5% over the objective takes 2.6% off ``u`` once settled):
slow towards less headroom, fast towards more. In equilibrium the average share over the
objective on such refreshes is the budget, whatever the GPU, the model or the token mix.

**Which refreshes count.** Never one with an input missing, nor one whose Ready replicas
changed within the last rate window (60 s): its rates were served by another fleet. A
miss while the fleet carried more than planned (``x > u``) is the forecast's, not the
capacity's, and is left to the forecaster's margin; a refresh that carried more than
planned *and* met the objective is direct evidence, and moves ``u`` halfway to ``x``. A
refresh within the objective in a lull (``x < u * (ready - 1) / ready``, more than one
replica's worth below plan) says nothing about the frontier and is skipped. No step
towards less headroom is taken while the queue grows, and none at all while a request
waits per Ready replica: saturation is measured as such (below), and its misses would
otherwise count twice.

**Saturation measures the capacity.** While at least one request waits per Ready replica
for 30 s, and the queue has not shrunk over it, every replica serves at its limit, so
``x`` is the capacity: ``ln s`` moves 20% of the way to ``ln x`` per such refresh, and
``u`` keeps its fraction of ``s`` (or falls to it). A backlog that drains is
no proof: it was queued on the replicas that were Ready when it arrived, while newer ones
may idle beside it. With no capacity configured, the first saturated refresh sets ``s``
and ``u = s * targetUtilization`` and the token signal turns on; until then the queue, the
floor and the last known demand hold.

**The KV cache measures it without saturation.** ``kv_cache_usage`` is how full a
replica's batch memory is, the resource decode runs out of; so, on a steady fleet without
a queue, ``x / kv_cache_usage`` is what one replica would serve with it full. From a usage
of 25% up, ``ln s`` moves 5% of the way there per refresh, ``u`` with it (its fraction of
``s`` is the TTFT's to set). vLLM's preset reads the fullest replica's usage, so with
uneven load this reads low: the conservative side. A replica bound by prefill rather than
memory reads high, and the misses that follow bring ``u`` back down.

*Example.* Configured 5,000 prompt and 432 generated tokens/s, ``targetUtilization`` 0.8,
and a replica that in truth serves half again as much at this token mix: ``u`` starts at
0.8. Six Ready replicas serve 18,000 prompt and 3,100 generated tokens/s, so
``x = (18000/5000 + 3100/432) / 6 = 1.80``; with none of the minute's first tokens over the
objective, that is more than planned and within it, so ``u`` moves halfway to 1.80, to
1.20. Refreshes near that plan then raise it by up to 1.2% each (doubling time 15 min)
until the share over the objective reaches 0.5%. The decision reports the capacities and
``calibrated over N refreshes``.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from scaler.config import TargetPolicy
from scaler.model import Capacity, Observation

DEFAULT_GENERATION_COST = 5.0  # prompt tokens one generated token costs, when nothing is configured


@dataclass(frozen=True, slots=True)
class CalibrationParams:
    """Tuning constants of the capacity calibration (module docstring), each explained by its comment."""

    budget: float = 0.005  # share of requests over the TTFT objective the calibration aims at
    doubling_time_s: float = 3600.0  # fastest rise of the usable load (towards less headroom)
    max_down_ratio: float = 30.0  # a miss may move u this many times faster than a pass
    window_s: float = 60.0  # the rate window: Ready replicas must be steady this long
    saturation_s: float = 30.0  # how long a queue per replica must last to count as saturation
    max_step_s: float = 60.0  # a refresh after a gap counts at most this long
    overload_weight: float = 0.2  # EWMA weight of an overloaded refresh in the capacity scale
    min_usable_fraction: float = 0.2  # u never falls below this share of the capacity scale
    first_doubling_time_s: float = 900.0  # the rise while the estimate rests on few refreshes
    settle_samples: int = 240  # refreshes over which the doubling time lengthens to its full value
    kv_weight: float = 0.05  # EWMA weight of a KV-usage reading in the capacity scale
    kv_min: float = 0.25  # the least KV usage a reading counts from (below, a few sequences are noise)
    min_samples: int = 8  # refreshes of evidence before the capacity is trusted to scale down on
    beyond_plan_weight: float = 0.5  # share of the way to x a refresh beyond plan and within it moves u
    enabled: bool = True


def share_over_objective(objective_s: float, p95: float, p99: float) -> float:
    """Estimated share of requests whose TTFT exceeds ``objective_s``, from the p95 and p99.

    An exponential tail through (p95, 5%) and (p99, 1%), extrapolated both ways.
    *Example*: p95 0.9 s, p99 1.5 s, objective 2 s: 0.05 * exp(-ln 5 * 1.1 / 0.6) = 0.26%.
    """
    if p99 <= p95:
        if objective_s > p99:
            return 0.0
        return 0.05 if objective_s <= p95 else 0.01
    rate = math.log(5.0) / (p99 - p95)
    return min(1.0, max(0.0, 0.05 * math.exp(-rate * (objective_s - p95))))


class CapacityCalibration:
    """Per-target calibration state. Deterministic: equal observations give equal state."""

    def __init__(self, policy: TargetPolicy, params: CalibrationParams | None = None) -> None:
        self.params = params or CalibrationParams()
        self._prior: tuple[float | None, float | None, float] | None = None
        self._ready_history: deque[tuple[float, int]] = deque()
        self._last_t: float | None = None
        self._last_waiting: float | None = None
        self._ttft_seen = False
        self._steady_good = False
        self.configure(policy)

    def configure(self, policy: TargetPolicy) -> None:
        """Set (or change) the prior; what was learned is kept when only other keys change."""
        prompt = policy.prompt_tokens_per_second_per_replica
        generation = policy.generation_tokens_per_second_per_replica
        prior = (prompt, generation, policy.target_utilization)
        self._objective = policy.ttft_objective_seconds
        if prior == self._prior:
            return
        self._prior = prior
        self._u0 = policy.target_utilization
        self._configured = prompt is not None or generation is not None
        if self._configured:
            self._p0, self._g0 = prompt, generation
        else:
            self._p0, self._g0 = 1.0, 1.0 / DEFAULT_GENERATION_COST
        self._ln_scale: float | None = 0.0 if self._configured else None
        self._ln_usable: float | None = math.log(self._u0) if self._configured else None
        self._samples = 0
        self._overloads = 0
        self._overload_since: float | None = None
        self._overload_waiting = 0.0
        self._proven = 0.0
        self._kv_samples = 0

    @property
    def uses_prompt(self) -> bool:
        """Whether the load counts prompt tokens (a prompt capacity is set, or no capacity at all)."""
        return self._p0 is not None

    @property
    def uses_generation(self) -> bool:
        """Whether the load counts generated tokens (a generation capacity is set, or none at all)."""
        return self._g0 is not None

    def load(self, prompt_rate: float, generation_rate: float) -> float:
        """Replicas of prior capacity these token rates take (the module docstring's load)."""
        busy = 0.0
        if self._p0:
            busy += prompt_rate / self._p0
        if self._g0:
            busy += generation_rate / self._g0
        return busy

    def capacity(self) -> Capacity:
        """The capacity the token signal uses now: uncalibrated, configured (the prior) or calibrated."""
        if self._ln_usable is None or self._ln_scale is None:
            prompt, generation = (self._p0, self._g0) if self._configured else (None, None)
            return Capacity(prompt, generation, self._u0, "uncalibrated")
        scale = math.exp(self._ln_scale)
        moved = self._samples or self._overloads or not self._configured
        return Capacity(
            None if self._p0 is None else self._p0 * scale,
            None if self._g0 is None else self._g0 * scale,
            min(1.0, math.exp(self._ln_usable - self._ln_scale)),
            "calibrated" if moved else "configured",
            self._samples,
            self._overloads,
        )

    @property
    def proven_load(self) -> float | None:
        """The largest per-replica load seen served within the objective (prior units), if any."""
        return self._proven or None

    @property
    def steady_within_objective(self) -> bool:
        """The last refresh met the objective with Ready replicas steady for a rate window."""
        return self._steady_good

    @property
    def settled(self) -> bool:
        """The capacity rests on evidence: a saturated minute measured it, or enough refreshes
        near the plan moved it. Without TTFT quantiles there is nothing to calibrate against:
        the prior is all there is, and it counts as settled.
        """
        return self._overloads > 0 or self._samples >= self.params.min_samples or not self._ttft_seen

    # ---- learning ---------------------------------------------------------------------

    def observe(self, obs: Observation) -> None:
        """Learn from one refresh's observation (call once per refresh, in time order)."""
        t = obs.timestamp
        if not self.params.enabled or (self._last_t is not None and t <= self._last_t):
            return
        dt = min(self.params.max_step_s, t - self._last_t) if self._last_t is not None else 0.0
        self._last_t = t
        self._steady_good = False
        ready, waiting = obs.ready_replicas, obs.queue_waiting
        rates_missing = (self.uses_prompt and obs.prompt_tokens_per_s is None) or (
            self.uses_generation and obs.generation_tokens_per_s is None
        )
        if ready is None or waiting is None or rates_missing or ready < 1:
            self._ready_history.clear()  # a gap: the window must fill again
            self._overload_since = None
            return
        previous_waiting, self._last_waiting = self._last_waiting, waiting
        steady = self._steady_ready(t, ready)
        x = self.load(obs.prompt_tokens_per_s or 0.0, obs.generation_tokens_per_s or 0.0) / ready
        self._saturation(t, steady, waiting >= ready, waiting, x)
        if steady and waiting < ready and obs.kv_cache_usage is not None:
            self._kv_measure(x, obs.kv_cache_usage)
        over = obs.ttft_over_objective
        if over is None and obs.ttft_p95_seconds is not None and obs.ttft_p99_seconds is not None:
            over = share_over_objective(self._objective, obs.ttft_p95_seconds, obs.ttft_p99_seconds)
        # Within the objective by the TTFT where it is known, else by the queue (fewer than
        # one request waiting per Ready replica).
        within = over <= self.params.budget if over is not None else waiting < ready
        self._steady_good = steady and within
        if self._steady_good:
            self._proven = max(self._proven, x)
        if over is None:
            return  # without the TTFT there is nothing to calibrate the usable load against
        self._ttft_seen = True
        if steady and x > 0 and self._ln_usable is not None and waiting < ready:
            growing = previous_waiting is not None and waiting > previous_waiting
            self._usable_evidence(x, ready, (self.params.budget - over) / self.params.budget, growing, dt)

    def _steady_ready(self, t: float, ready: int) -> bool:
        """True when the Ready replicas have been ``ready`` for the whole last rate window."""
        history = self._ready_history
        history.append((t, ready))
        while len(history) > 1 and history[1][0] <= t - self.params.window_s:
            history.popleft()
        covered = history[0][0] <= t - self.params.window_s
        return covered and all(r == ready for _, r in history)

    def _usable_evidence(self, x: float, ready: int, error: float, queue_growing: bool, dt: float) -> None:
        assert self._ln_usable is not None
        u = math.exp(self._ln_usable)
        if error >= 0 and queue_growing:
            return  # never less headroom while a queue grows
        if x > u:
            if error >= 0:  # more than planned, within the objective: direct evidence
                self._move_usable(self.params.beyond_plan_weight * (math.log(x) - self._ln_usable))
            return  # a miss beyond the plan is the forecast's, not the capacity's
        if error > 0 and x < u * (ready - 1) / ready:
            return  # a lull: far from the frontier, a refresh within the objective says nothing
        self._move_usable(self._step_rate(dt) * max(-self.params.max_down_ratio, min(1.0, error)))

    def _step_rate(self, dt: float) -> float:
        p = self.params
        early = max(0.0, 1.0 - self._samples / p.settle_samples)
        doubling = p.doubling_time_s - early * (p.doubling_time_s - p.first_doubling_time_s)
        return math.log(2.0) / doubling * dt

    def _move_usable(self, step: float) -> None:
        assert self._ln_usable is not None
        assert self._ln_scale is not None
        self._samples += 1
        floor = self._ln_scale + math.log(self.params.min_usable_fraction)
        self._ln_usable = max(floor, self._ln_usable + step)
        # The fleet served u per replica within the objective: the capacity is at least that.
        self._ln_scale = max(self._ln_scale, self._ln_usable)

    def _kv_measure(self, x: float, kv: float) -> None:
        """The KV cache's usage is how full the binding batch resource is: capacity ~ x / usage."""
        p = self.params
        if p.kv_weight <= 0 or kv < p.kv_min or x <= 0:
            return
        ln_s = math.log(x / kv)
        if self._ln_scale is None or self._ln_usable is None:
            self._ln_scale, self._ln_usable = ln_s, ln_s + math.log(self._u0)
            self._kv_samples += 1
            return
        step = p.kv_weight * (ln_s - self._ln_scale)
        self._ln_scale += step
        self._ln_usable += step  # the usable fraction stays what the TTFT made it
        self._kv_samples += 1

    def _saturation(self, t: float, steady: bool, queued: bool, waiting: float, x: float) -> None:
        """Measure the capacity once every Ready replica has had a queue for a whole rate window."""
        if not (queued and steady) or x <= 0:
            self._overload_since = None
            return
        if self._overload_since is None:
            self._overload_since, self._overload_waiting = t, waiting
            return
        if t - self._overload_since < self.params.saturation_s or waiting < self._overload_waiting:
            return
        ln_x = math.log(x)
        self._overloads += 1
        if self._ln_scale is None or self._ln_usable is None:
            self._ln_scale, self._ln_usable = ln_x, ln_x + math.log(self._u0)
            return
        fraction = self._ln_usable - self._ln_scale
        self._ln_scale += self.params.overload_weight * (ln_x - self._ln_scale)
        self._ln_usable = min(self._ln_usable, self._ln_scale + fraction)
