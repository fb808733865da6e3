"""Router row: the decision-quality replay with llm-d's flow control holding the queue in the router.

    nice .venv/bin/python benchmarks/router_quality.py            # azure, decode-heavy, bursty; 3 seeds; both physics
    nice .venv/bin/python benchmarks/router_quality.py --quick    # seed 0 only

The fleet of benchmarks/cluster-70b-llm-d.yaml, cluster-70b.yaml with ``router: llm-d``
(scaler/replay/fleet/router.py): the
EPP sends a request to the pods only while the pool's saturation, the mean over Ready pods of
``max(waiting / 5, kv_cache_usage / 0.8)``, is below 1, and holds the rest. The fleet's batch is
bound by its KV cache (``kv_cache_usage_full_batch`` 1, as the decision benchmark's), so the
gate closes at 80% of the batch slots; ``--kv-full 0.6`` replays a fleet whose ``max_num_seqs``
binds first (the KV cache 60% used at a full batch), where the servers' queue levels off at 5
per pod instead. Per trace, seed and physics, with the GPU limit at the peak of the clairvoyant's
schedule (with the router, no limit), it replays:

* **router**: benchmarks/scaledobject-70b-llm-d.yaml, scaledobject-70b.yaml with ``router: llm-d``
  and ``inferencePool`` set: the router's queue, saturation and TTFT (queue included) are read as
  the live source reads them;
* **engine only**: benchmarks/scaledobject-70b.yaml as written, reading the servers' queue and
  TTFT only;
* **published**: benchmarks/baseline-published.yaml (KEDA on ``vllm:num_requests_waiting`` > 50,
  GPU utilisation > 85, the weekday cron);
* **clairvoyant**: the cheapest per-minute schedule keeping 99.5% within the objective, with the
  router in front (the denominator of every GPU-hours ratio).

Targets, each printed beside its figure (``MISSED`` where not met), as the decision section's:
Azure at least 99.5% within 2 s at no more than 1.05x the clairvoyant's GPU-hours; decode-heavy
at least 99.5% at no more than 1.10x with a TTFT p99 within twice the objective; bursty within 2
points of the clairvoyant at no more than 1.5x; scale changes at most twice the clairvoyant's.
The run exits non-zero when a target of the ``router`` configuration is missed.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks.decision_quality import START, load_trace, objective  # noqa: E402
from benchmarks.harness import add_kv_full, cell_record, run_cells, target_lines, trace_parser  # noqa: E402
from scaler.inputs import Input  # noqa: E402
from scaler.replay.compare import clairvoyant, initial_ready  # noqa: E402
from scaler.replay.fleet.cluster import PHYSICS, ClusterConfig  # noqa: E402
from scaler.replay.keda import ExternalTrigger, ScaledObjectModel, load_scaledobject_model  # noqa: E402
from scaler.replay.policies import KedaPolicy, TickInputs  # noqa: E402
from scaler.replay.replay import run  # noqa: E402
from scaler.replay.report import all_figures  # noqa: E402

TRACES = ("azure", "decode", "bursty")
CONFIGS = ("router", "engine only", "published")


def fleet_and_scaledobjects() -> tuple[ClusterConfig, ScaledObjectModel, ScaledObjectModel]:
    """The router row's fleet and its two ScaledObjects (router, engine only), checked to differ
    from the decision benchmark's only by the router keys."""
    fleet = ClusterConfig.load(HERE / "cluster-70b-llm-d.yaml")
    assert fleet == ClusterConfig.load(HERE / "cluster-70b.yaml").with_overrides(router="llm-d"), (
        "cluster-70b-llm-d.yaml must be cluster-70b.yaml plus router: llm-d"
    )
    engine_only = load_scaledobject_model(HERE / "scaledobject-70b.yaml")
    routed = load_scaledobject_model(HERE / "scaledobject-70b-llm-d.yaml")
    assert engine_only.external is not None
    assert routed.external is not None
    extra = {k: v for k, v in routed.external.metadata.items() if engine_only.external.metadata.get(k) != v}
    extra.update({k: "(removed)" for k in engine_only.external.metadata if k not in routed.external.metadata})
    assert set(extra) == {"router", "inferencePool"}, (
        f"scaledobject-70b-llm-d.yaml must be scaledobject-70b.yaml plus router and inferencePool, not {extra}"
    )
    assert extra["router"] == "llm-d", f"scaledobject-70b-llm-d.yaml has router {extra['router']}, not llm-d"
    same_keys = ("name", "hpa_name", "triggers", "metadata")  # the name, and the trigger compared above
    one, other = routed.scaledobject, engine_only.scaledobject
    assert dataclasses.replace(one, **{k: getattr(other, k) for k in same_keys}) == other, (
        "scaledobject-70b-llm-d.yaml must differ from scaledobject-70b.yaml only in its name and trigger"
    )
    return fleet, routed, engine_only


