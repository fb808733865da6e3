"""Figures per policy, the comparison table, summary.json and replay.png."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
from croniter import croniter

from scaler.config import PrewarmWindow
from scaler.replay.cluster import ClusterConfig
from scaler.replay.compare import busy_per_bucket
from scaler.replay.replay import RunResult
from scaler.replay.trace import Trace


@dataclass(frozen=True)
class Figures:
    """One policy's row of the comparison: TTFT, attainment, GPU-hours and scaling figures."""

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
    """The figures of one run, GPU-hours divided by the reference's when given."""
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
    """The figures of every run, GPU-hours divided by the ``reference`` run's."""
    ref = next((r for r in results if r.name == reference), None)
    ref_hours = ref.gpu_seconds / 3600.0 if ref is not None else None
    return [figures(r, objective_s, ref_hours) for r in results]


def table(rows: Sequence[Figures], objective_s: float) -> str:
    """The comparison as an aligned text table, one row per policy."""
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
    """Write ``context`` and every policy's figures to ``path`` as JSON."""
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


@dataclass(frozen=True)
class PlotContext:
    """What replay.png needs beside the runs: wall time, the floor, windows, the source."""

    start: datetime  # wall time of the trace's second 0
    timezone: str = "UTC"  # the x axis (the ScaledObject's timezone)
    floor: int | None = None  # minReplicas
    windows: Sequence[PrewarmWindow] = ()  # pre-warm windows and cron triggers, shaded
    source: str = ""  # the trace's source and licence, printed under the figure


def window_spans(
    windows: Sequence[PrewarmWindow], start: datetime, end: datetime
) -> list[tuple[datetime, datetime]]:
    """The intervals within [start, end) during which any window is open (UTC).

    Worked example: 0 9 * * 1-5 -> 0 12 * * 1-5 in Asia/Shanghai over Monday 2026-12-07 00:00
    to Tuesday 06:00 (+08:00) is one span, 01:00 to 04:00 UTC on the Monday.
    """
    spans = []
    for window in windows:
        zone = ZoneInfo(window.timezone or "UTC")
        opens = croniter(window.start, start.astimezone(zone) - timedelta(days=8))
        while True:
            begin: datetime = opens.get_next(datetime)
            if begin >= end:
                break
            close: datetime = croniter(window.end, begin).get_next(datetime)
            if close > start:
                spans.append((max(begin, start).astimezone(UTC), min(close, end).astimezone(UTC)))
    return sorted(spans)


def _limits(ax: Any, limit: int, floor: int | None, ceiling: float) -> None:
    """The GPU limit and the floor as labelled lines (the limit noted when above the axis)."""
    if limit <= ceiling:
        ax.axhline(limit, color="black", lw=1.0, ls="-.")
    ax.annotate(
        f"GPU limit: {limit} replicas" + ("" if limit <= ceiling else ", above the scale"),
        (0.995, min(limit, ceiling * 0.97)),
        xycoords=("axes fraction", "data"),
        ha="right",
        va="bottom" if limit <= ceiling else "top",
        fontsize=8,
    )
    if floor is not None:
        ax.axhline(floor, color="0.35", lw=0.9, ls="--")
        ax.annotate(
            f"floor (minReplicas) {floor}",
            (0.995, floor),
            xycoords=("axes fraction", "data"),
            ha="right",
            va="bottom",
            fontsize=8,
            color="0.35",
        )


def _axes(ax: Any, bucket: float, timezone: str, origin: datetime, slowest: float) -> None:
    """TTFT on a log axis fitted to the slowest p95 and ticked in seconds; wall time in the zone."""
    import matplotlib.dates as mdates

    ax.set_yscale("log")
    ceiling = slowest * 1.5
    ticks = [t for t in (0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800) if t <= ceiling]
    ax.set_yticks(ticks, [f"{t:g}s" for t in ticks])
    ax.set_ylim(0.05, ceiling)
    ax.set_ylabel(f"TTFT p95 per {'10 min' if bucket == 600 else 'minute'}")
    ax.set_xlabel(f"wall time ({timezone}), from {origin:%a %Y-%m-%d %H:%M}")
    zone = ZoneInfo(timezone)
    locator = mdates.AutoDateLocator(tz=zone)  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=zone))  # type: ignore[no-untyped-call]


