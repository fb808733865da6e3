"""Figures per policy, the comparison table, what the table does not say by itself, summary.json
and replay.png.

Every policy's GPU-hours are divided by two references: the clairvoyant's (the cheapest schedule
found that meets the objective, knowing the future) and the static pool's at the clairvoyant's
peak (``scaler.replay.compare``: the fleet provisioned once for the busiest minute). Beside the
table, ``own_lines`` says how many of a policy's GPU-hours held replicas only for the user's own
floor and pre-warm windows (``scaler.replay.held``), and its ratio without what the clairvoyant
does not hold (the windows, and a floor above the clairvoyant's, which keeps this scaler's
minReplicas):

    without = (GPU-h - windows-h - floor-above-h) / clairvoyant GPU-h

and ``scale_lines`` how often each policy changed scale against the clairvoyant. *Example*: 673
GPU-h at 1.28x a clairvoyant's 526, of which 96 held only for a cron window and 20 for the floor
(minReplicas 2, the clairvoyant's too, so none above it): ``(673 - 96) / 526 = 1.10x``.
"""

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

from scaler.decider.spec import Window
from scaler.inventory.scaledobject import Fallback
from scaler.replay.compare import CLAIRVOYANT, STATIC, busy_per_bucket
from scaler.replay.fleet.cluster import ClusterConfig
from scaler.replay.held import FLOOR_ABOVE_KEY, FLOOR_KEY, PREWARM_KEY
from scaler.replay.policies import FAILED_CALLS_KEY, FALLBACK_KEY, HPA_CALLS_KEY, LOOP_CALLS_KEY
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
    vs_static: float | None = None  # GPU-hours / the static pool's at the clairvoyant's peak
    floor_gpu_hours: float = 0.0  # GPU-hours that held replicas only for the floor (scaler.replay.held)
    prewarm_gpu_hours: float = 0.0  # ... only for the pre-warm windows (cron triggers)
    floor_above_gpu_hours: float = 0.0  # ... only for a floor above the clairvoyant's
    # (GPU-hours - windows - floor above the clairvoyant's) / the clairvoyant's: the ratio without them
    vs_clairvoyant_without_own: float | None = None
    hours: float = 0.0  # the span scored

    @property
    def scale_events_per_hour(self) -> float:
        """Scale changes per hour of the span."""
        return self.scale_events / self.hours if self.hours > 0 else 0.0


@dataclass(frozen=True)
class References:
    """What every policy's GPU-hours are divided by: the clairvoyant's and the static pool's at the
    clairvoyant's peak; None where that run is not in the comparison."""

    clairvoyant_gpu_hours: float | None = None
    static_gpu_hours: float | None = None


def _hours(result: RunResult, key: str) -> float:
    return result.extra.get(key, 0.0) / 3600.0


def figures(result: RunResult, objective_s: float, references: References | None = None) -> Figures:
    """The figures of one run, GPU-hours divided by the references' when given."""
    refs = references or References()
    ttft = result.ttft
    served = int(np.count_nonzero(result.arrivals + ttft <= result.horizon_s))
    p50, p95, p99 = (float(v) for v in np.percentile(ttft, [50, 95, 99])) if len(ttft) else (0.0, 0.0, 0.0)
    gpu_hours = result.gpu_seconds / 3600.0
    floor, prewarm, above = (_hours(result, k) for k in (FLOOR_KEY, PREWARM_KEY, FLOOR_ABOVE_KEY))
    cv, static = refs.clairvoyant_gpu_hours, refs.static_gpu_hours
    return Figures(
        policy=result.name,
        requests=len(ttft),
        served=served,
        ttft_p50_s=p50,
        ttft_p95_s=p95,
        ttft_p99_s=p99,
        within_objective=float(np.mean(ttft <= objective_s)) if len(ttft) else 1.0,
        gpu_hours=gpu_hours,
        vs_clairvoyant=(gpu_hours / cv) if cv else None,
        pending_pod_minutes=result.pending_pod_seconds / 60.0,
        scale_events=result.scale_events,
        peak_replicas=result.peak_replicas,
        wall_seconds=result.wall_s,
        vs_static=(gpu_hours / static) if static else None,
        floor_gpu_hours=floor,
        prewarm_gpu_hours=prewarm,
        floor_above_gpu_hours=above,
        vs_clairvoyant_without_own=((gpu_hours - prewarm - above) / cv) if cv else None,
        hours=result.horizon_s / 3600.0,
    )


