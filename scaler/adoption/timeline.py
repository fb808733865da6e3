"""``scaler timeline``: one ScaledObject's decision history from Prometheus, as a picture.

Range queries over the series the scaler exports (docs/metrics.md), selected by
``{namespace="NS", scaledobject="NAME"}``, one step per ``--step`` (default: the span
over 600 points, at least 15 s):

* replicas: the target (``llm_scaler_desired_replicas``), what landed
  (``llm_scaler_landed_replicas``, else kube-state-metrics' ``kube_deployment_spec_replicas``)
  and what is Ready (``llm_scaler_input_ready_replicas``, else
  ``kube_deployment_status_replicas_ready``), beside the demand in replicas of GPU time
  (``llm_scaler_busy_replicas``, now and at the forecast horizon) and ``minReplicas``/``maxReplicas``;
* which signal set the target (``llm_scaler_binding_signal_info``), as a coloured band;
* each clamp that changed it (``llm_scaler_clamp_active``), as marks above the target;
* TTFT p95 and p99 against ``ttftObjectiveSeconds``;
* the capacity scale (``llm_scaler_capacity_scale_ratio``) where it was other than 1: what the
  measured objective multiplied the model's per-replica capacities by (below 1, the fleet the model
  sized was late, so the target is higher than the model alone asks; above 1, the TTFT tail was
  shorter than the model's, so it is lower; ``scaler.decider.calibration``).

The summary printed beside the PNG is computed from the same points: where the target was
read (the steps, and the span they cover of the span asked), the share of the span each signal
was binding, how many steps each clamp was active, the share of steps with TTFT p99 above the
objective, and the capacity scale's range. Worked example: 480 steps of 15 s (2 h) with ``load``
binding at 300 of them print ``load 62.5%``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from scaler.cli import args as cliargs
from scaler.errors import InputError
from scaler.replay import INSTALL_HINT, missing_extra
from scaler.replay.span import duration_s

Points = list[tuple[float, float]]

SERIES = {
    "target": "llm_scaler_desired_replicas",
    "landed": "llm_scaler_landed_replicas",
    "ready": "llm_scaler_input_ready_replicas",
    "busy": "llm_scaler_busy_replicas",
    "forecast_busy": "llm_scaler_forecast_busy_replicas",
    "min": "llm_scaler_min_replicas",
    "max": "llm_scaler_max_replicas",
    "ttft_p95": "llm_scaler_input_ttft_p95_seconds",
    "ttft_p99": "llm_scaler_input_ttft_p99_seconds",
    "objective": "llm_scaler_ttft_objective_seconds",
    "capacity_scale": "llm_scaler_capacity_scale_ratio",
}
# kube-state-metrics, for where the scaler has no Kubernetes source (by Deployment name).
KUBE_STATE = {"landed": "kube_deployment_spec_replicas", "ready": "kube_deployment_status_replicas_ready"}
BINDING = ("llm_scaler_binding_signal_info", "signal")
CLAMPS = ("llm_scaler_clamp_active", "kind")
SIGNAL_COLOURS = {
    "floor": "tab:gray",
    "prewarm": "tab:purple",
    "queue": "tab:red",
    "load": "tab:blue",
    "last_known": "tab:brown",
}


class TraceError(InputError):
    """Nothing to draw, or an argument that cannot be used; the message says which."""


@dataclass
class History:
    """The series of one ScaledObject over a span, each as (unix time, value) points."""

    namespace: str
    name: str
    start: datetime
    end: datetime
    step_s: float
    series: dict[str, Points] = field(default_factory=dict)
    binding: dict[str, Points] = field(default_factory=dict)  # signal -> points where it is 1
    clamps: dict[str, Points] = field(default_factory=dict)  # kind -> points where active
    sources: dict[str, str] = field(default_factory=dict)  # series key -> the metric it came from

    def steps(self) -> int:
        """Points in the target series."""
        return len(self.series.get("target", []))

    def data_span(self) -> tuple[datetime, datetime]:
        """From the first point of the target to one step after its last: what the data covers,
        which may be less than the span asked (the scaler started later, or stopped)."""
        target = self.series.get("target") or [(self.start.timestamp(), 0.0)]
        first, last = target[0][0], target[-1][0] + self.step_s
        return (
            datetime.fromtimestamp(first, tz=UTC),
            min(datetime.fromtimestamp(last, tz=UTC), max(self.end, datetime.fromtimestamp(first, tz=UTC))),
        )

    def capacity_scale(self) -> tuple[float, float, float, float] | None:
        """The capacity scale's share of steps below 1 and its least value, its share above 1 and its
        largest, or None without the series."""
        values = [v for _, v in self.series.get("capacity_scale", [])]
        if not values:
            return None
        n = len(values)
        return sum(v < 1 for v in values) / n, min(values), sum(v > 1 for v in values) / n, max(values)

    def binding_share(self) -> dict[str, float]:
        """Each signal's share of the steps it was binding, largest first."""
        counts = {s: sum(1 for _, v in pts if v >= 1) for s, pts in self.binding.items()}
        total = sum(counts.values())
        if not total:
            return {}
        return {s: n / total for s, n in sorted(counts.items(), key=lambda kv: -kv[1]) if n}

    def clamp_steps(self) -> dict[str, int]:
        """Steps each clamp was active, for the clamps active at least once."""
        return {k: n for k, pts in sorted(self.clamps.items()) if (n := sum(1 for _, v in pts if v >= 1))}

    def ttft_over_objective(self) -> float | None:
        """Share of steps with TTFT p99 above the objective, or None without both series."""
        p99 = dict(self.series.get("ttft_p99", []))
        objective = dict(self.series.get("objective", []))
        both = [(v, objective[t]) for t, v in p99.items() if t in objective]
        return sum(v > o for v, o in both) / len(both) if both else None

    def summary(self) -> list[str]:
        """The summary lines printed beside the picture (module docstring)."""
        target = [v for _, v in self.series.get("target", [])]
        first, last = self.data_span()
        asked = (self.end - self.start).total_seconds()
        lines = [
            f"{self.namespace}/{self.name}: a target at {self.steps()} steps of {self.step_s:g}s, from"
            f" {first.isoformat()} to {last.isoformat()} ({_minutes((last - first).total_seconds())} of the"
            f" {_minutes(asked)} asked, {self.start.isoformat()} to {self.end.isoformat()});"
            f" target {min(target):g} to {max(target):g}",
            "binding: "
            + (", ".join(f"{s} {100 * p:.1f}%" for s, p in self.binding_share().items()) or "none"),
            "clamps active: "
            + (", ".join(f"{k} {n} steps" for k, n in self.clamp_steps().items()) or "none"),
        ]
        over = self.ttft_over_objective()
        lines.append(
            "TTFT p99 above the objective: "
            + ("no TTFT series" if over is None else f"{100 * over:.1f}% of steps")
        )
        scale = self.capacity_scale()
        if scale is None:
            lines.append("capacity scale: no series")
        elif not (scale[0] or scale[2]):
            lines.append("capacity scale: 1 throughout (the model's capacities as measured)")
        else:
            parts = []
            if scale[0]:
                parts.append(
                    f"below 1 at {100 * scale[0]:.1f}% of steps, down to {scale[1]:.2g}x (the fleet the model"
                    " sized was late: the target higher than the model alone asks)"
                )
            if scale[2]:
                parts.append(
                    f"above 1 at {100 * scale[2]:.1f}% of steps, up to {scale[3]:.2g}x (the TTFT tail shorter"
                    " than the model's: the target lower)"
                )
            lines.append("capacity scale: " + "; ".join(parts))
        for key in ("landed", "ready"):
            lines.append(f"{key}: {self.sources.get(key, 'no series')}")
        return lines


