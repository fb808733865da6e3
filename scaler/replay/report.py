"""Figures per policy, the comparison table, summary.json and replay.png."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from scaler.replay.cluster import ClusterConfig
from scaler.replay.compare import busy_per_bucket
from scaler.replay.replay import RunResult
from scaler.replay.trace import Trace


@dataclass(frozen=True)
class Figures:
    policy: str
    requests: int
    served: int
    ttft_p50_s: float
    ttft_p95_s: float
    ttft_p99_s: float
    within_objective: float  # share of requests with TTFT <= objective
    gpu_hours: float
    vs_clairvoyant: float | None  # GPU-hours / the clairvoyant's
    pending_pod_minutes: float
    scale_events: int
    peak_replicas: int
    wall_seconds: float


def figures(result: RunResult, objective_s: float, reference_gpu_hours: float | None) -> Figures:
    ttft = result.ttft
    served = int(np.count_nonzero(result.arrivals + ttft <= result.horizon_s))
    p50, p95, p99 = (float(v) for v in np.percentile(ttft, [50, 95, 99])) if len(ttft) else (0.0, 0.0, 0.0)
    gpu_hours = result.gpu_seconds / 3600.0
    return Figures(
        policy=result.name,
        requests=len(ttft),
        served=served,
        ttft_p50_s=p50,
        ttft_p95_s=p95,
        ttft_p99_s=p99,
        within_objective=float(np.mean(ttft <= objective_s)) if len(ttft) else 1.0,
        gpu_hours=gpu_hours,
        vs_clairvoyant=(gpu_hours / reference_gpu_hours) if reference_gpu_hours else None,
        pending_pod_minutes=result.pending_pod_seconds / 60.0,
        scale_events=result.scale_events,
        peak_replicas=result.peak_replicas,
        wall_seconds=result.wall_s,
    )


def all_figures(
    results: Sequence[RunResult], objective_s: float, reference: str = "clairvoyant"
) -> list[Figures]:
    ref = next((r for r in results if r.name == reference), None)
    ref_hours = ref.gpu_seconds / 3600.0 if ref is not None else None
    return [figures(r, objective_s, ref_hours) for r in results]


def table(rows: Sequence[Figures], objective_s: float) -> str:
    head = (
        "policy",
        "served",
        "TTFT p50",
        "p95",
        "p99",
        f"<= {objective_s:g}s",
        "GPU-h",
        "vs clairv.",
        "Pending pod-min",
        "scale events",
        "peak replicas",
    )
    body = [
        (
            f.policy,
            f"{f.served:,}",
            f"{f.ttft_p50_s:.2f}s",
            f"{f.ttft_p95_s:.2f}s",
            f"{f.ttft_p99_s:.2f}s",
            f"{100 * f.within_objective:.2f}%",
            f"{f.gpu_hours:.2f}",
            "-" if f.vs_clairvoyant is None else f"{f.vs_clairvoyant:.2f}x",
            f"{f.pending_pod_minutes:.1f}",
            str(f.scale_events),
            str(f.peak_replicas),
        )
        for f in rows
    ]
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        return "  ".join([first, *(c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))])

    return "\n".join([line(head), line(["-" * w for w in widths]), *(line(r) for r in body)])


def write_summary(path: Path, rows: Sequence[Figures], context: Mapping[str, Any]) -> None:
    data = {**context, "policies": [asdict(f) for f in rows]}
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")


def _bucket_s(horizon_s: float) -> float:
    return 60.0 if horizon_s <= 6 * 3600 else 600.0


def _per_bucket_p95(result: RunResult, bucket_s: float, size: int) -> np.ndarray:
    out = np.full(size, np.nan)
    if not len(result.ttft):
        return out
    buckets = (result.arrivals // bucket_s).astype(np.int64)
    order = np.argsort(buckets, kind="stable")
    b_sorted = buckets[order]
    t_sorted = result.ttft[order]
    edges = np.searchsorted(b_sorted, np.arange(size + 1))
    for i in range(size):
        lo, hi = edges[i], edges[i + 1]
        if hi > lo:
            out[i] = np.percentile(t_sorted[lo:hi], 95)
    return out


def plot(
    path: Path,
    trace: Trace,
    cfg: ClusterConfig,
    results: Sequence[RunResult],
    objective_s: float,
    title: str,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    horizon = max((r.horizon_s for r in results), default=60.0)
    bucket = _bucket_s(horizon)
    hours = horizon > 6 * 3600
    unit = 3600.0 if hours else 60.0
    demand = busy_per_bucket(trace, cfg, bucket)
    size = len(demand)
    x = (np.arange(size) + 0.5) * bucket / unit

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(13, 8.5), sharex=True, height_ratios=[3, 2])
    top.fill_between(
        x, demand, step="mid", color="0.85", label="demand: replicas of GPU time the requests take"
    )
    colors = {"this scaler": "tab:blue", "clairvoyant": "tab:green"}
    palette = iter(["tab:red", "tab:orange", "tab:purple", "tab:brown", "tab:pink", "tab:olive"])
    for r in results:
        color = colors.get(r.name) or next(palette, "tab:gray")
        style = "--" if r.name == "clairvoyant" else "-"
        top.step(
            r.tick_t / unit,
            r.tick_ready,
            where="post",
            color=color,
            ls=style,
            lw=1.4,
            label=f"{r.name}: Ready replicas",
        )
        if r.tick_pending.any():
            top.step(
                r.tick_t / unit,
                r.tick_spec,
                where="post",
                color=color,
                ls=":",
                lw=1.0,
                label=f"{r.name}: replicas incl. Pending",
            )
        p95 = _per_bucket_p95(r, bucket, size)
        bottom.plot(x, p95, color=color, ls=style, lw=1.2, label=r.name)
    top.axhline(
        cfg.max_replicas_on_gpus,
        color="black",
        lw=1.0,
        ls="-.",
        label=f"GPUs available: {cfg.max_replicas_on_gpus} replicas",
    )
    top.set_ylabel("replicas")
    top.set_ylim(bottom=0)
    top.set_title(title, fontsize=11)
    top.legend(loc="upper left", fontsize=8, ncol=2)
    top.grid(alpha=0.3)
    bottom.axhline(objective_s, color="black", lw=1.0, ls="-.", label=f"TTFT objective {objective_s:g}s")
    bottom.set_yscale("log")
    bottom.set_ylabel(f"TTFT p95 per {'10 min' if bucket == 600 else 'minute'} (s, log)")
    bottom.set_xlabel("hours since the trace began" if hours else "minutes since the trace began")
    bottom.legend(loc="upper left", fontsize=8, ncol=4)
    bottom.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
