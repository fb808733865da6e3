"""Run this scaler, a KEDA baseline, the clairvoyant reference and a static pool over one trace.

The clairvoyant reference knows every future request. Its schedule is a replica count
per minute: it starts from the GPU time the minute's requests take (``ceil(busy)``,
full utilisation), replays, and adds one replica to every minute in which fewer than
``attainment_goal`` of the requests met the TTFT objective, until the whole trace
meets the goal (or no minute can grow: max replicas or GPUs). It orders each replica
exactly one cold start before its minute and keeps it while it is needed within the
next cold start, so it never waits on a cold start and never holds an idle replica
longer than that: the cheapest schedule found that meets the objective, the reference
the other policies' GPU-hours are divided by.

**Static at peak** is the pool sized once and held: the clairvoyant's largest per-minute replica
count over the span (the replicas its busiest minute needs to meet the objective, as its search
found them), Ready from the first second to the last. It is the reference published results
compare with (a fleet provisioned for its peak), beside the clairvoyant's lower bound.

Every policy starts with the same Ready replicas, the reference's need over the first
cold start (clamped to each policy's bounds), as if the service had been running. The
policies' replays are independent of each other: on a long trace they run in parallel, one
process each (``workers_for``), with the same results as one after the other.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from scaler.replay.fleet.cluster import ClusterConfig
from scaler.replay.fleet.stepped import PROFILES, request_seconds
from scaler.replay.held import held_gpu_seconds
from scaler.replay.keda import KEDA_VERSION, KedaVersion, ScaledObjectModel
from scaler.replay.policies import ClairvoyantPolicy, KedaPolicy, Outage
from scaler.replay.progress import Progress
from scaler.replay.replay import WARMUP_S, RunResult, run
from scaler.replay.trace import Trace

BUCKET_S = 60.0
CLAIRVOYANT = "clairvoyant"
STATIC = "static at peak"
PARALLEL_MIN_REQUESTS = 100_000  # below this, starting a process costs more than it saves


@dataclass(frozen=True)
class ClairvoyantSearch:
    """The clairvoyant schedule found: replicas per minute, iterations, attainment, goal met; and
    per minute what the demand alone needs (the schedule where it is above minReplicas, else the
    minute's busy replicas rounded up, at least 1), against which its floor's hours are counted."""

    schedule: tuple[int, ...]
    iterations: int
    attainment: float
    goal_met: bool
    demand: tuple[int, ...] = ()

    @property
    def peak(self) -> int:
        """The most replicas any minute of the schedule needs: the static pool's size."""
        return max(self.schedule, default=1)


def busy_per_bucket(trace: Trace, cfg: ClusterConfig, bucket_s: float = BUCKET_S) -> np.ndarray:
    """Replicas the requests arriving in each bucket keep busy (fractional), under the physics.

    ``shared``: GPU seconds, prefill plus decode at a full batch. ``separate``: the tighter
    of prefill seconds and batch-slot seconds (prefill plus decode at the sequence's own
    rate) over ``decode_slots``. ``step``: each request's tokens at the profile's rates, the steps'
    base shared by an unbounded batch (``scaler.replay.fleet.stepped.request_seconds``). Queueing is left
    out, so it is a lower bound on the need.
    """
    if len(trace) == 0:
        return np.zeros(1)
    buckets = (trace.arrivals // bucket_s).astype(np.int64)
    size = int(buckets[-1]) + 1
    if cfg.physics == "step":
        seconds = request_seconds(
            PROFILES[cfg.profile], trace.prompt_tokens.tolist(), trace.output_tokens.tolist()
        )
        return np.bincount(buckets, weights=np.asarray(seconds), minlength=size) / bucket_s
    prefill = trace.prompt_tokens / cfg.prefill_tokens_per_s
    if cfg.physics == "shared":
        work = prefill + trace.output_tokens / cfg.decode_tokens_per_s
        return np.bincount(buckets, weights=work, minlength=size) / bucket_s
    slot_seconds = prefill + np.maximum(0, trace.output_tokens - 1) / cfg.decode_tokens_per_s_per_seq
    prefill_busy = np.bincount(buckets, weights=prefill, minlength=size)
    slots_busy = np.bincount(buckets, weights=slot_seconds, minlength=size) / cfg.decode_slots
    return np.maximum(prefill_busy, slots_busy) / bucket_s


def within(ttft: np.ndarray, objective_s: float) -> np.ndarray:
    """Per request, whether its TTFT met the objective."""
    return ttft <= objective_s


def clairvoyant(
    trace: Trace,
    cfg: ClusterConfig,
    start: datetime,
    objective_s: float,
    min_replicas: int,
    max_replicas: int,
    attainment_goal: float = 0.995,
    max_iterations: int = 12,
    progress: Progress | None = None,
) -> tuple[RunResult, ClairvoyantSearch]:
    """Replay the clairvoyant reference, growing its schedule until it meets the goal (module docstring)."""
    cap = min(max_replicas, cfg.max_replicas_on_gpus)
    busy = busy_per_bucket(trace, cfg)
    raw = np.clip(np.ceil(busy - 1e-9), 1, max(1, cap)).astype(np.int64)
    need = np.clip(raw, min_replicas, cap).astype(np.int64)
    buckets = (trace.arrivals // BUCKET_S).astype(np.int64)
    best: tuple[RunResult, ClairvoyantSearch] | None = None
    for iteration in range(1, max_iterations + 1):
        demand = np.where(need > min_replicas, need, np.minimum(raw, need))
        policy = ClairvoyantPolicy(
            CLAIRVOYANT, need.tolist(), BUCKET_S, cfg.cold_start_s, min_replicas, demand.tolist()
        )
        initial = policy.target(0.0)
        stage = (
            None
            if progress is None
            else progress.stage(f"the clairvoyant's schedule, pass {iteration}", replayed(trace))
        )
        result = run(trace, cfg, policy, start, initial, progress=stage)
        result.extra.update(held_gpu_seconds(policy.held_log, result, cfg.gpus_per_replica))
        ok = within(result.ttft, objective_s)
        attainment = float(ok.mean()) if len(ok) else 1.0
        best = (
            result,
            ClairvoyantSearch(
                tuple(need.tolist()),
                iteration,
                attainment,
                attainment >= attainment_goal,
                tuple(demand.tolist()),
            ),
        )
        if attainment >= attainment_goal:
            break
        size = len(need)
        total = np.bincount(buckets, minlength=size)
        good = np.bincount(buckets, weights=ok.astype(np.float64), minlength=size)
        short = (good < attainment_goal * total) & (need < cap)
        if not short.any():
            break
        need = need + short.astype(np.int64)
    assert best is not None
    return best


def initial_ready(search: ClairvoyantSearch, lead_s: float) -> int:
    """Ready replicas every policy starts with: the reference's need over the first ``lead_s``."""
    policy = ClairvoyantPolicy("initial", search.schedule, BUCKET_S, lead_s, 1)
    return policy.target(0.0)


def run_policy(
    policy: KedaPolicy,
    trace: Trace,
    cfg: ClusterConfig,
    start: datetime,
    initial: int,
    progress: Callable[[int], None] | None = None,
    reference_floor: int | None = None,
) -> RunResult:
    """Replay the trace under ``policy`` (a ScaledObject as KEDA and the HPA run it:
    ``KedaPolicy(name, so)``), with the GPU-seconds its floor and pre-warm windows held in ``extra``
    (``scaler.replay.held``; ``reference_floor``: the clairvoyant's minReplicas; None, the policy's own)."""
    result = run(trace, cfg, policy, start, initial, progress=progress)
    result.extra.update(held_gpu_seconds(policy.held_log, result, cfg.gpus_per_replica, reference_floor))
    result.extra.update(policy.keda_figures())
    return result


def static_at_peak(
    trace: Trace,
    cfg: ClusterConfig,
    start: datetime,
    search: ClairvoyantSearch,
    progress: Callable[[int], None] | None = None,
) -> RunResult:
    """Replay the static pool: ``search.peak`` replicas Ready for the whole span (module docstring)."""
    return held_at(trace, cfg, start, search.peak, STATIC, progress)


def held_at(
    trace: Trace,
    cfg: ClusterConfig,
    start: datetime,
    replicas: int,
    name: str,
    progress: Callable[[int], None] | None = None,
) -> RunResult:
    """Replay ``replicas`` Ready for the whole span, the policy named ``name``."""
    policy = ClairvoyantPolicy(name, [replicas], BUCKET_S, cfg.cold_start_s, replicas)
    return run(trace, cfg, policy, start, replicas, progress=progress)


@dataclass
class Comparison:
    """One comparison: the runs (the clairvoyant last), the clairvoyant search, the objective, and
    the static pool at the clairvoyant's peak (None when not run)."""

    results: list[RunResult]
    search: ClairvoyantSearch
    objective_s: float
    static: RunResult | None = None

    @property
    def runs(self) -> list[RunResult]:
        """Every run: the policies, the clairvoyant, then the static pool."""
        return [*self.results, *([] if self.static is None else [self.static])]


def workers_for(requests: int, policies: int) -> int:
    """Processes to replay ``policies`` on a trace of ``requests``: one per policy, as many as the
    CPUs this process may use, on traces long enough to pay for starting them; else 1."""
    if requests < PARALLEL_MIN_REQUESTS:
        return 1
    return max(1, min(policies, len(os.sched_getaffinity(0))))


def replayed(trace: Trace) -> int:
    """Requests one replay of ``trace`` runs: the trace's and its warm-up copy's (``replay.run``)."""
    return len(trace) + int(np.searchsorted(trace.arrivals, WARMUP_S))


def compare(
    trace: Trace,
    cfg: ClusterConfig,
    start: datetime,
    policies: Sequence[tuple[str, ScaledObjectModel]],
    objective_s: float,
    reference_bounds: tuple[int, int],
    progress: Progress | None = None,
    workers: int = 1,
    static: bool = True,
    keda_version: KedaVersion = KEDA_VERSION,
    outages: Sequence[Outage] = (),
) -> Comparison:
    """Replay each ScaledObject, the clairvoyant reference and (``static``) the static pool at its
    peak from the same Ready replicas; with ``workers`` > 1, the ScaledObjects in that many
    processes while this one replays the static pool (progress then moves per policy). Each pass
    is a stage of ``progress``. Each ScaledObject runs under KEDA ``keda_version``, this scaler's
    Prometheus holding nothing in ``outages`` (``KedaPolicy``)."""
    reference, search = clairvoyant(
        trace, cfg, start, objective_s, reference_bounds[0], reference_bounds[1], progress=progress
    )
    initial = initial_ready(search, cfg.cold_start_s)
    size = replayed(trace)
    floor = reference_bounds[0]  # the clairvoyant's minReplicas: a floor above it is the policy's own

    def stage(what: str, total: int = size) -> Callable[[int], None] | None:
        return None if progress is None else progress.stage(what, total)

    names = " and ".join(name for name, _ in policies)

    def keda(name: str, so: ScaledObjectModel) -> KedaPolicy:
        return KedaPolicy(name, so, keda_version=keda_version, outages=outages)

    if workers <= 1 or len(policies) <= 1:
        results = [
            run_policy(keda(name, so), trace, cfg, start, initial, stage(name), floor)
            for name, so in policies
        ]
        fixed = None
        if static:
            fixed = static_at_peak(trace, cfg, start, search, stage(f"{STATIC}, {search.peak} replicas"))
        return Comparison([*results, reference], search, objective_s, fixed)
    # spawn, not fork: the caller may hold threads (a gRPC server, a Prometheus client) whose locks
    # a forked child would inherit held.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(min(workers, len(policies)), mp_context=context) as pool:
        futures = [
            pool.submit(run_policy, keda(name, so), trace, cfg, start, initial, None, floor)
            for name, so in policies
        ]
        fixed = None
        if static:  # meanwhile, in this process
            what = f"{STATIC}, {search.peak} replicas, while {names} replay in {len(futures)} processes"
            fixed = static_at_peak(trace, cfg, start, search, stage(what))
        pooled = stage(f"{names}, in {len(futures)} processes", size * len(futures))
        results = []
        for future in futures:
            results.append(future.result())
            if pooled is not None:
                pooled(size)
    return Comparison([*results, reference], search, objective_s, fixed)