def _minutes(seconds: float) -> str:
    """A span as a person says it: ``4 min``, ``2 h``, ``3.5 d``."""
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.3g} h"
    return f"{seconds / 86400:.3g} d"


def fetch(
    client: Any,
    namespace: str,
    name: str,
    start: datetime,
    end: datetime,
    step_s: float,
    deployment: str | None = None,
) -> History:
    """Range queries for one ScaledObject (``client``: scaler.sources.prometheus.PrometheusClient)."""
    selector = f'{{namespace="{namespace}", scaledobject="{name}"}}'
    history = History(namespace, name, start, end, step_s)
    for key, metric in SERIES.items():
        rows = client.range(f"max({metric}{selector})", start, end, step_s)
        if rows and rows[0][1]:
            history.series[key] = rows[0][1]
            history.sources[key] = metric
    if "target" not in history.series:
        raise TraceError(
            f"no llm_scaler_desired_replicas for {namespace}/{name} between {start.isoformat()} and"
            f" {end.isoformat()}: is this scaler scraped, and is the ScaledObject's name right?"
        )
    for key, metric in KUBE_STATE.items():
        if key in history.series or deployment is None:
            continue
        rows = client.range(
            f'max({metric}{{namespace="{namespace}", deployment="{deployment}"}})', start, end, step_s
        )
        if rows and rows[0][1]:
            history.series[key] = rows[0][1]
            history.sources[key] = f"{metric} (kube-state-metrics)"
    for target, (metric, label) in ((history.binding, BINDING), (history.clamps, CLAMPS)):
        for labels, points in client.range(f"max by ({label}) ({metric}{selector})", start, end, step_s):
            target[labels.get(label, "?")] = points
    return history