def _caption(fig: Any, source: str) -> None:
    caption = "GPU-hours are compared with the clairvoyant's, which knows every request in advance."
    if source:
        caption += f"  Trace: {source}."
    lines = textwrap.wrap(caption, 190)
    fig.text(0.005, 0.002, "\n".join(lines), fontsize=8, color="0.3", ha="left", va="bottom")
    room = 0.022 * len(lines)  # leave room for the caption
    fig.get_layout_engine().set(rect=(0, room, 1, 1 - room))


def plot(
    path: Path,
    trace: Trace,
    cfg: ClusterConfig,
    results: Sequence[RunResult],
    objective_s: float,
    title: str,
    context: PlotContext | None = None,
    figures_by_policy: Mapping[str, Figures] | None = None,
) -> None:
    """replay.png: replicas against demand, TTFT p95 against the objective, in wall time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ctx = context or PlotContext(start=datetime(2026, 12, 7, tzinfo=UTC))
    zone = ZoneInfo(ctx.timezone)
    horizon = max((r.horizon_s for r in results), default=60.0)
    bucket = _bucket_s(horizon)
    demand = busy_per_bucket(trace, cfg, bucket)
    size = len(demand)
    origin = ctx.start.astimezone(zone)

    def wall(seconds: Any) -> Any:
        return [origin + timedelta(seconds=float(v)) for v in np.asarray(seconds)]

    x = wall((np.arange(size) + 0.5) * bucket)
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(13, 8.5), sharex=True, height_ratios=[3, 2], layout="constrained"
    )
    spans = window_spans(ctx.windows, origin, origin + timedelta(seconds=horizon))
    for begin, end in spans:
        for ax in (top, bottom):
            ax.axvspan(begin, end, color="gold", alpha=0.15, lw=0)
    if spans:
        top.fill_between([], [], color="gold", alpha=0.3, label="pre-warm / cron windows")
    top.fill_between(
        x, demand, step="mid", color="0.85", label="demand: replicas of GPU time the requests take"
    )
    colors = {"this scaler": "tab:blue", "clairvoyant": "tab:green"}
    palette = iter(["tab:red", "tab:orange", "tab:purple", "tab:brown", "tab:pink", "tab:olive"])
    peak = float(np.max(demand)) if size else 1.0
    slowest = objective_s
    for r in results:
        color = colors.get(r.name) or next(palette, "tab:gray")
        style = "--" if r.name == "clairvoyant" else "-"
        f = (figures_by_policy or {}).get(r.name)
        scores = (
            ""
            if f is None
            else f" ({f.gpu_hours:.2f} GPU-h, {100 * f.within_objective:.2f}% <= {objective_s:g}s)"
        )
        top.step(
            wall(r.tick_t),
            r.tick_ready,
            where="post",
            color=color,
            ls=style,
            lw=1.4,
            label=f"{r.name}: Ready{scores}",
        )
        peak = max(peak, float(np.max(r.tick_spec)) if len(r.tick_spec) else 0.0)
        if r.tick_pending.any():
            top.step(
                wall(r.tick_t),
                r.tick_spec,
                where="post",
                color=color,
                ls=":",
                lw=1.0,
                label=f"{r.name}: incl. Pending",
            )
        p95 = _per_bucket_p95(r, bucket, size)
        slowest = max(slowest, float(np.nanmax(p95)) if np.isfinite(p95).any() else 0.0)
        bottom.plot(x, p95, color=color, ls=style, lw=1.2, label=r.name)
    ceiling = peak * 1.2 + 1
    top.set_ylim(0, ceiling)  # fitted to the data: the GPU limit is a labelled line, not the axis
    _limits(top, cfg.max_replicas_on_gpus, ctx.floor, ceiling)
    top.set_ylabel("replicas")
    top.set_title(title, fontsize=11)
    top.legend(loc="upper left", fontsize=8, ncol=2)
    top.grid(alpha=0.3)
    bottom.axhline(objective_s, color="black", lw=1.0, ls="-.", label=f"TTFT objective {objective_s:g}s")
    _axes(bottom, bucket, ctx.timezone, origin, slowest)
    bottom.legend(loc="upper left", fontsize=8, ncol=4)
    bottom.grid(alpha=0.3, which="both")
    _caption(fig, ctx.source)
    fig.savefig(path, dpi=110)
    plt.close(fig)
