"""Decision-quality benchmark: this scaler in four serving models, two cluster physics and four capacity conditions.

    nice .venv/bin/python benchmarks/decision_quality.py             # every trace and serving model, both physics, 3 seeds
    nice .venv/bin/python benchmarks/decision_quality.py --quick     # seed 0, serving models pooled and random
    nice .venv/bin/python benchmarks/decision_quality.py --quick --serving pooled  # issue 20's quick run
    nice .venv/bin/python benchmarks/decision_quality.py --ablation  # each mechanism off in turn, 3 seeds
    nice .venv/bin/python benchmarks/decision_quality.py --quick --kv-full 0.6  # max_num_seqs binds first
    nice .venv/bin/python benchmarks/decision_quality.py --quick --ablation --hours servegen=6 decode=6  # shorter days

For each trace, seed, physics (``shared``: prefill and decode add as GPU time; ``separate``: two
resources, the tighter binds; docs/replay.md) and serving model (SERVING: how a request's pod is
picked and what the servers count as waiting; docs/replay.md, "Serving models"), on the fleet of
benchmarks/cluster-70b.yaml with a GPU limit that binds at the trace's peak (the GPUs the
clairvoyant reference needs at its busiest minute with no limit), it replays:

* this scaler (benchmarks/scaledobject-70b.yaml), one configuration for all, under four
  capacity conditions: the capacities configured right, twice too high, half too low, and
  not configured at all;
* the published KEDA configuration (benchmarks/baseline-published.yaml);
* the clairvoyant reference, the denominator of every GPU-hours ratio, and the same
  schedule with less and more headroom (one and two replicas fewer and more in every
  minute): the clairvoyant's frontier, on which "x at equal attainment" reads what the
  clairvoyant would spend to attain as much as the policy did (``<``/``>``: beyond the
  frontier's ends, read at the nearest).

Serving models (``--serving`` picks some; by default the first four, with ``--quick`` ``pooled`` and
``random``):

* ``pooled``: least-outstanding dispatch, a request waiting until it holds a batch slot (the
  replay's model before issue 28, the one the decider was built in);
* ``v1``: least-outstanding dispatch (a router that reads the queues, as llm-d's EPP does),
  waiting as vLLM V1 counts it: until its prefill starts;
* ``random``: a Kubernetes Service (a pod at random per request), waiting as vLLM V1;
* ``round-robin``: each Ready pod in turn, waiting as vLLM V1;
* ``v1-no-phases`` (not run unless named): ``v1`` without the queue- and prefill-time
  histograms, a stack that exports none (the decider's fallback);
* ``random-sums`` (not run unless named): ``random`` read as the fleet's sums only, neither the
  phase times nor the busiest pod (every fallback at once).

Every pod exports vLLM's phase-time histograms (queue and prefill time) unless the serving model
says not. The random dispatch's seed is the cell's seed.

Traces: the Azure 2023 conversation trace (real requests; one hour, the same for every seed);
the first 24 hours of the ServeGen rate trace (arrivals drawn by a Poisson process per seed,
constant in each 10-minute window, sizes from the Azure trace, rates scaled so their 14-day
mean is the Azure trace's); a synthetic bursty trace of 6 hours (bursts of 60-150 s at 3.5
times the mean, shorter than the 180 s cold start, every 7-23 minutes); and two of our own
(``DECODE_HEAVY``, ``LONG_PROMPT``): a ServeGen day's shape with lognormal sizes, reasoning-style
(prompts around 1.3k and outputs around 1.5k tokens) and long-prompt (prompts of 10k-32k tokens,
whose service sets a TTFT objective of 8 s). Then the README's example ScaledObject on the Azure
trace with the replay's default cluster.

**Estimates beside the truth.** The replay knows a replica's prefill rate (``prefill_tokens_per_s``)
and batch slots (``decode_slots``); each cell prints, per capacity condition, the capacity the
scaler's decisions recorded (``Decision.capacity``: configured or measured) 15 minutes after its
first refresh (a rate window into the warm-up) and at the end, each with its source and its ratio
to the truth, and beside them the scale the measured objective sized the fleet at
(``forecast.capacity_scale``, ``scaler.decider.calibration``): how hard a replica was loaded, not
an estimate of what it holds, so not graded against the truth.

``--kv-full F`` replays a fleet whose KV cache is only ``F`` used when every batch slot is busy
(the cluster key ``kv_cache_usage_full_batch``): ``max_num_seqs`` binds before the cache fills,
as on a small model with a large cache. The default, 1, is a fleet the KV cache bounds.

Targets (issues 28 and 35), in every cell, each printed beside its figure, ``MISSED`` where it is
not met:

* capacities 2x too high, half too low and not configured: within 1 point and 0.05x of
  configured right;
* the prefill rate and the batch slots the decisions recorded within 15% of the replay's truth 15
  minutes after traffic starts, in every condition;
* Azure and ServeGen: at least 99.5% within the objective at no more than 1.10x the
  clairvoyant's GPU-hours;
* decode-heavy: at least 99.5% at no more than 1.15x, TTFT p99 within twice the objective;
* long-prompt: within 1 point of the clairvoyant's attainment at no more than 1.15x;
* bursty: within 2 points of the clairvoyant's attainment at no more than 1.5x;
* scale changes at most twice the clairvoyant's;
* capacities right: GPU-hours at equal attainment (x) at or below the reference policy's, and on
  decode-heavy traffic at or below the published KEDA configuration's.

The run exits non-zero when any target is missed.

``--ablation`` turns each mechanism of the decider off in turn, one run on one code version: every
trace, seed, physics and serving model, with capacities right and not configured, the change
against the whole decider printed per trace and per serving model. The mechanisms are ABLATIONS,
each a decider stage removed (``scaler.decider.stages``) or a constant that empties it.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import multiprocessing
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks.harness import add_kv_full, cell_record, target_lines, trace_parser  # noqa: E402
from scaler.hpa import Behavior  # noqa: E402
from scaler.model import Capacity  # noqa: E402
from scaler.replay.compare import (  # noqa: E402
    BUCKET_S,
    CLAIRVOYANT,
    STATIC,
    clairvoyant,
    initial_ready,
    run_policy,
    static_at_peak,
)
from scaler.replay.fleet.cluster import FLUID, PHYSICS, ClusterConfig  # noqa: E402
from scaler.replay.fleet.stepped import PROFILES, saturation  # noqa: E402
from scaler.replay.keda import ExternalTrigger, ScaledObjectModel, load_scaledobject_model  # noqa: E402
from scaler.replay.policies import ClairvoyantPolicy, KedaPolicy  # noqa: E402
from scaler.replay.reference import ReferenceDecider  # noqa: E402
from scaler.replay.replay import run  # noqa: E402
from scaler.replay.report import References, all_figures, figures  # noqa: E402
from scaler.replay.trace import Trace, bursty_rates, expand_rates, load_rates, load_requests  # noqa: E402

START = datetime.fromisoformat("2026-12-07T00:00:00+08:00")  # a Monday, midnight in Asia/Shanghai
AZURE = HERE / "traces" / "azure2023_conv.csv"
SERVEGEN = HERE / "traces" / "servegen_language_m-large_rate_10min.csv"
EXAMPLE = HERE.parent / "scaler" / "examples" / "scaledobject.yaml"
CAPACITY_KEYS = ("promptTokensPerSecondPerReplica", "generationTokensPerSecondPerReplica")
CONDITIONS: tuple[tuple[str, float | None], ...] = (
    ("right", 1.0),
    ("2x too high", 2.0),
    ("half too low", 0.5),
    ("not configured", None),
)
TRACES = ("azure", "servegen", "bursty", "decode", "longprompt")
HOURS = {"azure": 1.0, "servegen": 24.0, "bursty": 6.0, "decode": 24.0, "longprompt": 24.0}
# The two traces of our own: a daily shape from another ServeGen day each, and token sizes drawn
# from lognormal distributions (median, log-space sigma, bounds).
DECODE_HEAVY: dict[str, Any] = {
    "day": 1,
    "mean_rate": 1.3,
    "prompt": (1300, 0.4, 200, 4096),
    "output": (1500, 0.5, 100, 8192),
}
LONG_PROMPT: dict[str, Any] = {
    "day": 4,
    "mean_rate": 0.8,
    "prompt": (14000, 0.35, 10000, 32000),
    "output": (300, 0.6, 20, 2000),
}
# The TTFT objective per trace: 2 s, but for the long-prompt service, whose 32k-token prompts
# alone take 6.4 s to prefill on this fleet.
OBJECTIVES = {"longprompt": 8.0}
HEADROOM = (-2, -1, 1, 2)  # replicas added to every minute of the clairvoyant's schedule: its frontier


# The serving models (module docstring): the cluster keys each sets (docs/replay.md, "Serving models").
SERVING: dict[str, dict[str, Any]] = {
    "pooled": {"dispatch": "least-outstanding", "waiting": "slot"},
    "v1": {"dispatch": "least-outstanding", "waiting": "prefill"},
    "random": {"dispatch": "random", "waiting": "prefill"},
    "round-robin": {"dispatch": "round-robin", "waiting": "prefill"},
    "v1-no-phases": {"dispatch": "least-outstanding", "waiting": "prefill", "phase_histograms": False},
    # A Service in front of servers read as the fleet's sums only: no phase times, no busiest pod.
    "random-sums": {
        "dispatch": "random",
        "waiting": "prefill",
        "phase_histograms": False,
        "pod_maxima": False,
    },
}
SERVING_RUN = ("pooled", "v1", "random", "round-robin")  # what a run without --serving replays
# --quick without --serving: the model the decider was built in (its figures are the run before
# issue 28's) and the farthest from it (a Service: no pooling, no view of the load). Every
# serving model at seed 0 would cost twice as long.
SERVING_QUICK = ("pooled", "random")
# The step physics' replica (scaler.replay.fleet.stepped.PROFILES): Llama 3 70B on four A100s, whose traffic
# loads a fleet of the fluid replica's size; decode-heavy traffic at STEP_RATE times its rate there
# (the replica decodes about three times what the fluid 70B replica does).
STEP_PROFILE = "llama-3-70b-4xa100"
REFERENCE_NAME = "reference"  # the reference policy's row (scaler.replay.reference)
STEP_RATE = {"decode": 3.0}
# Requests a step-physics truth is read from (scaler.replay.fleet.stepped.saturation): enough for the sizes'
# spread, few enough to run in a second.
SATURATION_SAMPLE = 2000
PHYSICS_RUN = ("shared", "separate", "step")  # the physics a run replays: the two fluid ones and step
# The capacity the decisions recorded is read this long after the first refresh, a rate window into the
# warm-up (scaler.replay.fleet.series): issue 28's "within 15% of the truth 15 minutes after traffic
# starts", a minute later.
ESTIMATE_AFTER_S = 900.0


def cell_trace(cell: Cell) -> Trace:
    """The cell's trace: its trace and seed at the cell's rate, and at STEP_RATE in the step physics."""
    rate = cell.rate * (STEP_RATE.get(cell.trace, 1.0) if cell.physics == "step" else 1.0)
    return load_trace(cell.trace, cell.seed, cell.hours, rate)


def objective(trace: str) -> float:
    """The TTFT objective the trace's service holds (OBJECTIVES, else 2 s)."""
    return OBJECTIVES.get(trace, 2.0)