def all_figures(
    results: Sequence[RunResult],
    objective_s: float,
    reference: str = CLAIRVOYANT,
    static: str = STATIC,
) -> list[Figures]:
    """The figures of every run, GPU-hours divided by the ``reference`` run's and the ``static`` run's."""
    by_name = {r.name: r for r in results}
    ref, fixed = by_name.get(reference), by_name.get(static)
    refs = References(
        None if ref is None else ref.gpu_seconds / 3600.0,
        None if fixed is None else fixed.gpu_seconds / 3600.0,
    )
    return [figures(r, objective_s, refs) for r in results]


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
        "vs static",
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
            "-" if f.vs_static is None else f"{f.vs_static:.2f}x",
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


# Scale changes more than this many times the clairvoyant's are said (the decision-quality
# benchmark's target: at most twice the clairvoyant's).
MANY_CHANGES_RATIO = 2.0
# A cold start at least this long (s) makes each change costly: a replica ordered now serves
# minutes later, and one removed took that long to start.
LONG_COLD_START_S = 120.0
# Changes an hour below which none is said, however they compare: a few changes a day are no churn.
MANY_CHANGES_PER_HOUR = 1.0


def static_line(search_peak: int, gpus_per_replica: int) -> str:
    """What the static row is: its size, and where the size came from."""
    return (
        f"{STATIC}: {search_peak} replicas ({search_peak * gpus_per_replica} GPUs) Ready for the whole"
        " span: the clairvoyant's largest per-minute replica count, a pool provisioned once for the"
        " busiest minute"
    )


def own_lines(rows: Sequence[Figures]) -> list[str]:
    """Per policy, the GPU-hours that held replicas only for the user's floor and pre-warm windows,
    and its ratio to the clairvoyant with and without what the clairvoyant does not hold (module
    docstring)."""
    by = {f.policy: f for f in rows}
    cv = by.get(CLAIRVOYANT)
    if cv is None:
        return []
    lines = [
        "GPU-hours held only for your own pre-warm windows (cron triggers) and floor (minReplicas): per"
        " tick, the replicas above what the demand asked. Without them: the windows and any floor above"
        " the clairvoyant's left out (it keeps this scaler's minReplicas, and has no windows); the"
        " attainment is the table's, with them (docs/replay-report.md)"
    ]
    width = max(len(f.policy) for f in rows)
    for f in rows:
        if f.policy in (STATIC, CLAIRVOYANT):
            continue
        ratio = "-" if f.vs_clairvoyant is None else f"{f.vs_clairvoyant:.2f}x"
        without = "-" if f.vs_clairvoyant_without_own is None else f"{f.vs_clairvoyant_without_own:.2f}x"
        above = (
            f", {f.floor_above_gpu_hours:,.2f} of it above the clairvoyant's"
            if f.floor_above_gpu_hours
            else ""
        )
        lines.append(
            f"  {f.policy:<{width}}  {ratio} the clairvoyant; of its {f.gpu_hours:,.2f} GPU-h"
            f" {f.prewarm_gpu_hours:,.2f} held for pre-warm windows and {f.floor_gpu_hours:,.2f} for the"
            f" floor{above}: without them {without}"
        )
    lines.append(
        f"  {CLAIRVOYANT:<{width}}  no windows; its floor held {cv.floor_gpu_hours:,.2f} of its"
        f" {cv.gpu_hours:,.2f} GPU-h"
    )
    return lines


def scale_lines(rows: Sequence[Figures], cold_start_s: float) -> list[str]:
    """How often each policy changed scale against the clairvoyant; and where that is many (more than
    twice the clairvoyant's, and at least one an hour) for a long cold start, what each change costs."""
    by = {f.policy: f for f in rows}
    cv = by.get(CLAIRVOYANT)
    if cv is None or cv.hours <= 0:
        return []
    parts = [
        f"{f.policy} {f.scale_events:,} ({f.scale_events_per_hour:.2f}/h)" for f in rows if f.policy != STATIC
    ]
    lines = [f"scale changes over {cv.hours:,.1f} h: " + ", ".join(parts)]
    reference = max(cv.scale_events_per_hour, 1.0 / cv.hours)  # one change over the span at least
    for f in rows:
        if f.policy in (STATIC, CLAIRVOYANT):
            continue
        times = f.scale_events_per_hour / reference
        many = times > MANY_CHANGES_RATIO and f.scale_events_per_hour >= MANY_CHANGES_PER_HOUR
        if many and cold_start_s >= LONG_COLD_START_S:
            lines.append(
                f"note: {f.policy} changed scale {times:.1f}x as often as the clairvoyant with a"
                f" {cold_start_s:g}s cold start: each replica it adds serves {cold_start_s:g}s after it"
                " is ordered, and each it removes took as long to start"
            )
    return lines


