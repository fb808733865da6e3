"""The closed loop: one policy, one trace, one simulated fleet.

Requests are assigned in arrival order; between arrivals, control ticks (every ``tick_s``:
``drive``) show the policy what Kubernetes and Prometheus would show, and apply the replica
count it sets. ``ControlLoop`` holds one run's state and does the work of a request
(``send``) and of a tick (``tick``); ``run`` drives it. The series the fleet exports are
``scaler.replay.fleet.series``': token counters that advance when tokens are produced (prompt
tokens when a prefill completes, generated tokens spread over each request's decode), read
as Prometheus' ``rate(counter[1m])`` would read them; each first token observed into a
histogram with vLLM's ``time_to_first_token_seconds`` buckets, its p95 and p99 read as
``histogram_quantile`` over the last minute's bucket rates; each request's queue time (arrival
at the pod to first scheduled) and prefill time (first scheduled to first token) observed
when it ends, as vLLM observes them, and read as the rates of their histograms' ``_sum`` and
``_count`` over the last minute (unless the cluster model says the pods export none:
``phase_histograms: false``).

With ``router: llm-d`` in the cluster model, requests go through llm-d's flow control
(``scaler.replay.fleet.router``): the servers' histogram counts from the moment a request is sent,
the router's from its arrival, and the TTFT scored is the router's, what users saw.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from scaler.inputs import Input, Reading
from scaler.readings import Readings
from scaler.replay.fleet import kernel
from scaler.replay.fleet.cluster import Cluster, ClusterConfig, FleetView, ServingPod, StepCluster
from scaler.replay.fleet.router import FlowControlRouter
from scaler.replay.fleet.series import (
    ITL_BUCKETS,
    RATE_WINDOW_S,
    ColdStartWatch,
    Histogram,
    PhaseTimes,
    TokenCounters,
    Warmed,
    bins,
    fleet_inputs,
)
from scaler.replay.fleet.stepped import Request, Sink, StepPod
from scaler.replay.keda import PodSeries
from scaler.replay.policies import TickInputs
from scaler.replay.trace import Trace

WARMUP_S = 600.0
REPORT_EVERY = 10_000  # requests between two calls of a run's progress callback


class Policy(Protocol):
    """What a replay drives: a named replica policy, called at every control tick."""

    name: str
    min_replicas: int
    max_replicas: int

    def tick(self, tick: TickInputs) -> int | None:
        """The new spec.replicas, or None to leave it."""


@dataclass
class RunResult:
    """One policy's replay: each request's TTFT, the costs, and the replica counts per tick."""

    name: str
    ttft: NDArray[np.float64]
    arrivals: NDArray[np.float64]
    horizon_s: float
    gpu_seconds: float
    pending_pod_seconds: float
    scale_events: int
    peak_replicas: int
    wall_s: float
    tick_t: NDArray[np.float64]
    tick_spec: NDArray[np.int64]
    tick_ready: NDArray[np.int64]
    tick_pending: NDArray[np.int64]
    tick_gpus: NDArray[np.int64]
    extra: dict[str, float] = field(default_factory=dict)


def drive(
    arrivals: Sequence[float] | NDArray[np.float64],
    horizon: float,
    tick_s: float,
    tick: Callable[[float], None],
    arrive: Callable[[int], None],
) -> None:
    """Control ticks every ``tick_s`` from 0 to ``horizon``, between the arrivals in order: the ticks
    due by a request's arrival (at the same instant included) run before it arrives."""
    next_tick = 0.0
    for i, t in enumerate(arrivals):
        while next_tick <= t:
            tick(next_tick)
            next_tick += tick_s
        arrive(i)
    while next_tick <= horizon:
        tick(next_tick)
        next_tick += tick_s


def drive_batches(
    arrivals: NDArray[np.float64],
    horizon: float,
    tick_s: float,
    tick: Callable[[float], None],
    arrive: Callable[[int, int], None],
) -> None:
    """``drive``, the requests between two ticks handed over together: ``arrive(lo, hi)`` gets
    requests ``lo`` to ``hi``, which all arrive before the next tick is due, after every tick due by
    the first of them has run."""
    next_tick = 0.0
    i, n = 0, len(arrivals)
    while i < n:
        t = arrivals[i]
        while next_tick <= t:
            tick(next_tick)
            next_tick += tick_s
        j = int(np.searchsorted(arrivals, next_tick, side="left"))
        arrive(i, j)
        i = j
    while next_tick <= horizon:
        tick(next_tick)
        next_tick += tick_s


