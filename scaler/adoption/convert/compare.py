"""``scaler convert --replay``: the old and the new ScaledObject replayed on one trace, side by side.

Where the old one attains less, it is replayed again with its queue threshold lowered until
it attains what the new one does (``cheapest_attaining``): the comparison at equal attainment.
The report is ``scaler replay``'s: the replica (measured from the history with ``--prometheus``),
the table with the clairvoyant and the static pool at its peak, the hours the floor and pre-warm
windows held, the scale changes, progress on stderr, and replay.png in ``--out``.
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from scaler.cli.args import UsageError, prometheus_over
from scaler.config import parse_metadata
from scaler.errors import InputError
from scaler.manifest import first_scaledobject
from scaler.presets import queue_read
from scaler.replay.cli import (
    DEFAULT_START,
    Upstream,
    check_span_options,
    fleet,
    from_history,
    limit_lines,
    load_cluster,
    plot_replay,
    replica_lines,
)

if TYPE_CHECKING:
    from scaler.config import TargetPolicy
    from scaler.replay.history import Measured
    from scaler.replay.progress import Progress
    from scaler.replay.replay import RunResult
    from scaler.replay.trace import Trace


def retuned_queue_triggers(doc: Mapping[str, Any], factor: float) -> tuple[dict[str, Any], list[float]]:
    """A copy of ``doc`` whose queue-gauge ``prometheus`` triggers have ``threshold * factor``.

    The comparison at equal attainment: a plain KEDA object buys attainment by asking for a
    replica per fewer waiting requests. Returns the copy and the new thresholds (empty when
    the object has no queue trigger to retune).
    """
    out = copy.deepcopy(dict(doc))
    thresholds: list[float] = []
    for trigger in (out.get("spec") or {}).get("triggers") or []:
        meta = trigger.get("metadata") if isinstance(trigger, dict) else None
        if trigger.get("type") != "prometheus" or not isinstance(meta, dict):
            continue
        if queue_read(str(meta.get("query", ""))) is None:
            continue
        try:
            threshold = float(f"{max(1.0, float(meta['threshold']) * factor):.2g}")
        except (KeyError, TypeError, ValueError):
            continue
        meta["threshold"] = f"{threshold:g}"
        thresholds.append(threshold)
    return out, thresholds


Attempt = Callable[[float], "tuple[RunResult, bool, float] | None"]


def cheapest_attaining(attempt: Attempt) -> RunResult | None:
    """The least GPU time among runs that attain the goal, over threshold factors tried in turn.

    ``attempt(factor)`` replays the old object with its queue thresholds times ``factor`` and
    answers (run, attains, lowest threshold), or None when there is no queue trigger. Halving
    (1/2, 1/4, ...) until a run attains or the threshold is down to 1, then three factors
    between the first that attains and the one before it (geometric steps), since attainment
    need not rise steadily as the threshold falls. *Example*: threshold 50 fails at 25, 12,
    6.2 and 3.1 and attains at 1.6; 2.6, 2.2 and 1.9 are tried as well.
    """
    factor = 1.0
    passing: list[RunResult] = []
    while not passing:
        factor /= 2
        tried = attempt(factor)
        if tried is None:
            return None
        run, attains, lowest = tried
        if attains:
            passing.append(run)
        elif lowest <= 1.0:
            return None
    for step in (0.75, 0.5, 0.25):
        between = attempt(factor * 2**step)
        if between is not None and between[1]:
            passing.append(between[0])
    return min(passing, key=lambda r: r.gpu_seconds)


def _upstream() -> Upstream:
    """The Prometheus readers the replay takes (convert sits above the sources)."""
    from scaler.sources.history import read_history, scrape_interval
    from scaler.sources.kube_state import recorded_pods
    from scaler.sources.prometheus import router_queues

    return Upstream(
        read_history, find_routers=router_queues, recorded_pods=recorded_pods, scrape_interval=scrape_interval
    )


def _replay_source(
    args: argparse.Namespace, policy: TargetPolicy, upstream: Upstream, progress: Progress
) -> tuple[Trace, datetime, Measured | None]:
    """The trace to replay on, the wall time of its second 0, and what Prometheus measured (with
    --prometheus, whose limits go to stderr)."""
    from scaler.replay.trace import load_trace

    if bool(args.replay) == bool(args.prometheus):
        raise UsageError("give it a TRACE.csv or --prometheus URL (one of them)")
    check_span_options(args)
    if not args.prometheus:
        start = datetime.fromisoformat((args.start or DEFAULT_START).replace("Z", "+00:00"))
        return load_trace(args.replay, None, 0, 1.0), start, None
    if args.start:
        raise UsageError("--start is for --replay TRACE.csv; with --prometheus the span is --since/--until")
    measured = from_history(args, upstream, policy, progress, "scaler convert")
    return measured.trace(0), measured.start, measured


def replay(args: argparse.Namespace, old_text: str, new_text: str, report: Any) -> int:
    """Replay the old and the new object (and the old at equal attainment); print the table."""
    from scaler.replay.progress import Progress

    with Progress("scaler convert") as progress:
        return _replay(args, old_text, new_text, report, progress)


def _replay(  # noqa: PLR0912, PLR0915 - one command's steps, in order
    args: argparse.Namespace, old_text: str, new_text: str, report: Any, progress: Progress
) -> int:
    from pathlib import Path

    from scaler.replay import ownfleet
    from scaler.replay.compare import compare, initial_ready, replayed, run_policy
    from scaler.replay.keda import scaledobject_model
    from scaler.replay.policies import KedaPolicy
    from scaler.replay.report import (
        all_figures,
        figures,
        keda_lines,
        own_lines,
        scale_lines,
        static_line,
        table,
    )

    upstream = _upstream()
    try:
        old_doc = first_scaledobject(old_text, args.scaledobject, check_fields=not args.force)
        old, new = (
            scaledobject_model(old_doc),
            scaledobject_model(first_scaledobject(new_text, "the new object")),
        )
        assert new.external is not None
        policy = parse_metadata(new.external.metadata)
        prometheus_over("scaler convert", args.prometheus, policy.prometheus_address, args.scaledobject)
        trace, start, measured = _replay_source(args, policy, upstream, progress)
        cold_start = _configured_cold_start(args)
        cluster, chosen, cold_start = fleet(args, upstream, new, policy, measured, cold_start, progress)
    except (OSError, InputError) as exc:  # ManifestError, ScaledObjectError, TraceError, SpanError...
        progress.close()
        print(f"scaler convert: error: --replay: {exc}", file=sys.stderr)
        return 2
    progress.close()
    for line in limit_lines(chosen, cold_start):
        print(f"scaler convert: limit: {line}", file=sys.stderr)
    objective = policy.ttft_objective_seconds
    own = None  # the replica model checked against the fleet as it ran (scaler.replay.ownfleet)
    if measured is not None and measured.pods is not None:
        progress.stage("replaying your fleet as it ran, through the replica model", unit="step")
        own = ownfleet.check(measured, trace, cluster, start, objective, chosen.defaults(), new.max_replicas)
    outages = () if measured is None else measured.gaps  # this scaler's Prometheus held nothing then
    comparison = compare(
        trace,
        cluster,
        start,
        [("new (this scaler)", new), ("old (as written)", old)],
        objective,
        (new.min_replicas, new.max_replicas),
        progress=progress,
        keda_version=args.keda_version,
        outages=outages,
    )
    results = comparison.results
    attained = {r.name: figures(r, objective, None).within_objective for r in results}
    # At equal attainment: the old object with its queue threshold lowered until it attains
    # what the new one does (the cheapest such run of those tried), shown beside the others.
    note = ""
    goal = attained["new (this scaler)"]
    if attained["old (as written)"] < goal:
        initial = initial_ready(comparison.search, cluster.cold_start_s)

        def attempt(factor: float) -> tuple[RunResult, bool, float] | None:
            doc, thresholds = retuned_queue_triggers(old_doc, factor)
            if not thresholds:
                return None
            name = f"old, threshold {'/'.join(f'{t:g}' for t in thresholds)}"
            advance = progress.stage(f"the old object at equal attainment: {name}", replayed(trace))
            run = run_policy(
                KedaPolicy(name, scaledobject_model(doc), keda_version=args.keda_version, outages=outages),
                trace,
                cluster,
                start,
                initial,
                advance,
            )
            return run, figures(run, objective, None).within_objective >= goal, min(thresholds)

        found = cheapest_attaining(attempt)
        if found is not None:
            results = [*results[:2], found, *results[2:]]
        else:
            note = "no lower queue threshold lets the old object attain what the new one does"
    runs = [*results, *([] if comparison.static is None else [comparison.static])]
    rows = all_figures(runs, objective)
    out = Path(args.replay_out)
    if not args.no_plot:
        out.mkdir(parents=True, exist_ok=True)
        progress.stage("drawing replay.png", unit="step")
        plot_replay(
            out / "replay.png", args, trace, cluster, runs, objective, rows, (policy, new, old), start
        )
    progress.close()
    print(file=report)
    for line in [] if own is None else own.lines():
        print(line, file=report)
    print(
        f"replay of {trace.source}: {len(trace):,} requests; cluster {cluster.describe()}",
        file=report,
    )
    print(trace.sizes_line(), file=report)
    for line in replica_lines(chosen, cold_start):
        print(line, file=report)
    print(table(ownfleet.marked(rows, own), objective), file=report)
    if measured is not None:
        print(measured.line(cluster.gpus_per_replica), file=report)
    if len(results) > len(comparison.results):
        print(
            "the third row is the old object at equal attainment: its queue threshold lowered until it"
            " attains at least what the new one does (the cheapest of the thresholds tried)",
            file=report,
        )
    if note:
        print(note, file=report)
    print(static_line(comparison.search.peak, cluster.gpus_per_replica), file=report)
    for line in (*own_lines(rows), *scale_lines(rows, cluster.cold_start_s)):
        print(line, file=report)
    fallbacks = {"new (this scaler)": new.fallback, "old (as written)": old.fallback}
    for line in keda_lines(args.keda_version, comparison.results, fallbacks):
        print(line, file=report)
    if not args.no_plot:
        print(f"wrote {out / 'replay.png'}", file=report)
    return 0


def _configured_cold_start(args: argparse.Namespace) -> Any:
    """The cold start before the history is read: --cluster's, else the default."""
    from scaler.replay.fleet.cluster import ClusterConfig
    from scaler.replay.startup import choose

    cluster, written = load_cluster(args)
    return choose(cluster.cold_start_s if "cold_start_s" in written else None, ClusterConfig().cold_start_s)
