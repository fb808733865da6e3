"""The closed loop on a disaggregated fleet (``scaler.replay.fleet.disagg``): two policies, one trace.

The prefill pool and the decode pool each run their own policy, at the same control ticks, on
the same arrivals: the one of ``role: prefill`` sees the prefill pool's series, the one of
``role: decode`` the decode pool's, as each ScaledObject's queries would select them
(``scaler.roles``). The series are ``scaler.replay.fleet.series``', as the replay reads a fleet's: counters
as Prometheus' ``rate(counter[1m])``, first tokens into vLLM's TTFT histogram, the trace's first
``warmup_s`` seconds replayed once before it, unscored.

The clairvoyant reference knows every request: per pool a replica count per minute, from the GPU
time the minute's requests take in that pool (prompt seconds; decode slot-seconds over the
slots), grown by one replica in every minute where fewer than ``attainment_goal`` of the requests
met the objective, in the pool whose waits held that minute's late requests longer, until the
trace meets the goal. Each replica is ordered exactly one cold start ahead
(``ClairvoyantPolicy``).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial

import numpy as np
from numpy.typing import NDArray

from scaler.inputs import Reading
from scaler.readings import Readings
from scaler.replay.compare import BUCKET_S
from scaler.replay.fleet.disagg import ROLES, DisaggConfig, Pool, PoolView, busy_per_bucket, kv_usage
from scaler.replay.fleet.series import ColdStartWatch, Histogram, TokenCounters, Warmed, bins, fleet_inputs
from scaler.replay.keda import ExternalTrigger, PodSeries, ScaledObjectModel
from scaler.replay.policies import ClairvoyantPolicy, TickInputs
from scaler.replay.replay import WARMUP_S, Policy, drive
from scaler.replay.trace import Trace


class PoolSeries:
    """One pool's token counters and first-token histogram (``scaler.replay.fleet.series``), read over the
    last minute as ``rate(...[1m])`` reads them."""

    def __init__(self, nbins: int) -> None:
        self.tokens = TokenCounters(nbins)
        self.ttft = Histogram(nbins)

    def first_token(self, t: float, ttft: float) -> None:
        """A first token at ``t``, ``ttft`` after the request arrived."""
        self.ttft.observe(self.ttft.row(t), ttft)

    def read(self, t: float) -> tuple[tuple[float, float], dict[float, float], float]:
        """At ``t``: the prompt and generated tokens per second, the TTFT buckets' rates and the
        rate of the histogram's sum, each over the last minute."""
        window = self.ttft.window(t)
        return self.tokens.rates(t), self.ttft.buckets(window), self.ttft.sum_rate(window)


@dataclass
class PoolResult:
    """One pool's replay: its GPU time, scale changes, peak, and each request's wait in it."""

    role: str
    gpu_seconds: float
    pending_pod_seconds: float
    scale_events: int
    peak_replicas: int
    wait: NDArray[np.float64]  # per request: prefill queue, or the wait for a decode slot
    tick_spec: list[int] = field(default_factory=list)


@dataclass
class DisaggResult:
    """Both pools under their policies: each request's TTFT, and each pool's result."""

    name: str
    ttft: NDArray[np.float64]
    horizon_s: float
    pools: dict[str, PoolResult]
    wall_s: float

    @property
    def gpu_seconds(self) -> float:
        """Both pools' GPU-seconds."""
        return sum(p.gpu_seconds for p in self.pools.values())