def without_capacities(so: ScaledObjectModel) -> ScaledObjectModel:
    """The ScaledObject with its capacity keys deleted."""
    external = so.external
    assert external is not None
    metadata = {k: v for k, v in external.metadata.items() if k not in CAPACITY_KEYS}
    triggers = tuple(ExternalTrigger(t.name, metadata) if t is external else t for t in so.triggers)
    return dataclasses.replace(so, triggers=triggers)


def lognormal_sizes(
    rng: np.random.Generator, count: int, median: float, sigma: float, low: int, high: int
) -> np.ndarray:
    """``count`` token sizes from a lognormal of ``median`` and log-space ``sigma``, within bounds."""
    return np.clip(np.round(median * np.exp(sigma * rng.standard_normal(count))), low, high).astype(np.int64)


def synthetic_trace(spec: dict[str, Any], seed: int, hours: float, name: str) -> Trace:
    """A ServeGen day's shape at ``mean_rate``, with lognormal token sizes (the dictionaries above).

    The 10-minute rates are averages of a traffic that changes continuously, so the request
    rate is interpolated linearly between the windows' midpoints (a step at every window edge
    would be an artifact of the trace's resolution), and arrivals are a Poisson process of
    that rate, second by second.
    """
    rates = load_rates(SERVEGEN)
    day = rates.sliced(spec["day"] * 86400, spec["day"] * 86400 + hours * 3600)
    day = day.scaled(spec["mean_rate"] / float(day.rates.mean()))
    seconds = np.arange(0.0, day.duration_s)
    rate = np.interp(seconds + 0.5, day.starts + day.window_s / 2, day.rates)
    rng = np.random.default_rng(1000 + seed)
    counts = rng.poisson(rate)
    arrivals = np.sort(np.repeat(seconds, counts) + rng.random(int(counts.sum())))
    prompt = lognormal_sizes(rng, len(arrivals), *spec["prompt"])
    output = lognormal_sizes(rng, len(arrivals), *spec["output"])
    note = (
        f"ServeGen m-large day {spec['day']}'s shape at {spec['mean_rate']:g} requests/s on average (seed {seed},"
        f" rates interpolated between windows); prompts lognormal median {spec['prompt'][0]}, outputs median"
        f" {spec['output'][0]} tokens"
    )
    return Trace(arrivals, prompt, output, name, note)