def _xs(points: Points, zone: ZoneInfo) -> list[datetime]:
    return [datetime.fromtimestamp(t, tz=zone) for t, _ in points]


def _ys(points: Points) -> list[float]:
    return [v for _, v in points]


# (series key, label, colour, line style, width) of the replicas panel's lines.
_LINES = (
    ("forecast_busy", "demand at the forecast horizon", "0.55", ":", 1.0),
    ("target", "target (what the scaler asked for)", "tab:blue", "-", 2.0),
    ("landed", "landed (Deployment spec.replicas)", "tab:orange", "-", 1.5),
    ("ready", "Ready replicas", "tab:green", "--", 1.2),
)


def _replicas(ax: Any, history: History, zone: ZoneInfo) -> None:
    s = history.series
    if "busy" in s:
        ax.fill_between(
            _xs(s["busy"], zone),
            _ys(s["busy"]),
            step="post",
            color="0.85",
            label="demand now (replicas of GPU time)",
        )
    for key, label, colour, style, width in _LINES:
        if key in s:
            ax.step(
                _xs(s[key], zone), _ys(s[key]), where="post", color=colour, ls=style, lw=width, label=label
            )
    keys = ("target", "landed", "ready", "busy", "forecast_busy", "min")
    peak = max([v for key in keys for _, v in s.get(key, [])], default=1.0)
    top = peak * 1.25 + 0.5
    ax.set_ylim(0, top)  # fitted to the data; maxReplicas is a labelled line, not the axis
    for key, label in (("min", "floor (minReplicas)"), ("max", "maxReplicas")):
        if key in s:
            value = s[key][-1][1]
            if value <= top:
                ax.axhline(value, color="0.3", lw=0.8, ls="-." if key == "min" else "--")
            shown = f"{label} {value:g}" + ("" if value <= top else ", above the scale")
            ax.annotate(
                shown,
                (0.995 if value > top else 0.005, min(value, top * 0.97)),
                xycoords=("axes fraction", "data"),
                ha="right" if value > top else "left",
                va="bottom" if value <= top else "top",
                fontsize=8,
                color="0.3",
            )
    target = dict(s["target"])
    markers = iter("v^sDP*X")
    for kind, points in sorted(history.clamps.items()):
        active = [(t, target.get(t, 0.0) + 0.35) for t, v in points if v >= 1]
        if active:
            marker = next(markers, "o")
            ax.scatter(_xs(active, zone), _ys(active), marker=marker, s=18, zorder=5, label=f"clamp: {kind}")
    ax.set_ylabel("replicas")
    ax.legend(loc="upper left", fontsize=8, ncol=2)


# Colours for signals not in SIGNAL_COLOURS (a newer scaler's), each its own.
_OTHER_COLOURS = ("tab:olive", "tab:cyan", "tab:pink", "tab:green", "black")