class _Loop:
    """The state of one run (``run_disagg``): the pools, their series, the requests in flight."""

    def __init__(
        self,
        trace: Trace,
        config: DisaggConfig,
        policies: Mapping[str, Policy],
        start: datetime,
        initial: Mapping[str, int],
        warmup_s: float,
    ) -> None:
        self.timeline = timeline = Warmed.of(trace, warmup_s)
        self.w, self.skip = timeline.w, timeline.skip
        self.arrivals, self.prompts, self.outputs = timeline.arrivals, timeline.prompts, timeline.outputs
        self.config, self.policies, self.start = config, policies, start
        n = len(self.arrivals)
        self.horizon = timeline.horizon(max(trace.duration_s, 1.0))
        nbins = bins(self.horizon)
        self.series = {
            "prefill": PoolSeries(nbins),
            "decode": PoolSeries(nbins),
        }
        self.pools = {
            role: Pool(
                config,
                role,
                max(policies[role].min_replicas, min(initial[role], policies[role].max_replicas)),
            )
            for role in ROLES
        }
        self.spec = {role: len(self.pools[role].active) for role in ROLES}
        self.events = dict.fromkeys(ROLES, 0)
        self.peak = dict(self.spec)
        self.ticks: dict[str, list[int]] = {role: [] for role in ROLES}
        self.cold = {role: ColdStartWatch() for role in ROLES}
        self.ttft = np.empty(n, dtype=np.float64)
        self.waits = {role: np.zeros(n, dtype=np.float64) for role in ROLES}
        self.transfers: list[tuple[float, int]] = []  # heap: (KV at the decode pool, request)
        self.gpu_at_start = dict.fromkeys(ROLES, 0.0)
        self.pending_at_start = dict.fromkeys(ROLES, 0.0)

    def arrive(self, i: int) -> None:
        """Request ``i`` enters the prefill pool; its KV leaves for the decode pool when done."""
        t, prompt = self.arrivals[i], self.prompts[i]
        began, done = self.pools["prefill"].prefill(t, prompt)
        self.waits["prefill"][i] = began - t
        self.series["prefill"].tokens.prompt(done, prompt)
        self.series["prefill"].first_token(done, done - t)
        heapq.heappush(self.transfers, (done + self.config.transfer_s(prompt), i))

    def decode_until(self, t: float) -> None:
        """Every KV that reached the decode pool by ``t`` takes a decode slot, in arrival order."""
        series = self.series["decode"]
        while self.transfers and self.transfers[0][0] <= t:
            at, i = heapq.heappop(self.transfers)
            admitted, end = self.pools["decode"].decode(at, self.outputs[i])
            ttft = self.ttft[i] = admitted - self.arrivals[i]
            self.waits["decode"][i] = admitted - at
            series.tokens.prompt(admitted, self.prompts[i])
            series.first_token(admitted, ttft)
            series.tokens.generation(admitted, end, self.outputs[i] - 1)

    def _observed(
        self,
        role: str,
        view: PoolView,
        tokens: tuple[float, float],
        buckets: Mapping[float, float],
        sums: float,
    ) -> tuple[PodSeries, Readings]:
        """What Kubernetes and Prometheus would show of ``role``'s pool, as the live source reads
        them (built only when its policy reads them: ``TickInputs``)."""
        cfg = self.config.cluster
        pool = self.pools[role]
        prompt, gen = tokens
        busy = prompt / cfg.prefill_tokens_per_s if role == "prefill" else gen / cfg.decode_tokens_per_s
        kv = kv_usage(view, pool.slots_per_pod) if role == "decode" else None
        read = fleet_inputs(
            view,
            float(sum(view.waiting)),
            float(sum(view.running)),
            tokens,
            cfg.gpus_per_replica,
            self.cold[role].cold_start,
            self.spec[role],
            sums,
            {},
            kv,
        )
        slots = pool.slots_per_pod
        pods = PodSeries(view.waiting, view.running, busy, view.ready, cfg.gpus_per_replica, slots)
        return pods, Readings(read, {Reading.TTFT: buckets})

    def control(self, t: float, tick_s: float) -> None:
        """One control tick at ``t``: each pool's policy reads its pool's series and sets its replicas."""
        self.decode_until(t)
        if t >= self.w > t - tick_s:  # the scored trace starts: GPU time counts from here
            for role, pool in self.pools.items():
                pool.advance(self.w)
                self.gpu_at_start[role], self.pending_at_start[role] = (
                    pool.gpu_seconds,
                    pool.pending_pod_seconds,
                )
        if not self.timeline.watched(t):
            return
        for role, pool in self.pools.items():
            view = pool.view(t)
            tokens, buckets, sums = self.series[role].read(t)
            self.cold[role].measure(pool.ready_times)
            inputs = TickInputs(
                t - self.w,
                self.start + timedelta(seconds=t - self.w),
                self.spec[role],
                view.replicas,
                partial(self._observed, role, view, tokens, buckets, sums),
            )
            wanted = self.policies[role].tick(inputs)
            inputs.end()
            if wanted is not None and wanted != self.spec[role]:
                pool.scale_to(wanted, t)
                self.spec[role] = wanted
                self.events[role] += t >= self.w
            if t >= self.w:
                self.peak[role] = max(self.peak[role], self.spec[role])
                self.ticks[role].append(self.spec[role])


