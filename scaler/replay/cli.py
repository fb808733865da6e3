"""``scaler replay``: replay a trace under this scaler, a KEDA baseline and a clairvoyant reference."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

from scaler.replay import INSTALL_HINT, missing_extra

# The simulation's modules (numpy, the engine) load in run(), so `scaler --help` stays fast.

DEFAULT_START = "2026-12-07T00:00:00+08:00"  # a Monday, midnight in Asia/Shanghai
SCALER = "this scaler"
BASELINE = "keda baseline"
PROGRESS_MIN_REQUESTS = 200_000


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``scaler replay`` subcommand and its options."""
    p = subparsers.add_parser(
        "replay",
        help="replay a request trace under this scaler, a KEDA baseline and a clairvoyant reference",
        description="Replay a request trace (or a rate trace, expanded into requests) through a"
        " simulated GPU fleet three times: under this scaler's ScaledObject, under a plain KEDA"
        " ScaledObject, and under a clairvoyant schedule that knows the future. Prints a table"
        " (TTFT percentiles, share within the objective, GPU-hours, Pending pod-minutes, scale"
        " events) and writes summary.json and replay.png to --out. The model: docs/replay.md.",
    )
    p.add_argument(
        "--trace", required=True, help="timestamp_s,prompt_tokens,output_tokens or window_start_s,req_per_s"
    )
    p.add_argument("--scaledobject", required=True, help="ScaledObject with this scaler's external trigger")
    p.add_argument(
        "--baseline", default=None, help="ScaledObject with plain KEDA triggers (default: the example)"
    )
    p.add_argument("--cluster", default=None, help="cluster model (YAML); defaults in docs/replay.md")
    p.add_argument("--out", default="replay-out", help="folder for summary.json and replay.png")
    p.add_argument("--seed", type=int, default=0, help="seed for expanding rate traces into requests")
    p.add_argument("--sizes-from", default=None, help="request trace whose token sizes a rate trace borrows")
    p.add_argument("--rate-scale", type=float, default=1.0, help="multiply a rate trace's rates by this")
    p.add_argument("--hours", default=None, help="replay only hours A:B of the trace, e.g. 0:72")
    p.add_argument(
        "--start", default=DEFAULT_START, help=f"wall time of the trace's second 0 (default {DEFAULT_START})"
    )
    p.add_argument(
        "--objective", type=float, default=None, help="TTFT objective, s (default: ttftObjectiveSeconds)"
    )
    p.add_argument("--no-plot", action="store_true", help="skip replay.png")


@contextmanager
def _progress(total: int, enabled: bool) -> Iterator[Callable[[int], None] | None]:
    if not enabled:
        yield None
        return
    from tqdm import tqdm

    with tqdm(total=total, unit="req", unit_scale=True, file=sys.stderr, disable=None, desc="replay") as bar:

        def update(count: int) -> None:
            bar.update(count)

        yield update