@functools.lru_cache(maxsize=4)
def load_trace(name: str, seed: int, hours: float | None = None, rate: float = 1.0) -> Trace:
    """One of TRACES for ``seed``, ``hours`` long (default: HOURS), at ``rate`` times its mean rate
    (the Azure trace: that many copies of it, each shifted by its length over the copies, wrapped)."""
    hours = HOURS[name] if hours is None else hours
    sizes = load_requests(AZURE)
    mean_rate = len(sizes) / sizes.duration_s
    if name == "azure":
        return sizes if rate == 1.0 else overlaid(sizes, round(rate))
    if name == "servegen":
        rates = load_rates(SERVEGEN)
        factor = rate * mean_rate / float(rates.rates.mean())
        trace = expand_rates(rates.scaled(factor).sliced(0, hours * 3600), sizes, seed)
        note = f"{trace.note}; rates x{factor:.5f} (14-day mean = the Azure trace's mean rate); first {hours:g} h"
        return dataclasses.replace(trace, note=note)
    if name == "bursty":
        trace = expand_rates(bursty_rates(hours * 3600, mean_rate * rate, seed), sizes, seed)
        return dataclasses.replace(trace, note=f"{trace.note}; mean rate {mean_rate:.2f}/s, {hours:g} h")
    if name == "decode":
        spec = {**DECODE_HEAVY, "mean_rate": float(DECODE_HEAVY["mean_rate"]) * rate}
        return synthetic_trace(spec, seed, hours, "decode-heavy")
    if name == "longprompt":
        spec = {**LONG_PROMPT, "mean_rate": float(LONG_PROMPT["mean_rate"]) * rate}
        return synthetic_trace(spec, seed, hours, "long-prompt")
    raise ValueError(name)


def overlaid(trace: Trace, copies: int) -> Trace:
    """``copies`` of ``trace``, the k-th shifted by k / copies of its length and wrapped into it: the
    same requests and sizes, ``copies`` times the rate."""
    span = trace.duration_s
    arrivals = np.concatenate([(trace.arrivals + k * span / copies) % span for k in range(copies)])
    order = np.argsort(arrivals, kind="stable")
    prompts = np.tile(trace.prompt_tokens, copies)[order]
    outputs = np.tile(trace.output_tokens, copies)[order]
    note = f"{trace.note}; {copies} copies, each shifted by 1/{copies} of the trace"
    return Trace(arrivals[order], prompts, outputs, trace.source, note)


# ---- ablations: each mechanism of the decider off in turn ----------------------------------


# One row per mechanism: the stage it removes (``scaler.decider.stages``), or, for a mechanism that
# is a constant's value, the constant that turns it into nothing. One code version, no patching.
class Ablation(NamedTuple):
    """One mechanism taken out: a decider stage removed, or a parameter that empties it."""

    name: str
    stage: str | None = None  # the Stages field it removes
    params: tuple[tuple[str, Any], ...] = ()  # or the DeciderParams fields it sets

    def engine(self, spec: Any) -> Any:
        """The decider for ``spec`` without this mechanism."""
        from scaler.decider.engine import Engine
        from scaler.decider.params import DeciderParams
        from scaler.decider.stages import ALL

        stages = ALL.without(self.stage) if self.stage else ALL
        return Engine(spec, DeciderParams(**dict(self.params)), stages)


ABLATIONS: tuple[Ablation, ...] = (
    Ablation("offered demand", "offered_demand"),  # size what was served: no queue growth
    Ablation("trend", params=(("trend_time_constant_s", math.inf),)),  # the forecast is its level
    Ablation("hold over one lead", "hold_plan"),  # the latest forecast, not the lead's largest
    Ablation("answer held over one lead", "hold_answer"),  # the latest answer, not the lead's largest
    Ablation("forecast errors", params=(("error_window_s", 1e-9),)),  # the point forecast alone
    Ablation("errors against the floor", "errors_against_floor"),  # every miss a ratio to its plan
    Ablation("queueing headroom", "queueing_headroom"),  # servers just above the load
    Ablation("capacity measurement", "measure_capacity"),  # the configured capacities only
    Ablation("phase times", "phase_times"),  # as for an engine that exports no phase time
    Ablation("slot cap", "slot_cap"),  # the KV reading alone, where max_num_seqs binds first
    Ablation("dispatch model", "dispatch_model"),  # one pooled queue, whatever the dispatch
    Ablation("decode slowdown", params=(("fit_min_spread", math.inf),)),  # never fitted (nor the ITL line)
    Ablation("calibration", "calibration"),  # the configured or measured capacities, unscaled
    Ablation("join filled", "join_fill"),  # the scale learns from the minute a replica joined
    Ablation("batch slowdown", "batch_slowdown"),  # every fleet size holds a request as long as now
    Ablation("wait bound", "wait_bound"),  # a cut goes wherever the model's late share is the one measured
    Ablation("backlog (queue signal)", "queue_signal"),
    Ablation("safety net", "backlog_net"),  # the load trusts the capacity model with a backlog
    Ablation("backlog in the load", "backlog_in_load"),  # the queue signal proposes the backlog itself
    Ablation("slots resource", "size_slots"),  # sizes on prefill only
    Ablation("hold at start", "start_hold"),  # the first refresh's rates size the fleet
)
SWITCHES = {a.name: a for a in ABLATIONS}
MECHANISMS = tuple(SWITCHES)
ABLATION_CONDITIONS = ("right", "not configured")  # what the ablation replays each mechanism under


def _ablate(name: str) -> None:
    """Check that ``name`` is a known ablation ("none", or a row of ABLATIONS)."""
    if name != "none" and name not in SWITCHES:
        raise ValueError(f"unknown ablation {name!r}")


# ---- one cell: the reference, then this scaler's runs --------------------------------------