def run_disagg(
    trace: Trace,
    config: DisaggConfig,
    policies: Mapping[str, Policy],
    start: datetime,
    initial: Mapping[str, int],
    name: str,
    tick_s: float = 5.0,
    warmup_s: float = WARMUP_S,
) -> DisaggResult:
    """Replay ``trace`` on the disaggregated fleet, ``policies[role]`` scaling each pool (docstring)."""
    began = time.perf_counter()
    loop = _Loop(trace, config, policies, start, initial, warmup_s)

    def arrive(i: int) -> None:
        loop.decode_until(loop.arrivals[i])
        loop.arrive(i)

    drive(loop.arrivals, loop.horizon, tick_s, partial(loop.control, tick_s=tick_s), arrive)
    pools = {}
    for role, pool in loop.pools.items():
        pool.advance(loop.horizon)
        pools[role] = PoolResult(
            role,
            pool.gpu_seconds - loop.gpu_at_start[role],
            pool.pending_pod_seconds - loop.pending_at_start[role],
            loop.events[role],
            loop.peak[role],
            loop.waits[role][loop.skip :],
            loop.ticks[role],
        )
    loop.decode_until(math.inf)  # the requests still in prefill or transfer at the end
    return DisaggResult(
        name, loop.ttft[loop.skip :], loop.horizon - loop.w, pools, time.perf_counter() - began
    )


@dataclass(frozen=True)
class DisaggSearch:
    """The clairvoyant schedules found, per pool, and how the search ended."""

    schedules: dict[str, tuple[int, ...]]
    iterations: int
    attainment: float
    goal_met: bool


def clairvoyant_disagg(
    trace: Trace,
    config: DisaggConfig,
    start: datetime,
    objective_s: float,
    min_replicas: int,
    max_replicas: int,
    attainment_goal: float = 0.995,
    max_iterations: int = 24,
) -> tuple[DisaggResult, DisaggSearch]:
    """The clairvoyant reference on the disaggregated fleet (module docstring)."""
    cfg = config.cluster
    busy = busy_per_bucket(trace, cfg, BUCKET_S)
    cap = {role: min(max_replicas, config.gpus(role) // cfg.gpus_per_replica) for role in ROLES}
    need = {
        role: np.clip(np.ceil(np.asarray(busy[role]) - 1e-9), min_replicas, cap[role]).astype(np.int64)
        for role in ROLES
    }
    buckets = (trace.arrivals // BUCKET_S).astype(np.int64)
    size = len(need["prefill"])
    best: tuple[DisaggResult, DisaggSearch] | None = None
    for iteration in range(1, max_iterations + 1):
        policies = {
            role: ClairvoyantPolicy(
                f"clairvoyant {role}", need[role].tolist(), BUCKET_S, cfg.cold_start_s, min_replicas
            )
            for role in ROLES
        }
        initial = {role: policies[role].target(0.0) for role in ROLES}
        result = run_disagg(trace, config, policies, start, initial, "clairvoyant")
        ok = result.ttft <= objective_s
        attainment = float(ok.mean()) if len(ok) else 1.0
        schedules = {role: tuple(need[role].tolist()) for role in ROLES}
        best = (result, DisaggSearch(schedules, iteration, attainment, attainment >= attainment_goal))
        if attainment >= attainment_goal:
            break
        total = np.bincount(buckets, minlength=size)
        good = np.bincount(buckets, weights=ok.astype(np.float64), minlength=size)
        short = good < attainment_goal * total
        late = (~ok).astype(np.float64)
        held = {
            role: np.bincount(buckets, weights=late * result.pools[role].wait, minlength=size)
            for role in ROLES
        }
        prefill_first = held["prefill"] >= held["decode"]
        grow_p = short & prefill_first & (need["prefill"] < cap["prefill"])
        grow_d = short & ~grow_p & (need["decode"] < cap["decode"])
        if not (grow_p.any() or grow_d.any()):
            break
        need["prefill"] = need["prefill"] + grow_p
        need["decode"] = need["decode"] + grow_d
    assert best is not None
    return best


def role_scaledobject(so: ScaledObjectModel, role: str, **metadata: str) -> ScaledObjectModel:
    """``so`` scaling the pool of ``role``: its external trigger's metadata with ``role`` (and any
    other keys given) set; ValueError when it has no external trigger."""
    external = so.external
    if external is None:
        raise ValueError(f"{so.name} has no external trigger of this scaler to give a role")
    changed = ExternalTrigger(external.name, {**external.metadata, "role": role, **metadata})
    triggers = tuple(changed if t is external else t for t in so.triggers)
    renamed = dataclasses.replace(so.scaledobject, name=f"{so.name}-{role}")
    return dataclasses.replace(so, scaledobject=renamed, triggers=triggers)
