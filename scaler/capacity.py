"""What one Ready replica holds (prefill rate, batch slots, decode slowdown), measured. Pure.

The load signal (``scaler.signals.load``) sizes two resources of a replica; each needs one
number per replica, which users rarely know and which changes with the model, the GPU, the
engine's settings and the traffic's sequence lengths. Both are measured at every refresh that
can show them; a configured value is only where they start.

**Batch slots** ``S``: the sequences one replica runs at once (vLLM's ``max_num_seqs``, or as
many as its KV cache holds at the traffic's sequence lengths). The KV cache's usage, averaged
over the replicas, says how full they are:

    S = running / ready / kv_cache_usage x u     while the cache is at least kv_min_usage used
    u = min(F, 0.8 behind llm-d's flow control)  F: the cache's usage with every batch full
                                                 (1 until seen); 0.8: the router sends a replica
                                                 nothing more once its cache is 80% used
                                                 (``scaler.flowcontrol``)
    S = running / ready                          without a KV gauge, while requests wait on
                                                 every replica (waiting >= ready): each is full;
                                                 or while a router (llm-d) reads its pool
                                                 saturated
    S = max_num_seqs                             where the stack exports it (Dynamo), or the KV
                                                 reading if that says fewer

``F`` is below 1 where the engine's ``max_num_seqs`` binds before the cache fills (a small model
on a large cache): a full batch leaves part of the cache unused, and without ``F`` the reading
would count slots the engine never opens. It is read where requests wait on every replica
(waiting >= ready: the batches are full) at two refreshes in a row (a one-refresh spike may
wait for anything), while the Ready replicas have been the same for a rate window and a time
in service (so that queues a scale-up left on the old replicas do not count) and the prompts
arrive slower than the replicas prefill them (else they wait for prefill, not for a slot):
``F`` moves toward the cache's usage then, by ``capacity_weight``. A refresh whose cache is
fuller than ``F`` shows a batch that held more, and raises ``F`` to it at once.

With the gauge the second reading is not taken (after a scale-up, queues left on the old
replicas make requests wait while the new ones are nearly empty), and neither is taken for a
time in service after Ready replicas were removed (their sequences still count as running).
Configured, ``generationTokensPerSecondPerReplica`` (``G``, decode tokens/s with a full batch)
gives the starting point ``S = G / (generation_tokens_per_s / running)``: a full batch over what
one sequence decodes now, read again at each refresh until a first measurement moves it.

**Prefill rate** ``P``: the prompt tokens per second one replica computes. The mean time to
first token measures it while no request waits for a slot: in the M/M/c model the load signal
sizes with (``scaler.queueing``), a mean prefill time ``s = prompt / P`` gives

    mean TTFT = s + C(N, served x s) x s / (N - served x s)

and the ``s`` that reproduces the measured mean (found by bisection: the right side grows with
``s``) gives ``P = prompt / s``: the replica's *effective* rate, with whatever slows first tokens
(chunked prefill sharing steps with decode, scheduling, tokenisation) in it. Configured,
``promptTokensPerSecondPerReplica`` is where it starts.

**Decode slowdown** ``beta``: where prefill and decode share a replica's forward passes (vLLM's
chunked prefill), a sequence decodes slower while prompts are computed; where they do not, it
does not. Which one a replica is, and how much, is read from the refreshes:

    decoding  = running - served x mean TTFT          sequences past their first token (Little)
    r         = generation_tokens_per_s / decoding    tokens/s each decodes
    f         = prompt_tokens_per_s / (ready x P)     the share of a replica prefill keeps busy
    r         = r0 x (1 - beta x f)                   least squares over the refreshes, beta in [0, 1]

``beta`` 0: decode does not notice prefill; 1: prefill and decode add as GPU time (a replica
busy 30% on prompts decodes at 70% speed). The fit is an exponential average over
``learning_time_constant_s``, used once ``f`` has varied by ``fit_min_spread``.

**Inter-token latency**, with ``itlObjectiveSeconds`` set: a decode step serves every sequence
in the batch, so the gap between two tokens grows with the batch a replica runs. A line is fitted
the same way,

    itl_mean = a + c x                       x = running / ready / S, the share of slots in use

with the ratio of the ITL at the objective's percentile to its mean averaged beside it; the
slots the objective allows a replica are ``S x (itlObjectiveSeconds / ratio - a) / c`` (at most
``S``, at least 1; none while ``c`` is not above 0), and the load signal sizes the slots on
those. *Example*: 20 ms plus 40 ms at a full batch of 64, a p99 1.5 times the mean, a 60 ms
objective: ``64 x (0.040 - 0.020) / 0.040 = 32`` sequences per replica.

Each reading moves the estimate by ``capacity_weight`` of the way in log space (the first one
sets it when nothing is configured); readings need the inputs they read and, for the rates,
Ready replicas unchanged for a rate window (``rate_window_s``).

*Example*: 4 Ready replicas serve 6 requests/s of 1,000 prompt tokens each, nobody waits, and
the mean TTFT is 0.30 s. ``s = 0.25`` gives ``0.25 + C(4, 1.5) x 0.25 / 2.5 = 0.25 + 0.075 x 0.1 =
0.257``, too little; ``s = 0.286`` gives ``0.286 + C(4, 1.72) x 0.286 / 2.28 = 0.286 + 0.11 x 0.125
= 0.30``: the replica prefills ``1,000 / 0.286 = 3,500`` tokens/s. A KV cache 50% used on
average while 12 sequences run per replica: 24 slots. Where 24 sequences a replica were seen
filling 60% of the cache with requests waiting on every replica (``F = 0.6``), the same 12
sequences at 30% still read 24, not 40.
"""