class Cell(NamedTuple):
    """One trace, seed, physics and serving model, and the fleet's KV cache at a full batch."""

    trace: str
    seed: int
    physics: str
    serving: str
    kv_full: float = 1.0
    hours: float | None = None  # the trace's length: HOURS, unless --hours cuts it
    profile: str = STEP_PROFILE  # the step physics' replica (--profile)
    rate: float = 1.0  # the trace replayed this many times as fast (--rate)
    objective_x: float = 1.0  # the trace's TTFT objective times this (--objective)

    def describe(self) -> str:
        length = "" if self.hours is None else f" ({self.hours:g} h)"
        replica = f" {self.profile}" if self.physics == "step" and self.profile != STEP_PROFILE else ""
        faster = f" x{self.rate:g}" if self.rate != 1.0 else ""
        looser = f" objective x{self.objective_x:g}" if self.objective_x != 1.0 else ""
        return f"{self.trace}{length}{faster}{looser} seed {self.seed} {self.physics}{replica} {self.serving}"

    @property
    def objective_s(self) -> float:
        """The TTFT objective the cell's service holds: the trace's (``objective``) times ``--objective``."""
        return objective(self.trace) * self.objective_x


def fleet(cell: Cell) -> ClusterConfig:
    """The cell's fleet before its GPU limit: cluster-70b in the cell's physics and serving model (in
    the step physics, the cell's profile's replica, its GPUs)."""
    base = ClusterConfig.load(HERE / "cluster-70b.yaml")
    if cell.physics == "step":
        gpus = PROFILES[cell.profile].gpus
        return base.with_overrides(
            physics="step",
            profile=cell.profile,
            gpus_per_replica=gpus,
            dispatch_seed=cell.seed,
            **SERVING[cell.serving],
        )
    return base.with_overrides(
        physics=cell.physics,
        kv_cache_usage_full_batch=cell.kv_full,
        dispatch_seed=cell.seed,
        **SERVING[cell.serving],
    )


@functools.lru_cache(maxsize=16)
def truths(
    trace_name: str, seed: int, physics: str, profile_name: str = STEP_PROFILE
) -> tuple[float, float, float]:
    """A replica's prefill rate (prompt tokens/s), batch slots and decode rate (generated tokens/s
    with a full batch) in the cell's world: cluster-70b's in the fluid physics; in the step physics,
    what the profile's replica does saturated with the trace's requests (``saturation``: its first
    2,000)."""
    if physics != "step":
        base = ClusterConfig.load(HERE / "cluster-70b.yaml")
        return base.prefill_tokens_per_s, float(base.decode_slots), base.decode_tokens_per_s
    trace = load_trace(trace_name, seed)  # a rate does not change a saturation run: it sends at once
    head = slice(0, SATURATION_SAMPLE)
    prompts = [int(p) for p in trace.prompt_tokens[head]]
    outputs = [int(o) for o in trace.output_tokens[head]]
    profile = PROFILES[profile_name]
    prefill, slots = saturation(profile, prompts, outputs)
    context = float(np.mean(prompts)) + float(np.mean(outputs)) / 2.0
    step = profile.base_s + profile.token_s * slots + profile.context_s * slots * context
    return prefill, slots, slots / step


def reference(trace: Trace, base: ClusterConfig, objective_s: float) -> tuple[ClusterConfig, Any, Any, int]:
    """The cell's GPU limit (the unlimited clairvoyant's peak), the clairvoyant and its search."""
    scaler_so = load_scaledobject_model(HERE / "scaledobject-70b.yaml")
    lo, hi = scaler_so.min_replicas, scaler_so.max_replicas
    unlimited = base.with_overrides(gpus_free=hi * base.gpus_per_replica)
    probe, _ = clairvoyant(trace, unlimited, START, objective_s, lo, hi)
    cfg = base.with_overrides(gpus_free=probe.peak_replicas * base.gpus_per_replica)
    result, search = clairvoyant(trace, cfg, START, objective_s, lo, hi)
    return cfg, result, search, initial_ready(search, cfg.cold_start_s)


def frontier(
    trace: Trace, cfg: ClusterConfig, search: Any, objective_s: float, lo: int
) -> list[tuple[float, float]]:
    """(attainment, GPU-hours) of the clairvoyant's schedule with each HEADROOM added to every minute."""
    points = []
    cap = cfg.max_replicas_on_gpus
    for extra in HEADROOM:
        schedule = [min(cap, max(lo, n + extra)) for n in search.schedule]
        policy = ClairvoyantPolicy("clairvoyant", schedule, BUCKET_S, cfg.cold_start_s, lo)
        result = run(trace, cfg, policy, START, policy.target(0.0))
        points.append((float(np.mean(result.ttft <= objective_s)), result.gpu_seconds / 3600.0))
    return points


def at_equal_attainment(points: Sequence[tuple[float, float]], attainment: float) -> tuple[float, str]:
    """The clairvoyant's GPU-hours at ``attainment``, interpolated on its frontier; and ``""``, or
    ``">"``/``"<"`` when the attainment lies beyond the frontier (the nearest end is used)."""
    frontier_points = sorted(points)
    atts = [a for a, _ in frontier_points]
    hours = [h for _, h in frontier_points]
    if attainment >= atts[-1]:
        return hours[-1], ">" if attainment > atts[-1] else ""
    if attainment <= atts[0]:
        return hours[0], "<" if attainment < atts[0] else ""
    return float(np.interp(attainment, atts, hours)), ""


def reference_cell(job: tuple[Cell, bool]) -> dict[str, Any]:
    """The cell's fleet, the clairvoyant and (``full``) its frontier and the published baseline."""
    cell, full = job
    began = time.perf_counter()
    trace = cell_trace(cell)
    objective_s = cell.objective_s
    cfg, ref, search, initial = reference(trace, fleet(cell), objective_s)
    results = []
    if full:
        published = load_scaledobject_model(HERE / "baseline-published.yaml")
        results.append(run_policy(KedaPolicy("published", published), trace, cfg, START, initial))
    results.append(run_policy(reference_policy(cell), trace, cfg, START, initial))
    results.append(ref)
    results.append(static_at_peak(trace, cfg, START, search))  # issue 30: held at the clairvoyant's peak
    rows = [dataclasses.asdict(f) for f in all_figures(results, objective_s)]
    lo = load_scaledobject_model(HERE / "scaledobject-70b.yaml").min_replicas
    points = frontier(trace, cfg, search, objective_s, lo) if full else []
    cv_row = next(r for r in rows if r["policy"] == "clairvoyant")
    points.append((cv_row["within_objective"], cv_row["gpu_hours"]))
    return cell_record(
        trace,
        rows,
        began,
        **cell._asdict(),
        objective_s=objective_s,
        cluster=cfg,
        gpus_free=cfg.gpus_free,
        initial=initial,
        frontier=points,
    )