@dataclass
class Ticks:
    """What a replay records at each scored control tick: the time, spec.replicas, Ready and
    Pending pods, and the GPUs bound."""

    t: list[float] = field(default_factory=list)
    spec: list[int] = field(default_factory=list)
    ready: list[int] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    gpus: list[int] = field(default_factory=list)

    def record(self, t: float, spec: int, view: FleetView) -> None:
        """One tick at ``t`` (trace time)."""
        self.t.append(t)
        self.spec.append(spec)
        self.ready.append(view.ready)
        self.pending.append(view.pending)
        self.gpus.append(view.gpus_bound)


class ControlLoop(Sink):
    """One policy's replay of one trace: the fleet, the series it exports, the scale events and
    the ticks recorded. ``send`` hands it each request in arrival order, ``tick`` runs a control
    tick between them (``drive``), ``result`` sums it up. In the ``step`` physics the engines tell
    it what happens to each request as it happens (``Sink``); in the fluid ones each request's times
    are known when it is sent."""

    def __init__(
        self,
        trace: Trace,
        config: ClusterConfig,
        policy: Policy,
        start: datetime,
        initial_ready: int,
        tick_s: float,
        warmup_s: float,
        compiled: bool | None = None,
    ) -> None:
        self.trace, self.config, self.policy, self.start, self.tick_s = trace, config, policy, start, tick_s
        # The compiled loop serves the requests where it can (scaler.replay.fleet.kernel), unless told not to.
        self.compiled = kernel.COMPILED and kernel.supports(config) if compiled is None else compiled
        self.timeline = timeline = Warmed.of(trace, warmup_s, arrays=self.compiled)
        self.w = timeline.w
        self.horizon = timeline.horizon(max(trace.duration_s, tick_s))
        nbins = bins(self.horizon)
        self.tokens = TokenCounters(nbins)
        self.ttft = Histogram(nbins)  # as the servers measure it
        self.phases = PhaseTimes(nbins) if config.phase_histograms else None
        self.user_ttft = np.full(len(timeline.arrivals), math.inf, dtype=np.float64)  # inf: never served
        initial = max(policy.min_replicas, min(initial_ready, policy.max_replicas))
        self.stepped = config.physics == "step"
        self.cluster: Cluster | StepCluster | kernel.FastCluster
        if self.compiled:
            self.cluster = kernel.FastCluster(config, initial)
        else:
            self.cluster = StepCluster(config, initial, self) if self.stepped else Cluster(config, initial)
        # The step physics' inter-token latencies (vllm:inter_token_latency_seconds), and each pod's
        # busy seconds at the ticks of the last rate window (DCGM's utilisation).
        self.itl = Histogram(nbins, ITL_BUCKETS) if self.stepped else None
        self.pod_busy: dict[int, deque[tuple[float, float]]] = {}
        self.spec = len(self.cluster.active)
        # llm-d's endpoint picker with flow control in front of the pods, and its TTFT histogram.
        self.router = None
        if config.router == "llm-d":
            assert not isinstance(self.cluster, kernel.FastCluster)  # kernel.supports: no router
            self.router = FlowControlRouter(self.cluster, self.serve)
        self.router_ttft = Histogram(nbins) if self.router is not None else None
        # Each pod's prefill seconds assigned at the ticks of the last rate window: its prefill's rate.
        self.pod_prefill: dict[int, deque[tuple[float, float]]] = {}
        self.cold_start = ColdStartWatch()
        self.scale_events = 0
        self.peak = self.spec
        self.ticks = Ticks()
        self.gpu_at_start = self.pending_at_start = 0.0
        self.series = (
            kernel.Series(
                np.asarray(timeline.arrivals),
                np.asarray(timeline.prompts),
                np.asarray(timeline.outputs),
                self.user_ttft,
                self.ttft,
                self.phases,
                self.tokens,
            )
            if self.compiled
            else None
        )

    # ---- requests ------------------------------------------------------------------------

    def send(self, i: int) -> None:
        """Request ``i`` arrives: to a pod, or to the router in front of them."""
        t = self.timeline.arrivals[i]
        if self.router is None:
            self.serve(i, t)
        else:
            self.router.offer(i, t)

    def send_batch(self, lo: int, hi: int) -> None:
        """Requests ``lo`` to ``hi`` arrive, all before the next control tick: the compiled loop serves
        them (``scaler.replay.fleet.kernel``)."""
        assert isinstance(self.cluster, kernel.FastCluster)
        assert self.series is not None
        self.cluster.serve(lo, hi, self.series)

    def serve(self, i: int, sent: float) -> None:
        """Request ``i`` goes to a pod at ``sent``: its first token, the histograms, the token counters."""
        timeline = self.timeline
        prompt, output = timeline.prompts[i], timeline.outputs[i]
        cluster = self.cluster
        if isinstance(cluster, StepCluster):
            cluster.send(sent, i, prompt, output)  # what happens to it comes back as events (Sink)
            return
        assert isinstance(cluster, Cluster)  # the compiled loop's FastCluster serves in batches
        scheduled, first, end = cluster.assign(sent, prompt, output)
        if self.phases is not None:
            self.phases.observe(end, scheduled - sent, first - scheduled)
        user = self.user_ttft[i] = first - timeline.arrivals[i]  # as the user saw it
        row = self.ttft.row(first)
        self.ttft.observe(row, first - sent)  # as the server measures it (the same without a router)
        if self.router_ttft is not None:
            self.router_ttft.observe(row, user)
        self.tokens.prompt(first, prompt)
        self.tokens.generation(first, end, output - 1)

    # ---- the step physics' events (Sink) --------------------------------------------------

    def first_token(self, request: Request, t: float) -> None:
        """A first token, sampled at ``t``: the user's TTFT, the servers' and the router's histograms,
        the prompt tokens counted."""
        i = request.i
        user = self.user_ttft[i] = t - self.timeline.arrivals[i]
        row = self.ttft.row(t)
        self.ttft.observe(row, t - request.sent)
        if self.router_ttft is not None:
            self.router_ttft.observe(row, user)
        self.tokens.prompt(t, self.timeline.prompts[i])

    def finished(self, request: Request, t: float) -> None:
        """A request ended at ``t``: its queue and prefill times observed, as vLLM observes them."""
        if self.phases is not None and not math.isnan(request.first):
            self.phases.observe(t, request.scheduled - request.sent, request.first - request.scheduled)

    def generated(self, start: float, end: float, tokens: int, step_s: float) -> None:
        """Tokens decoded between ``start`` and ``end``: the generation counter, one inter-token latency
        each."""
        self.tokens.generation(start, end, tokens)
        if self.itl is not None:
            self.itl.observe_spread(start, end, step_s, tokens)

    # ---- control ticks -------------------------------------------------------------------

    def tick(self, t: float) -> None:
        """The control tick at ``t`` (simulation time): the policy reads the fleet and sets its replicas."""
        if t >= self.w > t - self.tick_s:  # the scored trace starts: GPU time counts from here
            self.cluster.advance(self.w)
            self.gpu_at_start, self.pending_at_start = (
                self.cluster.gpu_seconds,
                self.cluster.pending_pod_seconds,
            )
        if self.router is not None:
            self.router.release(t)
        if not self.timeline.watched(t):
            return
        view = self.cluster.view(t)
        tokens = self.tokens.rates(t)
        w = self.w
        inputs = TickInputs(
            t - w,
            self.start + timedelta(seconds=t - w),
            self.spec,
            view.replicas,
            partial(self.observe, t, view, tokens),
        )
        wanted = self.policy.tick(inputs)
        inputs.end()
        scaled = False
        if wanted is not None and wanted != self.spec:
            scaled = True
            self.cluster.scale_to(wanted, t)
            self.spec = wanted
            if t >= w:
                self.scale_events += 1
        if t < w:
            return
        self.peak = max(self.peak, self.spec)
        self.ticks.record(t - w, self.spec, self.cluster.view(t) if scaled else view)

    def observe(self, t: float, view: FleetView, tokens: tuple[float, float]) -> tuple[PodSeries, Readings]:
        """What Kubernetes and Prometheus would show at ``t``: the Deployment's pods, the servers'
        series (built only when the policy reads them: ``TickInputs``). ``tokens``: the prompt and
        generated tokens per second, as ``rate(...[1m])`` reads them."""
        cfg, router = self.config, self.router
        serving: Sequence[ServingPod | StepPod | kernel.FastPod]
        if isinstance(self.cluster, StepCluster):
            steps = serving = self.cluster.ready + self.cluster.draining
            waiting = [p.waiting(t) for p in steps]
            running = [p.running(t) for p in steps]
            kvs = [p.kv_usage(t) for p in steps]
            busy = sum(self.pod_busy_share(p, t) for p in steps)
        else:
            fluid: list[ServingPod | kernel.FastPod] = [*self.cluster.ready, *self.cluster.draining]
            serving = fluid
            waiting = [p.waiting(t) for p in fluid]
            running = [p.outstanding(t) - q for p, q in zip(fluid, waiting, strict=True)]
            kvs = [cfg.kv_cache_usage(r) for r in running]
            busy = cfg.busy_fraction(*tokens)
        window = self.ttft.window(t)
        # The KV cache's usage, the mean over the serving pods.
        kv = sum(kvs) / len(kvs) if kvs else None
        more = {
            **(self.phases.rates(window) if self.phases is not None else {}),
            **self.busiest(serving, running, kvs, t),
        }
        read = fleet_inputs(
            view,
            float(view.waiting),
            float(view.running),
            tokens,
            cfg.gpus_per_replica,
            self.cold_start.measure(self.cluster.ready_times),
            self.spec,
            self.ttft.sum_rate(window),
            more,
            kv,
        )
        histograms: dict[str, Mapping[float, float]] = {Reading.TTFT: self.ttft.buckets(window)}
        if self.itl is not None:
            histograms[Reading.ITL] = self.itl.buckets(window)
            read[Reading.ITL_SUM] = self.itl.sum_rate(window)
        if router is not None and self.router_ttft is not None:
            # llm-d's router: its queue, its pool saturation (no endpoint is ever stale here)
            # and its TTFT histogram, queue time included, as the live source reads them.
            read[Input.ROUTER_QUEUE_WAITING] = float(router.queued)
            read[Input.ROUTER_SATURATION] = router.saturation(t)
            read[Reading.ROUTER_STALE_ENDPOINTS] = 0.0
            histograms[Reading.ROUTER_TTFT] = self.router_ttft.buckets(window)
        series = PodSeries(
            waiting,
            running,
            busy,
            view.ready,
            cfg.gpus_per_replica,
            cfg.decode_slots,
            cfg.kv_cache_usage_full_batch,
            0 if router is None else router.queued,
            kvs if self.stepped else None,
        )
        return series, Readings(read, histograms)

    def pod_busy_share(self, pod: StepPod, t: float) -> float:
        """The share of the rate window ``pod``'s engine spent running steps (its GPUs' utilisation)."""
        history = self.pod_busy.setdefault(pod.index, deque())
        history.append((t, pod.engine.busy_s))
        while len(history) > 1 and history[1][0] <= t - RATE_WINDOW_S:
            history.popleft()
        then, before = history[0]
        return min(1.0, (pod.engine.busy_s - before) / (t - then)) if t > then else 0.0

    def pod_prefill_rate(self, pod: ServingPod | StepPod | kernel.FastPod, t: float) -> float:
        """Seconds of prefill per second assigned to ``pod`` over the rate window up to ``t``: the
        requests in prefill there on average (Little), above 1 where its prompts queue up."""
        history = self.pod_prefill.setdefault(pod.index, deque())
        history.append((t, pod.prefill_s))
        while len(history) > 1 and history[1][0] <= t - RATE_WINDOW_S:
            history.popleft()
        then, before = history[0]
        return (pod.prefill_s - before) / (t - then) if t > then else 0.0

    def busiest(
        self,
        serving: Sequence[ServingPod | StepPod | kernel.FastPod],
        running: list[int],
        kvs: list[float],
        t: float,
    ) -> dict[str, float]:
        """The busiest pod's running count and KV cache, and its prefill's rate (what ``max by`` pod
        of the gauges and of ``rate(vllm:request_prefill_time_seconds_sum[1m])`` reads)."""
        if not serving or not self.config.pod_maxima:
            return {}
        out: dict[str, float] = {
            Input.REQUESTS_RUNNING_MAX: float(max(running)),
            Input.KV_CACHE_USAGE_MAX: max(kvs),
        }
        if self.phases is not None:
            out[Reading.PREFILL_TIME_SUM_MAX] = max(self.pod_prefill_rate(p, t) for p in serving)
        return out

    # ---- the end -------------------------------------------------------------------------

    def result(self, began: float) -> RunResult:
        """The fleet run to the horizon, what the router still holds sent, and the run's figures
        (``began``: the wall clock's reading when it started, for ``wall_s``)."""
        cluster = self.cluster
        cluster.advance(self.horizon)
        gpu_seconds, pending_pod_seconds = cluster.gpu_seconds, cluster.pending_pod_seconds
        if self.router is not None:  # what the router still holds goes as the fleet left at the end frees
            self.router.release(math.inf)
        if isinstance(cluster, StepCluster):  # every request's first token, however late
            cluster.finish()
        ticks = self.ticks
        return RunResult(
            name=self.policy.name,
            ttft=self.user_ttft[self.timeline.skip :],
            arrivals=self.trace.arrivals,
            horizon_s=self.horizon - self.w,
            gpu_seconds=gpu_seconds - self.gpu_at_start,
            pending_pod_seconds=pending_pod_seconds - self.pending_at_start,
            scale_events=self.scale_events,
            peak_replicas=self.peak,
            wall_s=time.perf_counter() - began,
            tick_t=np.asarray(ticks.t),
            tick_spec=np.asarray(ticks.spec, dtype=np.int64),
            tick_ready=np.asarray(ticks.ready, dtype=np.int64),
            tick_pending=np.asarray(ticks.pending, dtype=np.int64),
            tick_gpus=np.asarray(ticks.gpus, dtype=np.int64),
        )