from __future__ import annotations

import math

from scaler.config import TargetPolicy
from scaler.demand import Demand
from scaler.flowcontrol import KV_CACHE_UTIL_THRESHOLD
from scaler.model import Capacity, CapacitySource, Observation
from scaler.params import DEFAULT, DeciderParams
from scaler.queueing import erlang_c


def service_time(
    mean_ttft_s: float, served_per_s: float, replicas: int, steps: int = DEFAULT.bisection_steps
) -> float | None:
    """The mean prefill time ``s`` that gives ``mean_ttft_s`` in the M/M/c model (module docstring)."""
    if mean_ttft_s <= 0 or served_per_s <= 0 or replicas < 1:
        return None
    high = min(mean_ttft_s, replicas / served_per_s)
    low = 0.0
    for _ in range(steps):
        s = 0.5 * (low + high)
        load = served_per_s * s
        mean = s + erlang_c(replicas, load) * s / (replicas - load) if load < replicas else math.inf
        if mean > mean_ttft_s:
            high = s
        else:
            low = s
    return 0.5 * (low + high) if low > 0 else None


class _Estimate:
    """One per-replica figure: a configured start, moved in log space by each measurement."""

    __slots__ = ("configured", "ln", "samples")

    def __init__(self, configured: float | None) -> None:
        self.configured = configured
        self.ln = None if configured is None else math.log(configured)
        self.samples = 0

    def measure(self, value: float, weight: float) -> None:
        if not (value > 0 and math.isfinite(value)):
            return
        ln = math.log(value)
        self.ln = ln if self.ln is None else self.ln + weight * (ln - self.ln)
        self.samples += 1

    @property
    def value(self) -> float | None:
        if self.ln is None:
            return None
        return self.configured if not self.samples and self.configured is not None else math.exp(self.ln)

    @property
    def source(self) -> CapacitySource:
        if self.samples:
            return "measured"
        return "configured" if self.ln is not None else "unknown"


class _Line:
    """An exponentially weighted least-squares fit of ``y = intercept + slope x``."""

    __slots__ = ("n", "samples", "x", "xx", "xy", "y")

    def __init__(self) -> None:
        self.n = self.x = self.y = self.xx = self.xy = 0.0
        self.samples = 0

    def add(self, x: float, y: float, weight: float) -> None:
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
        if var < min_spread**2:
            return None
        slope = (self.xy / self.n - mean_x * mean_y) / var
        return mean_y - slope * mean_x, slope


def slowdown(line: _Line, min_spread: float) -> float | None:
    """``beta`` of ``r = r0 (1 - beta f)`` from the fitted line of ``r`` on ``f``, in [0, 1]."""
    fitted = line.fit(min_spread)
    if fitted is None or fitted[0] <= 0:
        return None
    r0, slope = fitted
    return max(0.0, min(1.0, -slope / r0))