def at_objective(so: ScaledObjectModel, objective_s: float) -> ScaledObjectModel:
    """The ScaledObject with ``ttftObjectiveSeconds`` at the trace's objective (2 s: as written)."""
    external = so.external
    if external is None or objective_s == 2.0:
        return so
    metadata = {**external.metadata, "ttftObjectiveSeconds": f"{objective_s:g}"}
    triggers = tuple(ExternalTrigger(t.name, metadata) if t is external else t for t in so.triggers)
    return dataclasses.replace(so, triggers=triggers)


class Watched(KedaPolicy):
    """A KedaPolicy that keeps what the fleet showed at each tick the router held requests."""

    def __init__(self, name: str, so: ScaledObjectModel) -> None:
        super().__init__(name, so)
        self.held: list[tuple[float, float, float]] = []  # (router queue, waiting per Ready pod, KV)

    def tick(self, tick: TickInputs) -> int | None:
        """KedaPolicy.tick, noting the engine's queue and KV cache while the router holds requests."""
        read = tick.readings.values
        queued, ready = read.get(Input.ROUTER_QUEUE_WAITING), read.get(Input.READY_REPLICAS)
        if queued and ready:
            waiting, kv = read.get(Input.QUEUE_WAITING, 0.0), read.get(Input.KV_CACHE_USAGE, 0.0)
            self.held.append((queued, waiting / ready, kv))
        return super().tick(tick)

    def gate(self) -> dict[str, float]:
        """While the router held requests: its peak queue, the servers' mean waiting per pod and KV."""
        if not self.held:
            return {"held_ticks": 0, "router_queue_peak": 0.0}
        rows = np.asarray(self.held)
        return {
            "held_ticks": len(rows),
            "router_queue_peak": float(rows[:, 0].max()),
            "waiting_per_pod_while_held": float(rows[:, 1].mean()),
            "kv_while_held": float(rows[:, 2].mean()),
        }


def bench_cell(job: tuple[str, int, str, float]) -> dict[str, Any]:
    """One trace, seed and physics, with the router: the clairvoyant, then the three configurations."""
    name, seed, physics, kv_full = job
    began = time.perf_counter()
    trace = load_trace(name, seed)
    objective_s = objective(name)
    fleet, routed, engine_only = fleet_and_scaledobjects()
    routed, scaler_so = at_objective(routed, objective_s), at_objective(engine_only, objective_s)
    base = fleet.with_overrides(physics=physics, kv_cache_usage_full_batch=kv_full)
    lo, hi = scaler_so.min_replicas, scaler_so.max_replicas
    probe, _ = clairvoyant(
        trace, base.with_overrides(gpus_free=hi * base.gpus_per_replica), START, objective_s, lo, hi
    )
    cfg = base.with_overrides(gpus_free=probe.peak_replicas * base.gpus_per_replica)
    ref, search = clairvoyant(trace, cfg, START, objective_s, lo, hi)
    initial = initial_ready(search, cfg.cold_start_s)
    policies = [
        Watched("router", routed),
        Watched("engine only", scaler_so),
        Watched("published", load_scaledobject_model(HERE / "baseline-published.yaml")),
    ]
    results = [run(trace, cfg, policy, START, initial) for policy in policies]
    rows = [dataclasses.asdict(f) for f in all_figures([*results, ref], objective_s)]
    for row, policy in zip(rows, policies, strict=False):
        row.update(policy.gate())
    setting = {"physics": physics, "kv_cache_usage_full_batch": kv_full, "gpus_free": cfg.gpus_free}
    cell = {"trace": name, "seed": seed, "objective_s": objective_s, "clairvoyant_goal_met": search.goal_met}
    return cell_record(trace, rows, began, **cell, **setting)


def verdicts(cells: Sequence[dict[str, Any]], configs: Sequence[str]) -> list[tuple[str, bool, str]]:
    """Each target of the module docstring for each of ``configs``: (config, met, what)."""
    out: list[tuple[str, bool, str]] = []
    for cell in cells:
        by = {f["policy"]: f for f in cell["figures"]}
        ref = by["clairvoyant"]
        where = f"{cell['trace']} seed {cell['seed']} {cell['physics']}"
        for config in configs:
            me = by[config]
            att, ratio, p99 = me["within_objective"], me["vs_clairvoyant"], me["ttft_p99_s"]
            what = f"{where}, {config}: {100 * att:.2f}% within {cell['objective_s']:g} s at {ratio:.2f}x"
            if cell["trace"] == "azure":
                out.append((config, att >= 0.995 and ratio <= 1.05, f"{what} (target >= 99.50% at <= 1.05x)"))
            elif cell["trace"] == "decode":
                ok = att >= 0.995 and ratio <= 1.10 and p99 <= 2 * cell["objective_s"]
                target = f"target >= 99.50% at <= 1.10x, p99 <= {2 * cell['objective_s']:g}s"
                out.append((config, ok, f"{what}, TTFT p99 {p99:.2f}s ({target})"))
            elif cell["trace"] == "bursty":
                floor = ref["within_objective"] - 0.02
                target = f"target >= {100 * floor:.2f}%, 2 points under the clairvoyant, at <= 1.50x"
                out.append((config, att >= floor and ratio <= 1.5, f"{what} ({target})"))
            events, cv_events = me["scale_events"], ref["scale_events"]
            out.append(
                (
                    config,
                    events <= 2 * cv_events,
                    f"{where}, {config}: {events} scale changes (target <= {2 * cv_events}, twice the clairvoyant's)",
                )
            )
    return out


