"""The closed loop: one policy, one trace, one simulated fleet.

Requests are assigned in arrival order; between arrivals, control ticks (every
``tick_s``) show the policy what Kubernetes and Prometheus would show, and apply the
replica count it sets. Token counters advance when tokens are produced (prompt tokens
when a prefill completes, generated tokens spread over each request's decode), and
rates are read as Prometheus' ``rate(counter[1m])`` would read them. Each first token is
observed into a histogram with vLLM's ``time_to_first_token_seconds`` buckets, and its
p95 and p99 are read as ``histogram_quantile`` over the last minute's bucket rates. Each
request's queue time (arrival at the pod to first scheduled) and prefill time (first
scheduled to first token) are observed when it ends, as vLLM observes them, and read as the
rates of their histograms' ``_sum`` and ``_count`` over the last minute (unless the cluster
model says the pods export none: ``phase_histograms: false``).

With ``router: llm-d`` in the cluster model, requests go through llm-d's flow control
(``scaler.replay.router``): the servers' histogram counts from the moment a request is sent,
the router's from its arrival, and the TTFT scored is the router's, what users saw.
"""

from __future__ import annotations

import bisect
import math
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from scaler.coldstart import measure as measure_cold_start
from scaler.inputs import Input, Reading
from scaler.presets.engines import VLLM_TTFT_BUCKETS
from scaler.readings import Readings
from scaler.replay.cluster import Cluster, ClusterConfig, ServingPod
from scaler.replay.keda import PodSeries
from scaler.replay.policies import TickInputs
from scaler.replay.router import FlowControlRouter
from scaler.replay.trace import Trace

RATE_WINDOW_S = 60  # rate(...[1m])
WARMUP_S = 600.0
TTFT_BUCKETS = (*VLLM_TTFT_BUCKETS, math.inf)  # vLLM's vllm:time_to_first_token_seconds buckets, +Inf last
HIST_BIN_S = 5  # time resolution of the simulated TTFT histogram


def cumulative_buckets(counts: NDArray[np.int64], window_s: float) -> dict[float, float]:
    """Per-bucket counts over a window as ``sum(rate(..._bucket[window]))`` reads them: cumulative
    ``le`` rates, per second."""
    return dict(zip(TTFT_BUCKETS, (np.cumsum(counts) / window_s).tolist(), strict=True))


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