class CapacityModel:
    """Per-target estimates of a replica's prefill rate and batch slots. Deterministic."""

    def __init__(self, policy: TargetPolicy, params: DeciderParams = DEFAULT) -> None:
        self.params = params
        self._configured: tuple[float | None, float | None] | None = None
        self._ready_since: tuple[int, float] | None = None  # (ready, since when)
        self._waited = True  # a request waited at the previous refresh (or none was seen yet)
        self._slowdown = _Line()  # decode speed per sequence on prefill's busy share
        self._itl = _Line()  # mean inter-token latency on the share of slots in use
        self._itl_tail: float | None = None  # ITL at the objective's percentile over its mean
        self._last_t: float | None = None
        self._steady = False
        self._shrunk_at: float | None = None
        # The KV cache's mean usage when the replicas' batches are full (None: not seen; taken as 1).
        self._kv_full: float | None = None
        self._full_before = False  # requests waited on every replica at the previous refresh
        self.configure(policy)

    def configure(self, policy: TargetPolicy) -> None:
        """Set (or change) the configured starting points; measurements are kept unless they change."""
        self._itl_objective = policy.itl_objective_seconds
        configured = (
            policy.prompt_tokens_per_second_per_replica,
            policy.generation_tokens_per_second_per_replica,
        )
        if configured == self._configured:
            return
        self._configured = configured
        self._prefill = _Estimate(configured[0])
        self._slots = _Estimate(None)
        self._generation = configured[1]

    def itl_slots(self) -> float | None:
        """The sequences per replica whose inter-token latency meets ``itlObjectiveSeconds`` at the
        objective's percentile (module docstring), or None: no objective, or no line fitted yet,
        or a latency that does not grow with the batch."""
        fitted = self._itl.fit(self.params.fit_min_spread)
        slots = self._slots.value
        if self._itl_objective is None or fitted is None or not slots or self._itl_tail is None:
            return None
        intercept, slope = fitted
        if slope <= 0:
            return None
        share = (self._itl_objective / self._itl_tail - intercept) / slope
        return max(1.0, min(slots, share * slots))

    @property
    def steady(self) -> bool:
        """The Ready replicas have not changed for a rate window: the rates were served by them."""
        return self._steady

    def capacity(self) -> Capacity:
        """The capacities the load signal uses now."""
        return Capacity(
            self._prefill.value,
            self._slots.value,
            self._prefill.source,
            self._slots.source,
            self._prefill.samples,
            self._slots.samples,
            slowdown(self._slowdown, self.params.fit_min_spread),
            self.itl_slots(),
        )

    def _learn_kv_full(
        self, obs: Observation, demand: Demand, ready: int, running: float, waiting: float
    ) -> None:
        """The KV cache's usage with every batch full (module docstring): read where requests wait on
        every replica at two refreshes in a row, of a settled fleet whose prefill keeps up; raised
        at once wherever the cache is seen fuller."""
        kv = obs.kv_cache_usage
        full, full_before = waiting >= ready, self._full_before
        self._full_before = full
        if kv is None or not running or self._ready_since is None:
            return
        if self._kv_full is not None and kv > self._kv_full:
            self._kv_full = min(1.0, kv)  # a batch ran with this much of the cache: it holds more
            return
        settled = obs.timestamp - self._ready_since[1] >= max(
            self.params.rate_window_s, demand.time_in_service_s or 0.0
        )
        p, prompt_rate = self._prefill.value, obs.prompt_tokens_per_s
        prefill_keeps_up = not (p and prompt_rate is not None and prompt_rate >= ready * p)
        if full and full_before and settled and prefill_keeps_up and kv > 0:
            old = self._kv_full
            kv = min(1.0, kv)
            self._kv_full = kv if old is None else old + self.params.capacity_weight * (kv - old)

    def _slot_readings(self, obs: Observation, ready: int, running: float, waiting: float) -> list[float]:
        """This refresh's readings of the batch slots per replica (module docstring)."""
        kv, saturation = obs.kv_cache_usage, obs.router_saturation
        readings = [obs.slots_per_replica] if obs.slots_per_replica else []
        if not running:
            return readings
        if saturation is not None and saturation >= 1.0:
            # A router that stops dispatching at saturation says every replica holds all it
            # will be given.
            readings.append(running / ready)
        elif kv is not None:
            # The KV cache's mean usage over the replicas says how full they are. Behind llm-d's
            # flow control (its saturation is read) a replica is sent requests only while its
            # cache is below the router's threshold: it holds that share of what the cache does.
            # Where the engine's max_num_seqs binds first, a full batch leaves part of the cache
            # unused: the share it uses then, learned, scales the reading the same way.
            gate = KV_CACHE_UTIL_THRESHOLD if saturation is not None else 1.0
            if kv >= self.params.kv_min_usage:
                readings.append(running / ready / kv * min(gate, self._kv_full or 1.0))
        elif waiting >= ready:
            # Without it, requests waiting on every replica say they are full. (With it, that
            # reading would be fooled by queues left on a few replicas after a scale-up.)
            readings.append(running / ready)
        return readings

    def observe(self, obs: Observation, demand: Demand) -> None:
        """Learn from one refresh (call once per refresh, in time order)."""
        t, ready, running = obs.timestamp, obs.ready_replicas, obs.requests_running
        waiting = obs.queue_waiting
        if ready is None or ready < 1:
            self._ready_since, self._steady = None, False
            return
        if self._ready_since is not None and ready < self._ready_since[0]:
            self._shrunk_at = t
        if self._ready_since is None or self._ready_since[0] != ready:
            self._ready_since = (ready, t)
        steady = self._steady = t - self._ready_since[1] >= self.params.rate_window_s
        weight = self.params.capacity_weight
        waited, self._waited = self._waited, bool(waiting)
        # After a scale-down the removed replicas still run what they hold, for up to a time in
        # service: their sequences count in running, but they are no longer Ready.
        drained = self._shrunk_at is None or t - self._shrunk_at > (demand.time_in_service_s or 0.0)
        if running is not None and waiting is not None and drained:
            self._learn_kv_full(obs, demand, ready, running, waiting)
            readings = self._slot_readings(obs, ready, running, waiting)
            if readings:
                # An exported max_num_seqs is the most a replica runs; the cache may hold fewer.
                self._slots.measure(min(readings), weight)
            if not self._slots.samples and self._generation and obs.generation_tokens_per_s and running:
                # Nothing measured yet: a configured decode rate per replica over a sequence's
                # latest (the start a first measurement moves from).
                self._slots.ln = math.log(self._generation * running / obs.generation_tokens_per_s)
        # Prefill: the mean TTFT while nobody waits for a slot, on a steady fleet.
        if (
            steady
            and waiting == 0
            and not waited
            and obs.ttft_mean_seconds is not None
            and demand.served_per_s
            and demand.prompt_tokens_per_request
        ):
            s = service_time(obs.ttft_mean_seconds, demand.served_per_s, ready, self.params.bisection_steps)
            if s is not None:
                self._prefill.measure(demand.prompt_tokens_per_request / s, weight)
        # Decode slowdown: decode speed per sequence against the share prefill keeps busy.
        last, self._last_t = self._last_t, t
        p = self._prefill.value
        served, mean = demand.served_per_s, obs.ttft_mean_seconds
        g, prompt_rate = obs.generation_tokens_per_s, obs.prompt_tokens_per_s
        if (
            steady
            and waiting == 0
            and p
            and served
            and mean is not None
            and running
            and g
            and prompt_rate is not None
        ):
            decoding = running - served * mean
            if decoding > 0.5:
                w = 1.0 if last is None else min(1.0, (t - last) / self.params.learning_time_constant_s)
                self._slowdown.add(prompt_rate / (ready * p), g / decoding, w)
        self._learn_itl(obs, last)

    def _learn_itl(self, obs: Observation, last: float | None) -> None:
        """The inter-token latency against the share of a replica's slots in use (module docstring)."""
        mean, tail, slots = obs.itl_mean_seconds, obs.itl_tail_seconds, self._slots.value
        ready, running = obs.ready_replicas, obs.requests_running
        if not (mean and slots and ready and running) or not self._steady:
            return
        t = obs.timestamp
        w = 1.0 if last is None else min(1.0, (t - last) / self.params.learning_time_constant_s)
        self._itl.add(running / ready / slots, mean, w)
        if tail is not None:
            ratio, old = tail / mean, self._itl_tail
            self._itl_tail = ratio if old is None else old + w * (ratio - old)