def keda_calls(results: Sequence[RunResult]) -> dict[str, dict[str, float]]:
    """Per run with this scaler's trigger, KEDA's calls of it and its fallback (``KedaPolicy``):
    ``hpa_calls``, ``loop_calls``, ``failed_calls``, ``fallback_active_s``."""
    keys = {
        "hpa_calls": HPA_CALLS_KEY,
        "loop_calls": LOOP_CALLS_KEY,
        "failed_calls": FAILED_CALLS_KEY,
        "fallback_active_s": FALLBACK_KEY,
    }
    return {
        r.name: {name: r.extra[key] for name, key in keys.items()}
        for r in results
        if HPA_CALLS_KEY in r.extra
    }


def keda_lines(
    version: str, results: Sequence[RunResult], fallbacks: Mapping[str, Fallback | None]
) -> list[str]:
    """Per run with this scaler's trigger, the GetMetrics calls KEDA ``version`` made from each path,
    how many failed (inputs past maxStalenessSeconds) and how long the fallback was active.

    *Example*: ``KEDA 2.21: this scaler: 5,760 GetMetrics calls from HPA syncs, 0 from the scale loop,
    26 failed; fallback active 6 min (failureThreshold 3)``.
    """
    lines = []
    for name, calls in keda_calls(results).items():
        fallback = fallbacks.get(name)
        if fallback is None:
            after = "no fallback: while the metric errors the HPA holds its replicas"
        else:
            minutes = calls["fallback_active_s"] / 60
            after = f"fallback active {minutes:,.0f} min (failureThreshold {fallback.failure_threshold})"
        lines.append(
            f"KEDA {version}: {name}: {calls['hpa_calls']:,.0f} GetMetrics calls from HPA syncs,"
            f" {calls['loop_calls']:,.0f} from the scale loop, {calls['failed_calls']:,.0f} failed; {after}"
        )
    return lines


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
    windows: Sequence[Window] = ()  # pre-warm windows and cron triggers, shaded
    source: str = ""  # the trace's source and licence, printed under the figure