def print_cell(cell: dict[str, Any]) -> None:
    print(
        f"\n### {cell['trace']}, seed {cell['seed']}, {cell['physics']} physics, router llm-d"
        f" (KV {cell['kv_cache_usage_full_batch']:g} at a full batch): {cell['requests']:,} requests over"
        f" {cell['hours']:.1f} h, GPU limit {cell['gpus_free']}, objective {cell['objective_s']:g} s"
        f" ({cell['wall_s']:.0f} s)"
    )
    print(
        f"  {'policy':<12} {'within':>8} {'TTFT p99':>9} {'GPU-h':>8} {'vs cv':>6} {'scale':>6}"
        f" {'router peak':>11} {'waiting/pod':>11} {'KV':>5}  (the last three while the router held requests)"
    )
    for f in cell["figures"]:
        gate = (
            f" {f['router_queue_peak']:11.0f} {f.get('waiting_per_pod_while_held', float('nan')):11.2f}"
            f" {f.get('kv_while_held', float('nan')):5.2f}"
            if "router_queue_peak" in f
            else ""
        )
        print(
            f"  {f['policy']:<12} {100 * f['within_objective']:7.2f}% {f['ttft_p99_s']:8.2f}s {f['gpu_hours']:8.2f}"
            f" {f['vs_clairvoyant']:5.2f}x {f['scale_events']:6d}{gate}"
        )


def summary(cells: Sequence[dict[str, Any]]) -> list[str]:
    """Per trace and configuration, the mean over seeds and physics of attainment and GPU-hours ratio."""
    lines = ["", "## Means over seeds and physics (attainment, x the clairvoyant)"]
    for trace in TRACES:
        mine = [c for c in cells if c["trace"] == trace]
        if not mine:
            continue
        parts = []
        for label in (*CONFIGS, "clairvoyant"):
            rows = [f for c in mine for f in c["figures"] if f["policy"] == label]
            att = 100 * np.mean([f["within_objective"] for f in rows])
            ratio = np.mean([f["vs_clairvoyant"] for f in rows])
            parts.append(f"{label} {att:.2f}% {ratio:.2f}x")
        lines.append(f"  {trace}: " + "; ".join(parts))
    return lines


def main() -> int:
    parser = trace_parser(__doc__, TRACES)
    parser.add_argument("--physics", nargs="+", default=list(PHYSICS), choices=PHYSICS)
    add_kv_full(parser)
    parser.add_argument("--workers", type=int, default=2, help="cells run in parallel (default 2)")
    parser.add_argument("--json", default=None, help="where the figures go (default benchmarks/results/...)")
    args = parser.parse_args()
    seeds = [0] if args.quick else args.seeds
    began = time.perf_counter()
    jobs = [
        (name, seed, physics, args.kv_full)
        for name in args.traces
        for seed in (seeds if name != "azure" else [0])  # a request trace is the same for every seed
        for physics in args.physics
    ]
    cells = run_cells("router row", jobs, seeds, args.traces, bench_cell, print_cell, args.workers)
    checks = verdicts(cells, ("router", "engine only"))
    for line in summary(cells):
        print(line)
    for config in ("router", "engine only"):
        mine = [(ok, text) for c, ok, text in checks if c == config]
        print("\n" + "\n".join(target_lines(f"Targets, {config}", mine)))
    wall = time.perf_counter() - began
    print(f"total {wall:.0f}s")
    default = "router_quality.json" if args.kv_full == 1.0 else f"router_quality_kv{args.kv_full:g}.json"
    path = Path(args.json or HERE / "results" / default)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "cells": cells,
                "targets": [{"config": c, "met": ok, "target": t} for c, ok, t in checks],
                "wall_s": wall,
            },
            indent=1,
        )
        + "\n"
    )
    return 0 if all(ok for c, ok, _ in checks if c == "router") else 1


if __name__ == "__main__":
    raise SystemExit(main())