def with_truth(so: ScaledObjectModel, cell: Cell, factor: float | None) -> ScaledObjectModel:
    """The ScaledObject with the cell's world's capacities (``truths``) times ``factor`` (None: none),
    at the cell's objective."""
    external = so.external
    assert external is not None
    metadata = dict(external.metadata)
    prefill, _, decode = truths(cell.trace, cell.seed, cell.physics, cell.profile)
    if factor is None:
        for key in CAPACITY_KEYS:
            metadata.pop(key, None)
    else:
        metadata["promptTokensPerSecondPerReplica"] = f"{prefill * factor:.0f}"
        metadata["generationTokensPerSecondPerReplica"] = f"{decode * factor:.0f}"
    metadata["ttftObjectiveSeconds"] = f"{cell.objective_s:g}"
    triggers = tuple(ExternalTrigger(t.name, metadata) if t is external else t for t in so.triggers)
    return dataclasses.replace(so, triggers=triggers)


def reference_policy(cell: Cell) -> KedaPolicy:
    """The reference policy (scaler.replay.reference) on the cell's world's right capacities, through
    KEDA and an HPA with its default behaviour."""
    so = with_truth(load_scaledobject_model(HERE / "scaledobject-70b.yaml"), cell, 1.0)
    so = dataclasses.replace(so, scaledobject=dataclasses.replace(so.scaledobject, behavior=Behavior()))
    policy = KedaPolicy(REFERENCE_NAME, so)
    assert policy.target_policy is not None
    # The world's truth, as its capacities are: prefill and decode share a GPU but in `separate`.
    policy.engine = ReferenceDecider(policy.target_policy.spec, shares_gpu=cell.physics != "separate")
    return policy


def references(rows: Sequence[dict[str, Any]]) -> References:
    """The GPU-hours a cell's runs are divided by: its clairvoyant's and its static pool's."""
    hours = {r["policy"]: r["gpu_hours"] for r in rows}
    return References(hours.get(CLAIRVOYANT), hours.get(STATIC))


class ScalerRun(NamedTuple):
    """One replay of this scaler in a cell whose reference is known: a condition, a mechanism off."""

    cell: Cell
    condition: str
    ablation: str  # "none" or a switch of ABLATIONS
    cluster: ClusterConfig
    initial: int
    references: References  # the clairvoyant's and the static pool's GPU-hours


def estimate(
    capacity: Capacity | None, truth: tuple[float, float, float], scale: float | None = None
) -> dict[str, Any]:
    """The capacity a decision recorded beside the cell's world's truth (``truths``): each figure, its
    source, its ratio; and the scale the decision sized the fleet at (None: it sized nothing)."""
    out: dict[str, Any] = {"scale": scale}
    for name, truth_value, value, source in (
        (
            "prefill_tokens_per_s",
            truth[0],
            None if capacity is None else capacity.prefill_tokens_per_s,
            None if capacity is None else capacity.prefill_source,
        ),
        (
            "slots",
            truth[1],
            None if capacity is None else capacity.slots,
            None if capacity is None else capacity.slots_source,
        ),
    ):
        out[name] = {
            "value": value,
            "source": source or "unknown",
            "truth": truth_value,
            "ratio": None if value is None else value / truth_value,
        }
    return out


def scaler_runs(runs: Sequence[ScalerRun]) -> list[dict[str, Any]]:
    """This scaler's replays, each with its figures and the capacity its decisions recorded beside the
    truth, each without the mechanism its ablation takes out (``Ablation.engine``)."""
    out = []
    scaler_so = load_scaledobject_model(HERE / "scaledobject-70b.yaml")
    for spec in runs:
        began = time.perf_counter()
        trace = cell_trace(spec.cell)
        objective_s = spec.cell.objective_s
        label = f"scaler, {spec.condition}"
        so = with_truth(scaler_so, spec.cell, dict(CONDITIONS)[spec.condition])
        policy = KedaPolicy(label, so)
        _ablate(spec.ablation)
        if spec.ablation in SWITCHES:
            assert policy.target_policy is not None
            policy.engine = SWITCHES[spec.ablation].engine(policy.target_policy.spec)
        result = run_policy(policy, trace, spec.cluster, START, spec.initial)  # with its own hours held
        row = dataclasses.asdict(figures(result, objective_s, spec.references))
        first = policy.decided_at[0] if policy.decided_at else 0.0
        truth = truths(spec.cell.trace, spec.cell.seed, spec.cell.physics, spec.cell.profile)
        row["estimates"] = {
            "after_15_min": estimate(
                policy.capacity_at(first + ESTIMATE_AFTER_S), truth, policy.scale_at(first + ESTIMATE_AFTER_S)
            ),
            "end": estimate(policy.capacity_at(math.inf), truth, policy.scale_at(math.inf)),
        }
        row["ablation"] = spec.ablation
        row["condition"] = spec.condition
        row["wall_s"] = time.perf_counter() - began
        out.append({"cell": spec.cell, "row": row})
    return out


def _cell_and_reference(job: tuple[Cell, bool]) -> tuple[Cell, dict[str, Any]]:
    """The cell with its reference: the record's ``hours`` is the trace's length, not the cut the
    cell asked for (None: the whole trace), so the cell is not rebuilt from it."""
    return job[0], reference_cell(job)


def run_cells(
    cells: Sequence[Cell], conditions: Sequence[str], ablations: Sequence[str], workers: int
) -> list[dict[str, Any]]:
    """Every cell's reference, then this scaler in each condition with each mechanism off in turn
    ("none": the whole decider), in the pool's workers as soon as their cell's reference is known."""
    full = list(ablations) == ["none"]
    done: dict[Cell, dict[str, Any]] = {}
    rows: list[dict[str, Any]] = []
    pending = []
    with multiprocessing.Pool(workers) as pool:
        for cell, ref in pool.imap_unordered(_cell_and_reference, [(c, full) for c in cells]):
            done[cell] = ref
            specs = [
                ScalerRun(
                    cell, condition, ablation, ref["cluster"], ref["initial"], references(ref["figures"])
                )
                for ablation in ablations
                for condition in conditions
            ]
            pending += [pool.apply_async(scaler_runs, ([spec],)) for spec in specs]
        for result in pending:
            rows += result.get()
    for item in rows:
        done[item["cell"]].setdefault("runs", []).append(item["row"])
    out = []
    for cell in cells:  # in the order asked, each cell's runs in condition order
        ref = done[cell]
        order = {(a, c): i for i, (a, c) in enumerate((a, c) for a in ablations for c in conditions)}
        runs = sorted(ref.pop("runs", []), key=lambda r: order[(r["ablation"], r["condition"])])
        whole = [r for r in runs if r["ablation"] == "none"]
        ref["figures"] = whole + ref["figures"]  # this scaler's rows first, the clairvoyant last
        ref["ablations"] = [r for r in runs if r["ablation"] != "none"]
        points = ref["frontier"]
        for row in ref["figures"] + ref["ablations"]:
            # Without the frontier (the ablation) only the clairvoyant's point is known: no reading.
            hours, beyond = at_equal_attainment(points, row["within_objective"]) if full else (math.nan, "")
            row["vs_clairvoyant_equal_attainment"] = row["gpu_hours"] / hours
            row["equal_attainment_beyond"] = beyond
        ref["cluster"] = dataclasses.asdict(ref["cluster"])
        out.append(ref)
    return out