def run(
    trace: Trace,
    cluster_config: ClusterConfig,
    policy: Policy,
    start: datetime,
    initial_ready: int,
    tick_s: float = 5.0,
    progress: Callable[[int], None] | None = None,
    warmup_s: float = WARMUP_S,
    compiled: bool | None = None,
) -> RunResult:
    """Replay ``trace`` under ``policy``; ``start`` is the wall time of the trace's second 0.

    The trace's first ``warmup_s`` seconds are replayed once before it, unscored, so that
    every policy starts in the steady state the trace opens with (a server that has been
    running, a forecaster with history, an HPA with recommendations). Figures count the
    trace only: its requests, and GPU time from its second 0.
    """
    began = time.perf_counter()
    loop = ControlLoop(trace, cluster_config, policy, start, initial_ready, tick_s, warmup_s, compiled)
    if loop.compiled:

        def arrive_batch(lo: int, hi: int) -> None:
            loop.send_batch(lo, hi)
            if progress is not None and hi // REPORT_EVERY > lo // REPORT_EVERY:
                progress(REPORT_EVERY * (hi // REPORT_EVERY - lo // REPORT_EVERY))

        drive_batches(np.asarray(loop.timeline.arrivals), loop.horizon, tick_s, loop.tick, arrive_batch)
    else:

        def arrive(i: int) -> None:
            loop.send(i)
            if progress is not None and i % REPORT_EVERY == REPORT_EVERY - 1:
                progress(REPORT_EVERY)

        drive(loop.timeline.arrivals, loop.horizon, tick_s, loop.tick, arrive)
    result = loop.result(began)
    if progress is not None:
        progress(len(loop.timeline.arrivals) % REPORT_EVERY)
    return result