def window_spans(
    windows: Sequence[Window], start: datetime, end: datetime
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


def _limits(ax: Any, limit: int, floor: int | None, ceiling: float) -> list[Any]:
    """The GPU limit and the floor as lines named on a right-hand axis of their own, where no line
    of the data can cover their labels; a limit above the scale is named in the legend instead.
    Returns the legend entries to add."""
    from matplotlib.lines import Line2D

    marks: dict[float, str] = {}
    extra = []
    if limit <= ceiling:
        ax.axhline(limit, color="black", lw=1.0, ls="-.")
        marks[limit] = f"GPU limit {limit}"
    else:
        extra.append(Line2D([], [], color="none", label=f"GPU limit: {limit} replicas, above the scale"))
    if floor is not None:
        ax.axhline(floor, color="0.35", lw=0.9, ls="--")
        marks[floor] = f"floor (minReplicas) {floor}" if floor not in marks else f"{marks[floor]}, floor"
    if marks:
        right = ax.twinx()
        right.set_ylim(ax.get_ylim())
        right.set_yticks(list(marks), list(marks.values()), fontsize=8, color="0.3")
        right.tick_params(axis="y", length=0)
    return extra


def _legends(top: Any, bottom: Any, extra: Sequence[Any]) -> None:
    """Each panel's legend above it, never over the data (over a week, the first day was under
    them), with ``extra`` entries in the top one."""
    handles, labels = top.get_legend_handles_labels()
    handles += list(extra)
    labels += [h.get_label() for h in extra]
    top.legend(handles, labels, loc="lower left", bbox_to_anchor=(0, 1.0), fontsize=8, ncol=3, frameon=False)
    bottom.legend(loc="lower left", bbox_to_anchor=(0, 1.0), fontsize=8, ncol=6, frameon=False)


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


@dataclass(frozen=True)
class LineStyle:
    """How one run's lines are drawn in replay.png."""

    color: str
    ls: str
    lw: float
    alpha: float
    zorder: float

    def kwargs(self) -> dict[str, Any]:
        """The style as matplotlib's keyword arguments."""
        return {"color": self.color, "ls": self.ls, "lw": self.lw, "alpha": self.alpha, "zorder": self.zorder}


SCALER_NAMES = ("this scaler", "new (this scaler)")  # replay's and convert --replay's names for it
PALETTE = ("tab:red", "tab:orange", "tab:brown", "tab:pink", "tab:olive", "tab:cyan")


def line_styles(names: Sequence[str]) -> dict[str, LineStyle]:
    """Each run's line style and drawing order, bottom first: the static pool (dash-dotted), the
    other policies as wide pale bands (KEDA's), the clairvoyant (dashed), and this scaler thin and
    solid on top. Where this scaler holds what KEDA holds (a pre-warm window both keep), its line
    runs inside KEDA's band instead of hiding under it."""
    palette = iter(PALETTE)
    out = {}
    for index, name in enumerate(names):
        if name in SCALER_NAMES:
            out[name] = LineStyle("tab:blue", "-", 1.3, 1.0, 5.0)
        elif name == CLAIRVOYANT:
            out[name] = LineStyle("tab:green", "--", 1.3, 1.0, 4.0)
        elif name == STATIC:
            out[name] = LineStyle("tab:purple", "-.", 1.2, 0.9, 2.0)
        else:  # bands beneath, each a little narrower than the one before, all visible
            out[name] = LineStyle(
                next(palette, "tab:gray"), "-", max(2.5, 5.0 - index), 0.45, 3.0 + index / 100
            )
    return out


def _caption(fig: Any, source: str) -> None:
    caption = (
        "GPU-hours are compared with the clairvoyant's, which knows every request in advance, and with a"
        " static pool held at the clairvoyant's peak. Lines that coincide are drawn wide and pale beneath"
        " (KEDA), thin on top (this scaler)."
    )
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
    import matplotlib.pyplot as plt

    fig = replay_figure(trace, cfg, results, objective_s, title, context, figures_by_policy)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def replay_figure(
    trace: Trace,
    cfg: ClusterConfig,
    results: Sequence[RunResult],
    objective_s: float,
    title: str,
    context: PlotContext | None = None,
    figures_by_policy: Mapping[str, Figures] | None = None,
) -> Any:
    """replay.png's figure (``plot`` saves it): the replicas panel over the TTFT panel."""
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
    top.fill_between(x, demand, step="mid", color="0.85", lw=0, zorder=1)
    # Its outline above every policy's line (KEDA's wide band would hide the shape otherwise).
    top.step(x, demand, where="mid", color="0.45", lw=0.8, zorder=6)
    top.fill_between(
        [], [], color="0.85", ec="0.45", lw=0.8, label="demand: replicas of GPU time the requests take"
    )
    peak = float(np.max(demand)) if size else 1.0
    slowest = objective_s
    styles = line_styles([r.name for r in results])
    # Drawn from the bottom up (``line_styles``): where lines coincide, the one on top is thin and
    # the ones beneath are wide and pale, so each stays visible.
    for r in sorted(results, key=lambda r: styles[r.name].zorder):
        style = styles[r.name]
        f = (figures_by_policy or {}).get(r.name)
        scores = (
            ""
            if f is None
            else f" ({f.gpu_hours:.2f} GPU-h, {100 * f.within_objective:.2f}% <= {objective_s:g}s)"
        )
        line = style.kwargs()
        top.step(wall(r.tick_t), r.tick_ready, where="post", label=f"{r.name}: Ready{scores}", **line)
        peak = max(peak, float(np.max(r.tick_spec)) if len(r.tick_spec) else 0.0)
        if r.tick_pending.any():
            top.step(
                wall(r.tick_t),
                r.tick_spec,
                where="post",
                color=style.color,
                ls=":",
                lw=1.0,
                zorder=style.zorder,
                label=f"{r.name}: incl. Pending",
            )
        p95 = _per_bucket_p95(r, bucket, size)
        slowest = max(slowest, float(np.nanmax(p95)) if np.isfinite(p95).any() else 0.0)
        bottom.plot(x, p95, label=r.name, **line)
    ceiling = peak * 1.2 + 1
    top.set_ylim(0, ceiling)  # fitted to the data: the GPU limit is a labelled line, not the axis
    extra = _limits(top, cfg.max_replicas_on_gpus, ctx.floor, ceiling)
    top.set_ylabel("replicas")
    fig.suptitle(title, fontsize=11)
    top.grid(alpha=0.3)
    bottom.axhline(objective_s, color="black", lw=1.0, ls="-.", label=f"TTFT objective {objective_s:g}s")
    _axes(bottom, bucket, ctx.timezone, origin, slowest)
    _legends(top, bottom, extra)
    bottom.grid(alpha=0.3, which="both")
    _caption(fig, ctx.source)
    return fig