def bench_example(physics: str) -> dict[str, Any]:
    """The README's example ScaledObject on the Azure trace, default cluster (16 GPUs)."""
    trace = load_requests(AZURE)
    cfg = ClusterConfig().with_overrides(physics=physics)
    so = load_scaledobject_model(EXAMPLE)
    ref, search = clairvoyant(trace, cfg, START, 2.0, so.min_replicas, so.max_replicas)
    initial = initial_ready(search, cfg.cold_start_s)
    results = [
        run_policy(KedaPolicy("example", so), trace, cfg, START, initial),
        run_policy(
            KedaPolicy("example, capacity keys deleted", without_capacities(so)),
            trace,
            cfg,
            START,
            initial,
        ),
        ref,
    ]
    return {
        "trace": "azure (README example)",
        "physics": physics,
        "figures": [dataclasses.asdict(f) for f in all_figures(results, 2.0)],
    }


# ---- printing and targets ----------------------------------------------------------------


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _row(f: dict[str, Any]) -> str:
    ratio = _ratio(f["vs_clairvoyant"])
    equal = f"{f.get('equal_attainment_beyond', '')}{f.get('vs_clairvoyant_equal_attainment', math.nan):.2f}x"
    # Issue 30: against the static pool at the clairvoyant's peak, and without the floor's and the
    # pre-warm windows' hours (scaler/replay/held.py; the clairvoyant's floor left out of it too).
    own = f.get("floor_gpu_hours", 0.0) + f.get("prewarm_gpu_hours", 0.0)
    return (
        f"  {f['policy']:<28} {100 * f['within_objective']:7.2f}%  {f['ttft_p99_s']:8.2f}s"
        f"  {f['gpu_hours']:9.2f}  {ratio:>6}  {equal:>7}  {f['pending_pod_minutes']:8.1f}  {f['scale_events']:6d}"
        f"  {_ratio(f.get('vs_static')):>6}  {own:8.2f}  {_ratio(f.get('vs_clairvoyant_without_own')):>7}"
    )


def _estimate_text(e: dict[str, Any]) -> str:
    parts = []
    for name, unit in (("prefill_tokens_per_s", "tok/s"), ("slots", "slots")):
        f = e[name]
        if f["value"] is None:
            parts.append(f"{unit} unknown")
        else:
            parts.append(f"{f['value']:,.0f} {unit} ({f['source']}) {f['ratio']:.2f}x")
    if e.get("scale") is not None:  # results written before the scale was recorded have none
        parts.append(f"sized at {e['scale']:.2f}x")
    return ", ".join(parts)


def print_cell(cell: dict[str, Any]) -> None:
    keys = SERVING[cell["serving"]]
    serving = ", ".join(f"{k} {v}" for k, v in keys.items())
    print(
        f"\n### {cell['trace']}, seed {cell['seed']}, {cell['physics']} physics, serving {cell['serving']}"
        f" ({serving}): {cell['requests']:,} requests over {cell['hours']:.1f} h, GPU limit {cell['gpus_free']},"
        f" objective {cell['objective_s']:g} s"
    )
    if cell.get("note"):
        print(f"  {cell['note']}")
    print(
        f"  {'policy':<28} {'within':>8}  {'TTFT p99':>9}  {'GPU-h':>9}  {'vs cv':>6}  {'eq. att':>7}"
        f"  {'Pend-min':>8}  {'scale':>6}  {'vs st':>6}  {'own GPU-h':>8}  {'w/o own':>7}"
    )
    for f in cell["figures"]:
        print(_row(f))
    truth = next((f["estimates"]["end"] for f in cell["figures"] if "estimates" in f), None)
    if truth is not None:
        print(
            f"  capacity the decisions recorded (and the scale they sized at), against the {cell['physics']} world's"
            f" {truth['prefill_tokens_per_s']['truth']:,.0f} prompt tokens/s and {truth['slots']['truth']:,.0f} slots"
            " per replica: 15 min after traffic starts | at the end"
        )
    for f in cell["figures"]:
        if "estimates" in f:
            e = f["estimates"]
            print(f"  {f['policy']:<28} {_estimate_text(e['after_15_min'])} | {_estimate_text(e['end'])}")


def _eq(row: dict[str, Any]) -> str:
    """A row's GPU-hours over the clairvoyant's at equal attainment, with its frontier mark."""
    return f"{row['vs_clairvoyant_equal_attainment']:.2f}x{row.get('equal_attainment_beyond', '')}"


def _attainment_targets(
    trace: str, me: dict[str, Any], ref: dict[str, Any], objective_s: float
) -> tuple[bool, str]:
    """The trace's attainment and cost target (module docstring), met or not, and its words; the cost
    is GPU-hours over the clairvoyant's frontier at equal attainment."""
    att, ratio = me["within_objective"], me["vs_clairvoyant_equal_attainment"]
    if trace in ("azure", "servegen"):
        return att >= 0.995 and ratio <= 1.10, "target >= 99.50% at <= 1.10x"
    if trace == "decode":
        p99 = me["ttft_p99_s"]
        ok = att >= 0.995 and ratio <= 1.15 and p99 <= 2 * objective_s
        return ok, f"TTFT p99 {p99:.2f}s; target >= 99.50% at <= 1.15x, p99 <= {2 * objective_s:g}s"
    if trace == "longprompt":
        floor = ref["within_objective"] - 0.01
        return (
            att >= floor and ratio <= 1.15,
            f"target >= {100 * floor:.2f}%, 1 point under the clairvoyant, at <= 1.15x",
        )
    floor = ref["within_objective"] - 0.02  # bursty
    return (
        att >= floor and ratio <= 1.5,
        f"target >= {100 * floor:.2f}%, 2 points under the clairvoyant, at <= 1.50x",
    )