def _binding(ax: Any, history: History, zone: ZoneInfo) -> None:
    from matplotlib.patches import Patch

    handles = []
    others = iter(_OTHER_COLOURS)
    for signal, points in sorted(history.binding.items()):
        bound = [t for t, v in points if v >= 1]
        if not bound:
            continue  # never binding in the span: no legend entry for it
        colour = SIGNAL_COLOURS.get(signal) or next(others, "0.5")
        for t in bound:
            begin = datetime.fromtimestamp(t, tz=zone)
            ax.axvspan(begin, begin + timedelta(seconds=history.step_s), color=colour, lw=0)
        handles.append(Patch(color=colour, label=signal))
    ax.set_yticks([])
    ax.set_ylabel("binding", rotation=0, ha="right", va="center", fontsize=8)
    if handles:
        ax.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)


def _ttft(ax: Any, history: History, zone: ZoneInfo) -> None:
    s = history.series
    for key, colour in (("ttft_p95", "tab:olive"), ("ttft_p99", "tab:red")):
        if key in s:
            ax.plot(_xs(s[key], zone), _ys(s[key]), color=colour, lw=1.2, label=f"TTFT {key[-3:]}")
    top = max([v for key in ("ttft_p95", "ttft_p99") for _, v in s.get(key, [])], default=0.0)
    if "objective" in s:
        objective = s["objective"][-1][1]
        ax.axhline(objective, color="k", ls="--", lw=1, label=f"objective {objective:g} s")
        top = max(top, objective)
    ax.set_ylabel("seconds")
    ax.set_ylim(0, top * 1.2 or 1.0)  # the objective's line inside the panel, not on its edge
    handles, labels = ax.get_legend_handles_labels()
    scale = history.capacity_scale()
    if scale is not None and (scale[0] or scale[2]):  # why the target is not what the model alone asks
        twin = ax.twinx()
        xs, ys = _xs(s["capacity_scale"], zone), _ys(s["capacity_scale"])
        twin.step(xs, ys, where="post", color="tab:purple", lw=1.2)
        twin.axhline(1.0, color="tab:purple", ls=":", lw=0.8)
        twin.set_ylim(0, max(scale[3], 1.0) * 1.25)
        twin.set_ylabel("capacity scale (x)", color="tab:purple")
        more, names = twin.get_legend_handles_labels()
        handles += [*more, *twin.step([], [], color="tab:purple", lw=1.2)]
        labels += [*names, "capacity scale: below 1, the model's fleet was late; above 1, its tail long"]
    ax.legend(handles, labels, loc="upper left", fontsize=8)


def _time_axis(ax: Any, begin: datetime, end: datetime, zone: ZoneInfo) -> str:
    """Ticks every round interval the span holds, each labelled once: seconds on a span of minutes,
    the date on one of days (``%H:%M`` alone repeats a label on the first, names one hour of
    several days on the second). Returns what the labels show, for the axis title."""
    import matplotlib.dates as mdates

    span = (end - begin).total_seconds()
    locator = mdates.AutoDateLocator(tz=zone, minticks=4, maxticks=12)  # type: ignore[no-untyped-call]
    if span <= 20 * 60:
        fmt, shown = "%H:%M:%S", "time"
    elif span <= 36 * 3600:
        fmt, shown = "%H:%M", "time"
    else:
        fmt, shown = "%m-%d %H:%M", "date and time"
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.DateFormatter(fmt, tz=zone))  # type: ignore[no-untyped-call]
    ax.set_xlim(begin, end)
    return shown


def title(history: History, timezone: str = "UTC") -> str:
    """The picture's title: the span the data covers, and the span asked only where they differ
    (the scaler started later, or stopped), in ``timezone``.

    *Example*: ``inference/llama: decisions from 2026-11-30 08:48:00 to 08:52:00 UTC``.
    """
    zone = ZoneInfo(timezone)
    first, last = (t.astimezone(zone) for t in history.data_span())
    begin, end = history.start.astimezone(zone), history.end.astimezone(zone)
    if (last - first).total_seconds() < 3600:
        shown = f"{first:%Y-%m-%d %H:%M:%S} to {last:%H:%M:%S}"
    else:
        shown = f"{first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M}"
    asked = ""
    if max(abs((first - begin).total_seconds()), abs((last - end).total_seconds())) > history.step_s:
        asked = f" (of {begin:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} asked: no decision at the rest)"
    return f"{history.namespace}/{history.name}: decisions from {shown} {timezone}{asked}"