def run(  # noqa: PLR0915 - the hot loop keeps its state in local variables, for speed
    trace: Trace,
    cluster_config: ClusterConfig,
    policy: Policy,
    start: datetime,
    initial_ready: int,
    tick_s: float = 5.0,
    progress: Callable[[int], None] | None = None,
    warmup_s: float = WARMUP_S,
) -> RunResult:
    """Replay ``trace`` under ``policy``; ``start`` is the wall time of the trace's second 0.

    The trace's first ``warmup_s`` seconds are replayed once before it, unscored, so that
    every policy starts in the steady state the trace opens with (a server that has been
    running, a forecaster with history, an HPA with recommendations). Figures count the
    trace only: its requests, and GPU time from its second 0.
    """
    began = time.perf_counter()
    cfg = cluster_config
    pre = trace.window(0.0, warmup_s) if warmup_s > 0 else trace.window(0.0, 0.0)
    w = warmup_s if len(pre) else 0.0
    # Simulation time s = trace time + w: the warm-up copy occupies [0, w), the trace [w, ...).
    sim_arrivals = np.concatenate([pre.arrivals, trace.arrivals + w]).tolist()
    prompts = np.concatenate([pre.prompt_tokens, trace.prompt_tokens]).tolist()
    outputs = np.concatenate([pre.output_tokens, trace.output_tokens]).tolist()
    skip = len(pre)
    horizon = math.ceil(max(trace.duration_s, tick_s) / 60.0) * 60.0 + w
    # The token rates of the first minute's arrivals stand for the history before it.
    first_minute = slice(0, int(np.searchsorted(sim_arrivals, RATE_WINDOW_S)))
    history_prompt = sum(prompts[first_minute]) / RATE_WINDOW_S
    history_gen = sum(outputs[first_minute]) / RATE_WINDOW_S
    cluster = Cluster(cfg, max(policy.min_replicas, min(initial_ready, policy.max_replicas)))
    spec = len(cluster.active)
    assign = cluster.assign

    # Per-second token counters (prompt tokens added when a prefill ends; generation as a
    # rate difference array spread over each decode). Bins past the horizon are dropped.
    nbins = int(horizon) + 2
    prompt_bin = [0.0] * nbins
    gen_diff = [0.0] * nbins
    prompt_cum = [0.0] * (nbins + 1)
    gen_cum = [0.0] * (nbins + 1)
    done_bins = 0
    gen_rate_now = 0.0
    # First tokens per HIST_BIN_S and TTFT bucket: the histogram's increments over time.
    ttft_hist = np.zeros((nbins // HIST_BIN_S + 2, len(TTFT_BUCKETS)), dtype=np.int64)
    ttft_sums = np.zeros(len(ttft_hist), dtype=np.float64)  # the histogram's _sum, per bin
    last_hist = len(ttft_hist) - 1
    bucket_of = bisect.bisect_left
    ttft_all = np.full(len(sim_arrivals), math.inf, dtype=np.float64)  # inf: never served
    last_bin = nbins - 1
    # The phase-time histograms' _count and _sums per HIST_BIN_S, observed when a request ends.
    phases = cfg.phase_histograms
    phase_count = [0] * len(ttft_hist)
    queue_sum = [0.0] * len(ttft_hist)
    prefill_sum = [0.0] * len(ttft_hist)

    # Each pod's prefill seconds assigned at the ticks of the last rate window: its prefill's rate.
    pod_prefill: dict[int, deque[tuple[float, float]]] = {}

    def pod_prefill_rate(pod: ServingPod, t: float) -> float:
        """Seconds of prefill per second assigned to ``pod`` over the rate window up to ``t``: the
        requests in prefill there on average (Little), above 1 where its prompts queue up."""
        history = pod_prefill.setdefault(pod.index, deque())
        history.append((t, pod.prefill_s))
        while len(history) > 1 and history[1][0] <= t - RATE_WINDOW_S:
            history.popleft()
        then, before = history[0]
        return (pod.prefill_s - before) / (t - then) if t > then else 0.0

    def busiest(serving: list[ServingPod], running: list[int], t: float) -> dict[str, float]:
        """The busiest pod's running count and KV cache, and its prefill's rate (what ``max by`` pod
        of the gauges and of ``rate(vllm:request_prefill_time_seconds_sum[1m])`` reads)."""
        if not serving:
            return {}
        most = max(running)
        out: dict[str, float] = {
            Input.REQUESTS_RUNNING_MAX: float(most),
            Input.KV_CACHE_USAGE_MAX: cfg.kv_cache_usage(most),
        }
        if phases:
            out[Reading.PREFILL_TIME_SUM_MAX] = max(pod_prefill_rate(p, t) for p in serving)
        return out

    def phase_rates(first_bin: int, end_bin: int) -> dict[str, float]:
        """The phase-time histograms' ``_count`` and ``_sum`` rates over bins [first_bin, end_bin)
        (vllm:request_queue_time_seconds, vllm:request_prefill_time_seconds), as
        ``rate(..._sum[1m])`` reads them: per second of the rate window; none where the pods export
        none (``phase_histograms: false``)."""
        if not phases:
            return {}
        count = sum(phase_count[first_bin:end_bin]) / RATE_WINDOW_S
        return {
            Reading.QUEUE_TIME_COUNT: count,
            Reading.QUEUE_TIME_SUM: sum(queue_sum[first_bin:end_bin]) / RATE_WINDOW_S,
            Reading.PREFILL_TIME_COUNT: count,
            Reading.PREFILL_TIME_SUM: sum(prefill_sum[first_bin:end_bin]) / RATE_WINDOW_S,
        }

    def serve(i: int, sent: float) -> None:
        """Request ``i`` goes to a pod at ``sent``: its first token, the histograms, the token counters."""
        scheduled, first, end = assign(sent, prompts[i], outputs[i])
        if phases:
            ended = int(end) // HIST_BIN_S
            if ended > last_hist:  # noqa: PLR1730 - cheaper than min(), once per request
                ended = last_hist
            phase_count[ended] += 1
            queue_sum[ended] += scheduled - sent
            prefill_sum[ended] += first - scheduled
        ttft = first - sent  # as the server measures it
        ttft_all[i] = first - sim_arrivals[i]  # as the user saw it (the same without a router)
        hist_bin = min(int(first) // HIST_BIN_S, last_hist)
        ttft_hist[hist_bin, bucket_of(TTFT_BUCKETS, ttft)] += 1
        ttft_sums[hist_bin] += ttft
        if router is not None:
            router_hist[hist_bin, bucket_of(TTFT_BUCKETS, ttft_all[i])] += 1
        b = int(first)
        if b < last_bin:
            prompt_bin[b] += prompts[i]
            out = outputs[i] - 1
            if out > 0 and end > first:
                rate = out / (end - first)
                gen_diff[b] += rate
                e = int(end)
                if e < last_bin:
                    gen_diff[e] -= rate

    # llm-d's endpoint picker with flow control in front of the pods, and its TTFT histogram.
    router = FlowControlRouter(cluster, serve) if cfg.router == "llm-d" else None
    router_hist = np.zeros_like(ttft_hist) if router is not None else ttft_hist

    ticks_t: list[float] = []
    ticks_spec: list[int] = []
    ticks_ready: list[int] = []
    ticks_pending: list[int] = []
    ticks_gpus: list[int] = []
    scale_events = 0
    peak = spec
    # The measured cold start changes only when a pod becomes Ready: measured again then.
    cold_start_key: tuple[int, object] | None = None
    cold_start = measure_cold_start(())

    def integrate_to(second: int) -> None:
        nonlocal done_bins, gen_rate_now
        second = min(second, nbins)
        for k in range(done_bins, second):
            gen_rate_now += gen_diff[k]
            prompt_cum[k + 1] = prompt_cum[k] + prompt_bin[k]
            gen_cum[k + 1] = gen_cum[k] + gen_rate_now
        done_bins = max(done_bins, second)

    def control(t: float) -> None:
        nonlocal spec, scale_events, peak
        view = cluster.view(t)
        second = int(t)
        integrate_to(second)
        # rate(counter[1m]); before the simulation's first minute, Prometheus' history is
        # the steady state the warm-up opens with (history_prompt, history_gen tokens/s).
        window = min(RATE_WINDOW_S, second)
        before = RATE_WINDOW_S - window
        prompt_rate = (
            prompt_cum[second] - prompt_cum[second - window] + before * history_prompt
        ) / RATE_WINDOW_S
        gen_rate = max(0.0, gen_cum[second] - gen_cum[second - window] + before * history_gen) / RATE_WINDOW_S

        def observe() -> tuple[PodSeries, Readings]:
            """What Kubernetes and Prometheus would show now: the Deployment's pods, the servers'
            series (built only when the policy reads them: ``TickInputs``)."""
            nonlocal cold_start_key, cold_start
            serving = cluster.ready + cluster.draining
            waiting = [p.waiting(t) for p in serving]
            running = [p.outstanding(t) - q for p, q in zip(serving, waiting, strict=True)]
            hist_end = min(second // HIST_BIN_S, last_hist)
            hist_start = max(0, hist_end - RATE_WINDOW_S // HIST_BIN_S)
            window_counts = ttft_hist[hist_start:hist_end].sum(axis=0)
            ttft_window = cumulative_buckets(window_counts, RATE_WINDOW_S)
            ttft_sum_rate = float(ttft_sums[hist_start:hist_end].sum()) / RATE_WINDOW_S
            # The KV cache's usage, the mean over the serving pods (cluster model).
            kv = (
                min(1.0, sum(running) * cfg.kv_cache_usage_full_batch / (len(running) * cfg.decode_slots))
                if serving
                else None
            )
            ready_times = cluster.ready_times
            key = (len(ready_times), ready_times[-1] if ready_times else None)
            if key != cold_start_key:
                cold_start_key, cold_start = key, measure_cold_start(ready_times)
            read: dict[str, float] = {
                Input.QUEUE_WAITING: float(view.waiting),
                Input.REQUESTS_RUNNING: float(view.running),
                Input.PROMPT_TOKENS_PER_S: prompt_rate,
                Input.GENERATION_TOKENS_PER_S: gen_rate,
                Input.CURRENT_REPLICAS: view.replicas,
                Input.READY_REPLICAS: view.ready,
                Input.GPU_SCHEDULABLE_REPLICAS: max(0, view.gpus_free) // cfg.gpus_per_replica,
                Input.PENDING_REPLICAS: view.pending,
                Input.STARTING_REPLICAS: view.starting,
                Input.COLD_START_SAMPLES: cold_start.samples,
                Input.DEPLOYMENT_REPLICAS: spec,
                Reading.TTFT_SUM: ttft_sum_rate,
                **phase_rates(hist_start, hist_end),
                **busiest(serving, running, t),
            }
            for name, value in (
                (Input.KV_CACHE_USAGE, None if kv is None else min(1.0, kv)),
                (Input.COLD_START_SECONDS, cold_start.lead_p90_s),
                (Input.COLD_START_PENDING_SECONDS, cold_start.pending_p90_s),
            ):
                if value is not None:
                    read[name] = value
            histograms: dict[str, Mapping[float, float]] = {Reading.TTFT: ttft_window}
            if router is not None:
                # llm-d's router: its queue, its pool saturation (no endpoint is ever stale here)
                # and its TTFT histogram, queue time included, as the live source reads them.
                read[Input.ROUTER_QUEUE_WAITING] = float(router.queued)
                read[Input.ROUTER_SATURATION] = router.saturation(t)
                read[Reading.ROUTER_STALE_ENDPOINTS] = 0.0
                histograms[Reading.ROUTER_TTFT] = cumulative_buckets(
                    router_hist[hist_start:hist_end].sum(axis=0), RATE_WINDOW_S
                )
            pods = PodSeries(
                waiting,
                running,
                cfg.busy_fraction(prompt_rate, gen_rate),
                view.ready,
                cfg.gpus_per_replica,
                cfg.decode_slots,
                cfg.kv_cache_usage_full_batch,
                0 if router is None else router.queued,
            )
            return pods, Readings(read, histograms)

        inputs = TickInputs(t - w, start + timedelta(seconds=t - w), spec, view.replicas, observe)
        wanted = policy.tick(inputs)
        inputs.end()
        if wanted is not None and wanted != spec:
            cluster.scale_to(wanted, t)
            spec = wanted
            if t >= w:
                scale_events += 1
        if t < w:
            return
        peak = max(peak, spec)
        after = cluster.view(t)
        ticks_t.append(t - w)
        ticks_spec.append(spec)
        ticks_ready.append(after.ready)
        ticks_pending.append(after.pending)
        ticks_gpus.append(after.gpus_bound)

    next_tick = 0.0
    report_every = 10_000
    gpu_at_start = pending_at_start = 0.0
    for i in range(len(sim_arrivals)):
        t = sim_arrivals[i]
        while next_tick <= t:
            if next_tick >= w > next_tick - tick_s:
                cluster.advance(w)
                gpu_at_start, pending_at_start = cluster.gpu_seconds, cluster.pending_pod_seconds
            if router is not None:
                router.release(next_tick)
            control(next_tick)
            next_tick += tick_s
        if router is None:
            serve(i, t)
        else:
            router.offer(i, t)
        if progress is not None and i % report_every == report_every - 1:
            progress(report_every)
    while next_tick <= horizon:
        if next_tick >= w > next_tick - tick_s:
            cluster.advance(w)
            gpu_at_start, pending_at_start = cluster.gpu_seconds, cluster.pending_pod_seconds
        if router is not None:
            router.release(next_tick)
        control(next_tick)
        next_tick += tick_s
    cluster.advance(horizon)
    gpu_seconds, pending_pod_seconds = cluster.gpu_seconds, cluster.pending_pod_seconds
    if router is not None:  # what the router still holds goes as the fleet left at the end frees
        router.release(math.inf)
    if progress is not None:
        progress(len(sim_arrivals) % report_every)
    return RunResult(
        name=policy.name,
        ttft=ttft_all[skip:],
        arrivals=trace.arrivals,
        horizon_s=horizon - w,
        gpu_seconds=gpu_seconds - gpu_at_start,
        pending_pod_seconds=pending_pod_seconds - pending_at_start,
        scale_events=scale_events,
        peak_replicas=peak,
        wall_s=time.perf_counter() - began,
        tick_t=np.asarray(ticks_t),
        tick_spec=np.asarray(ticks_spec, dtype=np.int64),
        tick_ready=np.asarray(ticks_ready, dtype=np.int64),
        tick_pending=np.asarray(ticks_pending, dtype=np.int64),
        tick_gpus=np.asarray(ticks_gpus, dtype=np.int64),
    )