def _beside(where: str, me: dict[str, Any], other: dict[str, Any], name: str) -> tuple[bool, str]:
    """The decider at or past ``other`` (the reference policy, the published configuration): its
    GPU-hours at equal attainment no more than the other's, both on the clairvoyant's frontier."""
    ok = me["vs_clairvoyant_equal_attainment"] <= other["vs_clairvoyant_equal_attainment"]
    return (
        ok,
        f"{where}, capacities right: {100 * me['within_objective']:.2f}% at {_eq(me)} at equal attainment;"
        f" the {name} {100 * other['within_objective']:.2f}% at {_eq(other)} (target: at or below the {name}'s x)",
    )


def _estimate_targets(where: str, label: str, e: dict[str, Any]) -> list[tuple[bool, str]]:
    """The prefill rate's and the batch slots' targets: within 15% of the replay's truth."""
    out = []
    for name, words, unit in (
        ("prefill_tokens_per_s", "prefill rate", " tokens/s"),
        ("slots", "batch slots", ""),
    ):
        f = e[name]
        if f["value"] is None:
            figure, ok = f"unknown, the replay's {f['truth']:,.0f}{unit}", False
        else:
            figure = (
                f"{f['value']:,.0f}{unit} ({f['source']}), {f['ratio']:.2f}x the replay's {f['truth']:,.0f}"
            )
            ok = abs(f["ratio"] - 1.0) <= 0.15
        out.append((ok, f"{where}, capacities {label}: {words} 15 min in {figure} (target within 15%)"))
    return out


def verdicts(cells: Sequence[dict[str, Any]]) -> list[tuple[bool, str]]:
    """Every target of the module docstring, met or not, with its figure."""
    out: list[tuple[bool, str]] = []
    for cell in cells:
        by = {f["policy"]: f for f in cell["figures"]}
        ref, right = by["clairvoyant"], by["scaler, right"]
        where = Cell(
            cell["trace"],
            cell["seed"],
            cell["physics"],
            cell["serving"],
            hours=cell.get("hours"),
            profile=cell.get("profile", STEP_PROFILE),
            rate=cell.get("rate", 1.0),
            objective_x=cell.get("objective_x", 1.0),
        ).describe()
        for label, _ in CONDITIONS:
            me = by[f"scaler, {label}"]
            ok, target = _attainment_targets(cell["trace"], me, ref, cell["objective_s"])
            out.append(
                (
                    ok,
                    f"{where}, capacities {label}: {100 * me['within_objective']:.2f}% within"
                    f" {cell['objective_s']:g} s at {_eq(me)} at equal attainment ({target})",
                )
            )
            out += _estimate_targets(where, label, me["estimates"]["after_15_min"])
            events, cv_events = me["scale_events"], ref["scale_events"]
            out.append(
                (
                    events <= 2 * cv_events,
                    f"{where}, capacities {label}: {events} scale changes (target <= {2 * cv_events}, twice the clairvoyant's)",
                )
            )
            if label == "right":
                if REFERENCE_NAME in by:
                    out.append(_beside(where, me, by[REFERENCE_NAME], "reference policy"))
                if cell["trace"] == "decode" and "published" in by:
                    out.append(_beside(where, me, by["published"], "published KEDA configuration"))
                continue
            d_att = 100 * (right["within_objective"] - me["within_objective"])
            d_ratio = me["vs_clairvoyant"] - right["vs_clairvoyant"]
            out.append(
                (
                    d_att <= 1.0 and abs(d_ratio) <= 0.05,
                    f"{where}, {label} vs right: {-d_att:+.2f} points, {d_ratio:+.2f}x (target within 1 point and 0.05x)",
                )
            )
    return out


def summary(cells: Sequence[dict[str, Any]]) -> list[str]:
    """Per trace, serving model and condition, the mean over seeds and physics of attainment and the
    two ratios."""
    lines = [
        "",
        "## Means over seeds and physics (attainment, x the clairvoyant, x it at equal attainment;"
        " static at peak: the fleet the clairvoyant needs at its busiest minute, all day)",
    ]
    for trace in TRACES:
        for serving in SERVING:
            mine = [c for c in cells if c["trace"] == trace and c["serving"] == serving]
            if not mine:
                continue
            parts = []
            for label in [f"scaler, {label}" for label, _ in CONDITIONS] + [
                REFERENCE_NAME,
                "published",
                CLAIRVOYANT,
                STATIC,
            ]:
                rows = [f for c in mine for f in c["figures"] if f["policy"] == label]
                att = 100 * np.mean([f["within_objective"] for f in rows])
                ratio = np.mean([f["vs_clairvoyant"] for f in rows])
                equal = np.mean([f["vs_clairvoyant_equal_attainment"] for f in rows])
                parts.append(f"{label.removeprefix('scaler, ')} {att:.2f}% {ratio:.2f}x ({equal:.2f}x)")
            lines.append(f"  {trace}, {serving}: " + "; ".join(parts))
    return lines


def _deltas(cells: Sequence[dict[str, Any]], name: str, **only: str) -> tuple[float, float] | None:
    """The mean change of attainment in points and of x the clairvoyant with mechanism ``name`` off,
    each against the whole decider in the same cell and condition, over the cells whose ``trace``
    or ``serving`` is the one given (all when none is) and each condition (``condition`` alone when
    given); None where none ran."""
    condition = only.pop("condition", None)
    changes = []
    for cell in cells:
        if any(cell[key] != value for key, value in only.items()):
            continue
        whole = {f["condition"]: f for f in cell["figures"] if "condition" in f}
        for row in cell["ablations"]:
            base = whole.get(row["condition"])
            if row["ablation"] != name or base is None or condition not in (None, row["condition"]):
                continue
            changes.append(
                (
                    100 * (row["within_objective"] - base["within_objective"]),
                    row["vs_clairvoyant"] - base["vs_clairvoyant"],
                )
            )
    if not changes:
        return None
    return float(np.mean([a for a, _ in changes])), float(np.mean([r for _, r in changes]))


def ablation_table(
    cells: Sequence[dict[str, Any]], conditions: Sequence[str] = ABLATION_CONDITIONS
) -> list[str]:
    """Per mechanism off, the change against the whole decider: per trace and condition, and per
    serving model, each a mean over the rest (seeds, physics, and the other dimension)."""
    seeds = sorted({c["seed"] for c in cells})
    servings = list(dict.fromkeys(c["serving"] for c in cells))
    lines = [
        "",
        f"## Ablation (seeds {' '.join(map(str, seeds))}, both physics, serving {', '.join(servings)}):"
        " mean change against the whole decider, points of attainment and x the clairvoyant",
    ]
    for name in MECHANISMS:
        rows = []
        for condition in conditions:
            parts = []
            for trace in TRACES:
                d = _deltas(cells, name, trace=trace, condition=condition)
                if d is not None:
                    parts.append(f"{trace} {d[0]:+.2f} pt {d[1]:+.3f}x")
            if parts:
                rows.append(f"    capacities {condition}: " + "; ".join(parts))
        if not rows:
            continue
        by_serving = []
        for serving in servings:
            d = _deltas(cells, name, serving=serving)
            if d is not None:
                by_serving.append(f"{serving} {d[0]:+.2f} pt {d[1]:+.3f}x")
        taken = SWITCHES[name]
        switch = (
            f"stage {taken.stage} removed"
            if taken.stage
            else ", ".join(f"{k} = {v:g}" for k, v in taken.params)
        )
        lines += [f"  without {name} ({switch}):", *rows, "    by serving model: " + "; ".join(by_serving)]
    return lines