def draw(history: History, path: Path, timezone: str = "UTC") -> None:
    """Draw the history as a three-panel PNG at ``path``, times in ``timezone``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    zone = ZoneInfo(timezone)
    fig, (top, band, bottom) = plt.subplots(
        3, 1, figsize=(13, 8.5), sharex=True, height_ratios=[5, 0.5, 2.5], layout="constrained"
    )
    _replicas(top, history, zone)
    _binding(band, history, zone)
    _ttft(bottom, history, zone)
    first, last = (t.astimezone(zone) for t in history.data_span())
    top.set_title(title(history, timezone))
    axis = _time_axis(bottom, first, last, zone)
    bottom.set_xlabel(f"{axis} ({timezone})")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``scaler timeline`` subcommand (``trace``, its old name, still answers) and its
    options."""
    p = subparsers.add_parser(
        "timeline",
        aliases=["trace"],
        help="draw one ScaledObject's decision history from Prometheus (needs the replay extra)",
        description="Draw one ScaledObject's decision history from the llm_scaler_* series in Prometheus:"
        " target vs landed vs demand, the binding signal, clamps, TTFT against the objective.",
    )
    # Required, and said so in the usage line: a group that takes the old spelling too.
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--name",
        type=cliargs.namespaced,
        metavar="NS/NAME",
        help="the live ScaledObject, namespace/name (required)",
    )
    cliargs.deprecated(which, ["--scaledobject"], "--name", dest="name", type=cliargs.namespaced)
    cliargs.add_prometheus(p, "the Prometheus that scrapes the scaler", required=True)
    cliargs.add_duration(
        p,
        "--since",
        "how far back from --until (90s, 30m, 6h, 2d; default 6h)",
        kind=cliargs.duration(as_text=True),
        default="6h",
    )
    cliargs.add_instant(p, "--until", "end of the span, ISO 8601 with a zone (default: now)")
    cliargs.add_duration(
        p,
        "--step",
        "resolution (default: the span over 600 points, at least 15s)",
        kind=cliargs.duration(as_text=True),
    )
    p.add_argument("--deployment", default=None, help="for kube-state-metrics: the Deployment's name")
    p.add_argument("--timezone", default="UTC", type=_zone, help="time axis zone (default UTC)")
    p.add_argument(
        "--out",
        default="timeline.png",
        type=cliargs.to_write(),
        metavar="FILE",
        help="the PNG to write (default timeline.png)",
    )
    cliargs.deprecated(p, ["-o", "--output"], "--out", dest="out", type=cliargs.to_write(), metavar="FILE")


def _zone(text: str) -> str:
    """An argparse ``type``: an IANA zone such as UTC or Asia/Shanghai."""
    try:
        ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an IANA zone such as UTC or Asia/Shanghai"
        ) from None
    return text


def _span(args: argparse.Namespace) -> tuple[datetime, datetime, float]:
    if args.until:
        end = datetime.fromisoformat(args.until.replace("Z", "+00:00"))
        if end.tzinfo is None:
            raise TraceError("--until needs a zone (Z or +08:00)")
    else:
        end = datetime.now(UTC)  # noqa: TID251 - --until defaults to now
    span = duration_s(args.since)
    step = duration_s(args.step) if args.step else max(15.0, span / 600)
    return end - timedelta(seconds=span), end, step


def run(args: argparse.Namespace) -> int:
    """Run ``scaler timeline``: fetch the history from Prometheus, draw the PNG, print the summary."""
    from scaler.sources.prometheus import PrometheusClient

    namespace, _, name = args.name.partition("/")
    try:
        start, end, step = _span(args)
        history = fetch(
            PrometheusClient(args.prometheus, timeout_s=30),
            namespace,
            name,
            start,
            end,
            step,
            args.deployment,
        )
        draw(history, Path(args.out), args.timezone)
    except ModuleNotFoundError as exc:
        if not missing_extra(exc):
            raise
        print(f"scaler timeline: error: {INSTALL_HINT}", file=sys.stderr)
        return 2
    for line in history.summary():
        print(line)
    print(f"wrote {args.out}")
    return 0