def run(args: argparse.Namespace) -> int:
    """Run ``scaler replay``; exit status 2 on an input error or without the replay extra."""
    try:
        return _run(args)
    except ModuleNotFoundError as exc:
        if not missing_extra(exc):
            raise
        print(f"scaler replay: error: {INSTALL_HINT}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as exc:  # every input error of the replay is a ValueError
        print(f"scaler replay: error: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    from scaler.config import parse_metadata
    from scaler.replay.cluster import ClusterConfig
    from scaler.replay.compare import compare
    from scaler.replay.keda import ScaledObjectError, load_scaledobject_model
    from scaler.replay.report import all_figures, table, write_summary
    from scaler.replay.trace import TraceError, load_trace

    started = time.perf_counter()
    start = datetime.fromisoformat(args.start.replace("Z", "+00:00"))
    if start.tzinfo is None:
        raise ValueError("--start needs a timezone (Z or +08:00)")
    trace = load_trace(args.trace, args.sizes_from, args.seed, args.rate_scale)
    if args.hours:
        a, _, b = args.hours.partition(":")
        trace = trace.window(float(a) * 3600, float(b) * 3600)
    if len(trace) == 0:
        raise TraceError("the trace holds no request")
    cluster = ClusterConfig.load(args.cluster) if args.cluster else ClusterConfig()
    scaler_so = load_scaledobject_model(args.scaledobject)
    if scaler_so.external is None:
        raise ScaledObjectError(f"{args.scaledobject}: no external trigger for this scaler")
    policy = parse_metadata(scaler_so.external.metadata)
    objective = args.objective or policy.ttft_objective_seconds
    if args.baseline:
        baseline_so = load_scaledobject_model(args.baseline)
    else:
        with resources.as_file(resources.files("scaler") / "examples" / "baseline.yaml") as path:
            baseline_so = load_scaledobject_model(path)

    runs = 2 + 2  # the two policies and about two clairvoyant passes
    with _progress(runs * len(trace), len(trace) >= PROGRESS_MIN_REQUESTS) as progress:
        comparison = compare(
            trace,
            cluster,
            start,
            [(SCALER, scaler_so), (BASELINE, baseline_so)],
            objective,
            (scaler_so.min_replicas, scaler_so.max_replicas),
            progress=progress,
        )
    rows = all_figures(comparison.results, objective)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    minutes = trace.duration_s / 60
    print(
        f"{trace.source}: {len(trace):,} requests over {minutes:,.0f} min from {start.isoformat()};"
        f" cluster: {cluster.gpus_free} GPUs, {cluster.gpus_per_replica} per replica,"
        f" cold start {cluster.cold_start_s:g}s"
    )
    if trace.note:
        print(f"note: {trace.note}")
    print(table(rows, objective))
    search = comparison.search
    print(
        f"clairvoyant: per-minute schedule found in {search.iterations} replay(s),"
        f" {100 * search.attainment:.2f}% within the objective"
        + ("" if search.goal_met else " (short of 99.5%: GPUs or maxReplicas bind)")
    )
    for so in (scaler_so, baseline_so):
        for note in so.notes:
            print(f"note ({so.name}): {note}")
    context: dict[str, Any] = {
        "trace": {
            "file": str(args.trace),
            "requests": len(trace),
            "duration_s": trace.duration_s,
            "note": trace.note,
        },
        "start": start.isoformat(),
        "seed": args.seed,
        "objective_s": objective,
        "cluster": cluster.__dict__,
        "scaledobject": str(args.scaledobject),
        "baseline": str(args.baseline or "scaler/examples/baseline.yaml"),
        "clairvoyant": {
            "replays": search.iterations,
            "attainment": search.attainment,
            "goal_met": search.goal_met,
        },
    }
    if not args.no_plot:
        _plot(
            out / "replay.png",
            args,
            trace,
            cluster,
            comparison,
            rows,
            (policy, scaler_so, baseline_so),
            start,
        )
    context["wall_seconds"] = time.perf_counter() - started
    write_summary(out / "summary.json", rows, context)
    written = "summary.json" + ("" if args.no_plot else " and replay.png")
    print(f"wrote {written} to {out}/ in {context['wall_seconds']:.1f}s")
    return 0


def _plot(
    path: Path,
    args: argparse.Namespace,
    trace: Any,
    cluster: Any,
    comparison: Any,
    rows: Any,
    objects: tuple[Any, Any, Any],
    start: datetime,
) -> None:
    """replay.png in the ScaledObject's timezone, its windows shaded, the trace's source cited."""
    from scaler.replay.keda import CronTrigger
    from scaler.replay.report import PlotContext, plot
    from scaler.replay.trace import source_of

    policy, scaler_so, baseline_so = objects
    title = f"{trace.source}: {len(trace):,} requests; cold start {cluster.cold_start_s:g}s"
    sources = ", ".join(dict.fromkeys(source_of(s) for s in (trace.source, args.sizes_from) if s))
    windows = [*policy.windows, *(t.window for t in baseline_so.triggers if isinstance(t, CronTrigger))]
    picture = PlotContext(start, policy.timezone, scaler_so.min_replicas, windows, sources)
    by_policy = {row.policy: row for row in rows}
    plot(path, trace, cluster, comparison.results, comparison.objective_s, title, picture, by_policy)