def _hours(parser: argparse.ArgumentParser, given: Sequence[str]) -> dict[str, float]:
    """``--hours``' TRACE=H pairs, each trace one of TRACES and each H above 0 and at most its
    HOURS; any other is a usage error naming it."""
    out: dict[str, float] = {}
    for pair in given:
        name, _, value = pair.partition("=")
        try:
            h = float(value)
        except ValueError:
            h = math.nan
        if name not in HOURS or not 0 < h <= HOURS[name]:
            parser.error(
                f"--hours {pair}: want TRACE=H, TRACE one of {', '.join(HOURS)} and H in (0, its"
                f" {HOURS.get(name, 24.0):g} h]"
            )
        out[name] = h
    return out


def main() -> int:
    parser = trace_parser(__doc__, TRACES)
    parser.add_argument(
        "--serving",
        nargs="+",
        default=None,
        choices=list(SERVING),
        help=f"serving models (default {' '.join(SERVING_RUN)}; with --quick {' '.join(SERVING_QUICK)};"
        " docs/replay.md, 'Serving models')",
    )
    parser.add_argument(
        "--ablation",
        action="store_true",
        help="each mechanism off in turn, capacities right and not configured (every seed unless --quick)",
    )
    parser.add_argument(
        "--only", nargs="+", default=None, choices=MECHANISMS, help="with --ablation: only these mechanisms"
    )
    parser.add_argument(
        "--conditions",
        nargs="+",
        default=None,
        choices=[label for label, _ in CONDITIONS],
        help=f"with --ablation: the capacity conditions (default {', '.join(ABLATION_CONDITIONS)})",
    )
    add_kv_full(parser)
    parser.add_argument(
        "--physics",
        nargs="+",
        default=list(PHYSICS_RUN),
        choices=list(PHYSICS),
        help=f"the physics replayed (default {' '.join(PHYSICS_RUN)}; docs/replay.md)",
    )
    parser.add_argument(
        "--hours",
        nargs="+",
        default=[],
        metavar="TRACE=H",
        help="cut a trace to its first H hours (servegen=6): an ablation that must finish in minutes;"
        f" default {' '.join(f'{t}={h:g}' for t, h in HOURS.items())}",
    )
    parser.add_argument(
        "--profile",
        default=STEP_PROFILE,
        choices=list(PROFILES),
        help=f"the step physics' replica (default {STEP_PROFILE}; docs/replay.md, 'The step physics')",
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=1.0,
        help="every trace replayed this many times as fast (default 1): a faster --profile's fleet"
        " loaded to a size like the default's",
    )
    parser.add_argument(
        "--objective",
        type=float,
        default=1.0,
        help="every trace's TTFT objective times this (default 1): a service that holds a looser or"
        " tighter one, every policy and the clairvoyant's frontier graded against it",
    )
    parser.add_argument("--workers", type=int, default=2, help="replays run in parallel (default 2)")
    parser.add_argument("--json", default=None, help="where the figures go (default benchmarks/results/...)")
    args = parser.parse_args()
    hours = _hours(parser, args.hours)
    seeds = [0] if args.quick else args.seeds
    servings = args.serving or list(SERVING_QUICK if args.quick else SERVING_RUN)
    chosen = " (--quick's; --serving picks others)" if args.quick and not args.serving else ""
    ablations = ("none", *(args.only or MECHANISMS)) if args.ablation else ("none",)
    if args.conditions and not args.ablation:
        parser.error("--conditions is for --ablation (a full run replays every condition)")
    for flag, value in (("--rate", args.rate), ("--objective", args.objective)):
        if not value > 0:  # NaN too
            parser.error(f"{flag} takes a factor above 0, not {value:g}")
    conditions = (
        tuple(args.conditions or ABLATION_CONDITIONS)
        if args.ablation
        else tuple(label for label, _ in CONDITIONS)
    )
    began = time.perf_counter()
    cells = [
        Cell(
            name,
            seed,
            physics,
            serving,
            args.kv_full,
            hours.get(name),
            args.profile,
            args.rate,
            args.objective,
        )
        for name in args.traces
        for seed in (seeds if name != "azure" else [0])  # a request trace is the same for every seed
        for physics in args.physics
        for serving in servings
    ]
    print(
        f"decision quality: {len(cells)} cells (traces {', '.join(args.traces)}; seeds {' '.join(map(str, seeds))};"
        f" serving models {', '.join(servings)}{chosen}; both physics)"
        + (f"; {len(ablations) - 1} mechanisms off in turn" if args.ablation else "")
        + (f"; KV cache {args.kv_full:g} used at a full batch" if args.kv_full != 1.0 else "")
    )
    results = run_cells(cells, conditions, ablations, args.workers)
    examples = []
    if not args.ablation:
        with multiprocessing.Pool(args.workers) as pool:
            examples = pool.map(bench_example, FLUID)
    for cell in results:
        print_cell(cell)
    for example in examples:
        print(
            f"\n### README example ScaledObject, azure, {example['physics']} physics, default cluster (16 GPUs)"
        )
        for f in example["figures"]:
            print(_row({**f, "vs_clairvoyant_equal_attainment": math.nan}))
    checks: list[tuple[bool, str]] = []
    if args.ablation:
        lines = ablation_table(results, conditions)
    else:
        checks = verdicts(results)
        lines = [*summary(results), "", *target_lines("Targets", checks)]
    for line in lines:
        print(line)
    print(f"total {time.perf_counter() - began:.0f}s")
    default = "decision_quality_ablation.json" if args.ablation else "decision_quality.json"
    if args.kv_full != 1.0:
        default = default.replace(".json", f"_kv{args.kv_full:g}.json")
    path = Path(args.json or HERE / "results" / default)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "cells": results,
                "examples": examples,
                "targets": [{"met": ok, "target": t} for ok, t in checks],
            },
            indent=1,
        )
        + "\n"
    )
    return 0 if all(ok for ok, _ in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
