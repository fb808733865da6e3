"""``scaler replay``: replay a trace under this scaler, a KEDA baseline and a clairvoyant reference."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaler.cli import args as cliargs
from scaler.replay import INSTALL_HINT, missing_extra

if TYPE_CHECKING:
    from scaler.config import TargetPolicy
    from scaler.decider.coldstart import PodTimes
    from scaler.replay.fleet.cluster import ClusterConfig
    from scaler.replay.history import HistoryReader, Measured, RouterFinder
    from scaler.replay.keda import ScaledObjectModel
    from scaler.replay.ownfleet import OwnFleet
    from scaler.replay.progress import Progress
    from scaler.replay.replica import ReplicaChoice
    from scaler.replay.span import Span
    from scaler.replay.startup import ColdStartChoice
    from scaler.replay.trace import Trace

# The simulation's modules (numpy, the engine) load in run(), so `scaler --help` stays fast.

# The KEDA versions whose scale loop is replayed, without loading the replay's modules (numpy):
# scaler.replay.keda's KEDA_VERSIONS and KEDA_VERSION, which a test holds equal.
KEDA_VERSIONS = ("2.20", "2.21")
KEDA_VERSION = "2.21"
DEFAULT_START = "2026-12-07T00:00:00+08:00"  # a Monday, midnight in Asia/Shanghai
SCALER = "this scaler"
BASELINE = "keda baseline"


Converter = Callable[[str], tuple[str, list[str]]]
# (kubeconfig, namespace, Deployment) -> ("namespace/name" as read, its current pods' times);
# LookupError naming what the API did not give.
PodReader = Callable[[str | None, str, str], "tuple[str, list[PodTimes]]"]
# (Prometheus address, namespace, Deployment, start, end) -> ("namespace/name", the times of its
# pods kube-state-metrics recorded in the span); RuntimeError when it cannot be read.
RecordedPodReader = Callable[[str, str, str, datetime, datetime], "tuple[str, list[PodTimes]]"]
# (Prometheus address, the policy, start, end) -> seconds between the scrapes of its series, or
# None when unknown (``scaler.sources.history.scrape_interval``); RuntimeError when it cannot be read.
ScrapeIntervalReader = Callable[[str, "TargetPolicy", datetime, datetime], "float | None"]


@dataclass(frozen=True)
class Upstream:
    """What the replay takes from modules that import-linter keeps it from importing (the caller,
    ``scaler.cli``, passes them): the Prometheus history reader, ``scaler convert``'s rewrite of
    a plain KEDA ScaledObject's YAML (the new text, and one line per change), the reader of a
    Deployment's pods (``scaler.sources.kubernetes.read_pod_times``) for ``--kubeconfig``, the
    lister of router queues (``scaler.sources.prometheus.router_queues``), the reader of the pods
    kube-state-metrics recorded (``scaler.sources.kube_state.recorded_pods``) and the reader of the
    scrape interval (``scaler.sources.history.scrape_interval``) for ``--prometheus``."""

    read_history: HistoryReader
    convert: Converter | None = None
    read_pods: PodReader | None = None
    find_routers: RouterFinder | None = None
    recorded_pods: RecordedPodReader | None = None
    scrape_interval: ScrapeIntervalReader | None = None


HISTORY_DEFAULTS = {"since": "7d", "step": "1m"}


def add_history_options(p: argparse.ArgumentParser, command: str, source: Any = None) -> None:
    """``--prometheus`` (into the group ``source`` when given) and the span it reads (``--since``,
    ``--until``, ``--step``; their defaults are applied by ``history_span``, so that one given
    without ``--prometheus`` can be refused)."""
    cliargs.add_prometheus(
        source or p,
        f"{command} the history in this Prometheus (the ScaledObject's engine preset and labelSelector)"
        " instead of a trace file; it wins over the trigger's prometheusAddress",
    )
    cliargs.add_duration(
        p,
        "--since",
        "with --prometheus: how far back from --until (90s, 30m, 6h, 7d; default 7d)",
        kind=cliargs.duration(as_text=True),
    )
    cliargs.add_instant(
        p, "--until", "with --prometheus: end of the span, ISO 8601 with a zone (default: now)"
    )
    cliargs.add_duration(
        p,
        "--step",
        "with --prometheus: one window of the trace, at least two scrapes (default 1m, or two scrapes"
        " where they are further apart)",
        kind=cliargs.duration(minimum_s=1, above=False, as_text=True),
    )


def check_span_options(args: argparse.Namespace) -> None:
    """ValueError when ``--since``, ``--until`` or ``--step`` is given without ``--prometheus``."""
    given = [f"--{name}" for name in ("since", "until", "step") if getattr(args, name) is not None]
    if given and not args.prometheus:
        raise cliargs.UsageError(
            f"{', '.join(given)}: only with --prometheus (they choose the history it reads)"
        )


def history_span(args: argparse.Namespace, step: str | None = None) -> Span:
    """The span ``--since``/``--until``/``--step`` name (``step`` instead of the latter), their
    defaults applied."""
    from scaler.replay.span import span

    return span(
        args.since or HISTORY_DEFAULTS["since"],
        args.until,
        step or args.step or HISTORY_DEFAULTS["step"],
        datetime.now(UTC),  # noqa: TID251 - --until defaults to now
    )


def scraped_span(
    args: argparse.Namespace, upstream: Upstream, policy: TargetPolicy, command: str = "scaler replay"
) -> Span:
    """The span to read, each step holding two scrapes of every series (``scaler.replay.span``): a
    ``--step`` written shorter is refused (SpanError, exit status 2); the default, lengthened to the
    step that does, said on stderr."""
    from scaler.replay.span import step_for_scrapes, too_short, written

    chosen = history_span(args)
    if upstream.scrape_interval is None:
        return chosen
    scrape_s = upstream.scrape_interval(args.prometheus, policy, chosen.start, chosen.end)
    need = step_for_scrapes(chosen.step_s, scrape_s)
    if need is None or scrape_s is None:
        return chosen
    if args.step:
        raise too_short(args.step, scrape_s, need)
    print(
        f"{command}: --step {written(need)}: the history's series are scraped every"
        f" {written(round(scrape_s))}, and a rate needs two scrapes in each window (the default"
        f" {HISTORY_DEFAULTS['step']} would read a fraction of the traffic)",
        file=sys.stderr,
    )
    return history_span(args, written(need))


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``scaler replay`` subcommand and its options."""
    p = subparsers.add_parser(
        "replay",
        help="replay a request trace, or your Prometheus' history, under this scaler, a KEDA baseline"
        " and a clairvoyant reference",
        description="Replay a request trace (or a rate trace, expanded into requests), or the requests"
        " your Prometheus counted (--prometheus), through a simulated GPU fleet three times: under this"
        " scaler's ScaledObject, under a plain KEDA ScaledObject, and under a clairvoyant schedule that"
        " knows the future. Prints a table (TTFT percentiles, share within the objective, GPU-hours,"
        " Pending pod-minutes, scale events) and writes summary.json and replay.png to --out. A plain"
        " KEDA --scaledobject is converted (scaler convert) and is itself the baseline. The model:"
        " docs/replay.md.",
    )
    source = p.add_mutually_exclusive_group(required=True)
    cliargs.add_file(
        source,
        "--trace",
        "timestamp_s,prompt_tokens,output_tokens or window_start_s,req_per_s"
        "[,prompt_tokens_per_req,output_tokens_per_req]",
    )
    add_history_options(p, "replay", source)
    cliargs.add_file(
        p,
        "--scaledobject",
        "ScaledObject with this scaler's external trigger, or a plain KEDA one to convert",
        required=True,
    )
    cliargs.add_file(
        p,
        "--baseline",
        "ScaledObject with plain KEDA triggers (default: --scaledobject when it is a plain one, else"
        " the example)",
    )
    p.add_argument(
        "--export",
        default=None,
        type=cliargs.to_write(),
        metavar="TRACE.csv",
        help="with --prometheus: also write the trace read (window_start_s,req_per_s,"
        "prompt_tokens_per_req,output_tokens_per_req), to replay later with --trace",
    )
    cliargs.add_file(p, "--cluster", "cluster model (YAML); defaults in docs/replay.md")
    cliargs.add_file(
        p,
        "--kubeconfig",
        "measure the cold start from the pods of the ScaledObject's Deployment through this"
        " kubeconfig (the median from scheduled to Ready; cold_start_s in --cluster wins; default:"
        " not measured, 180s)",
    )
    p.add_argument(
        "--out",
        default="replay-out",
        type=cliargs.to_write(folder=True),
        metavar="DIR",
        help="folder for summary.json and replay.png",
    )
    p.add_argument(
        "--seed",
        type=cliargs.whole(0),
        default=0,
        metavar="N",
        help="seed for expanding rate traces into requests",
    )
    cliargs.add_file(p, "--sizes-from", "request trace whose token sizes a rate trace borrows")
    p.add_argument(
        "--rate-scale",
        type=cliargs.number(0),
        default=1.0,
        metavar="X",
        help="multiply a rate trace's rates by this",
    )
    p.add_argument(
        "--hours",
        default=None,
        type=hours,
        metavar="A:B",
        help="replay only hours A:B of the trace, e.g. 0:72",
    )
    cliargs.add_instant(
        p,
        "--start",
        f"wall time of a --trace's second 0 (default {DEFAULT_START}; --prometheus: --until - --since)",
    )
    cliargs.add_duration(
        p,
        "--objective",
        "TTFT objective (2s; bare seconds too; default: ttftObjectiveSeconds)",
        kind=cliargs.duration(bare_seconds=True),
    )
    p.add_argument(
        "--keda-version",
        choices=KEDA_VERSIONS,
        default=KEDA_VERSION,
        help="the KEDA whose calls are replayed: 2.20 (up to 2.20: its scale loop calls this scaler every"
        " pollingInterval, and those failures count towards fallback.failureThreshold too) or 2.21 (the"
        f" loop rests while the HPA's ScalingActive is True; default {KEDA_VERSION})",
    )
    p.add_argument("--no-plot", action="store_true", help="skip replay.png")


def hours(text: str) -> str:
    """An argparse ``type``: ``A:B``, hours from A to B of the trace, A below B."""
    a, colon, b = text.partition(":")
    try:
        low, high = float(a), float(b)
    except ValueError:
        low = high = -1.0
    if not colon or not 0 <= low < high:
        raise argparse.ArgumentTypeError(f"{text!r}: write A:B with 0 <= A < B, such as 0:72")
    return text


def run(args: argparse.Namespace, upstream: Upstream | None = None) -> int:
    """Run ``scaler replay``; exit status 2 without the replay extra. An input error
    (``scaler.errors``) goes up to ``scaler.cli.main``, which says it in one line."""
    try:
        return _run(args, upstream)
    except ModuleNotFoundError as exc:
        if not missing_extra(exc):
            raise
        print(f"scaler replay: error: {INSTALL_HINT}", file=sys.stderr)
        return 2


def _refuse_mixed(args: argparse.Namespace) -> None:
    """Options that belong to the other source are refused, naming them."""
    if args.prometheus:
        for option, value in (
            ("--sizes-from", args.sizes_from),
            ("--hours", args.hours),
            ("--start", args.start),
        ):
            if value:
                raise cliargs.UsageError(
                    f"{option} is for --trace; with --prometheus the sizes are measured and the span is"
                    " --since/--until"
                )
    else:
        if args.export:
            raise cliargs.UsageError(
                "--export writes the trace read with --prometheus; a --trace is already a file"
            )
        check_span_options(args)


def _objects(
    args: argparse.Namespace, upstream: Upstream | None
) -> tuple[ScaledObjectModel, ScaledObjectModel, str]:
    """This scaler's ScaledObject, the baseline and where the baseline came from.

    A plain KEDA ``--scaledobject`` (no external trigger) is converted as ``scaler convert`` does,
    each change on stderr, and is the baseline unless ``--baseline`` is given.
    """
    from scaler.inventory import ScaledObjectError
    from scaler.manifest import first_scaledobject
    from scaler.replay.keda import load_scaledobject_model, scaledobject_model

    scaler_so = load_scaledobject_model(args.scaledobject)
    plain = None
    if scaler_so.external is None:
        if upstream is None or upstream.convert is None:
            raise ScaledObjectError(f"{args.scaledobject}: no external trigger for this scaler")
        plain = scaler_so
        converted, changes = upstream.convert(Path(args.scaledobject).read_text())
        for line in changes:
            print(f"scaler replay: converted {args.scaledobject}: {line}", file=sys.stderr)
        scaler_so = scaledobject_model(first_scaledobject(converted, f"{args.scaledobject}, converted"))
    if args.baseline:
        return scaler_so, load_scaledobject_model(args.baseline), str(args.baseline)
    if plain is not None:
        return scaler_so, plain, f"{args.scaledobject} (as written)"
    with resources.as_file(resources.files("scaler") / "examples" / "baseline.yaml") as path:
        return scaler_so, load_scaledobject_model(path), "scaler/examples/baseline.yaml"


def from_history(
    args: argparse.Namespace,
    upstream: Upstream | None,
    policy: Any,
    progress: Progress,
    command: str = "scaler replay",
) -> Measured:
    """The history ``--prometheus`` holds for the policy's series, as a measured rate trace with the
    replica measured from it; what it could not read, and what that does to the replay, on stderr
    (``command: limit: ...``)."""
    from scaler.replay.history import from_prometheus

    if upstream is None:
        raise ValueError("--prometheus needs the Prometheus reader (run it as `scaler replay`)")
    read = scraped_span(args, upstream, policy, command)
    measured = from_prometheus(
        upstream.read_history, args.prometheus, policy, read, upstream.find_routers, progress
    )
    progress.close()
    for line in measured.limits:
        print(f"{command}: limit: {line}", file=sys.stderr)
    return measured


def _export(args: argparse.Namespace, measured: Measured, cluster: ClusterConfig) -> None:
    """--export: the trace read, and beside it the cluster model it was replayed on (the replica
    measured, the cold start), so that ``--trace`` replays it to the same figures without Prometheus."""
    import yaml

    from scaler.replay.trace import write_rates

    write_rates(args.export, measured.rates)
    model = Path(args.export).with_suffix(".cluster.yaml")
    header = (
        f"# The cluster model `scaler replay --prometheus` replayed {args.export} on: the replica measured\n"
        "# from the history where it could be (its replica: block says which), the cold start, the rest\n"
        "# --cluster's or the defaults. docs/replay-report.md.\n"
    )
    model.write_text(header + yaml.safe_dump(dict(cluster.__dict__), sort_keys=False))
    again = f"--trace {args.export} --start {measured.start.isoformat()} --cluster {model}"
    print(
        f"wrote {args.export}: {len(measured.rates.starts):,} windows of {measured.rates.window_s:g}s, and"
        f" {model}; replay it with {again}"
    )


def _cold_start(
    args: argparse.Namespace, upstream: Upstream | None, so: ScaledObjectModel, cluster: ClusterConfig
) -> ColdStartChoice:
    """The cold start to replay with (``scaler.replay.startup``): --cluster's, the Deployment's
    pods' through --kubeconfig, or the default (its limits are printed once the trace is read)."""
    from scaler.replay.fleet.cluster import ClusterConfig
    from scaler.replay.startup import choose

    configured: float | None = None
    if args.cluster and "cold_start_s" in ClusterConfig.load_written(args.cluster)[1]:
        configured = cluster.cold_start_s
    default = ClusterConfig().cold_start_s
    if not getattr(args, "kubeconfig", None):
        choice = choose(configured, default)
    else:
        if upstream is None or upstream.read_pods is None:
            raise ValueError("--kubeconfig needs the Kubernetes reader (run it as `scaler replay`)")
        target = so.scaledobject
        unsupported = target.unsupported_target()
        where = f"{target.namespace or '(the context namespace)'}/{target.target_name}"
        if unsupported is not None:
            choice = choose(configured, default, where, problem=unsupported)
        else:
            from scaler.decider.coldstart import startup_times

            try:
                where, pods = upstream.read_pods(args.kubeconfig, target.namespace, target.target_name)
            except LookupError as exc:
                choice = choose(configured, default, where, problem=str(exc))
            else:
                choice = choose(configured, default, where, startup_times(pods))
    return choice


def _recorded_cold_start(
    args: argparse.Namespace,
    upstream: Upstream | None,
    so: ScaledObjectModel,
    measured: Measured,
    choice: ColdStartChoice,
    progress: Progress,
) -> ColdStartChoice:
    """With ``--prometheus`` and no cold start measured through ``--kubeconfig``: the cold start of the
    Deployment's pods kube-state-metrics recorded over the span read (where one is configured, said
    beside it, not used)."""
    from scaler.decider.coldstart import startup_times
    from scaler.replay.startup import with_recorded

    target = so.scaledobject
    if choice.source == "measured" or upstream is None or upstream.recorded_pods is None:
        return choice  # measured through --kubeconfig: the current pods win
    if target.unsupported_target() is not None:
        return choice
    where = f"{target.namespace or '(any namespace)'}/{target.target_name}"
    progress.stage(f"reading the pods of Deployment {where} kube-state-metrics recorded", unit="step")
    end = measured.start + timedelta(seconds=measured.rates.duration_s)
    try:
        where, pods = upstream.recorded_pods(
            args.prometheus, target.namespace, target.target_name, measured.start, end
        )
    except RuntimeError as exc:
        return with_recorded(choice, where, None, str(exc))
    return with_recorded(choice, where, startup_times(pods))


def load_cluster(args: argparse.Namespace) -> tuple[ClusterConfig, frozenset[str]]:
    """``--cluster``'s model and the keys it writes (none given: the defaults, no key written)."""
    from scaler.replay.fleet.cluster import ClusterConfig

    return ClusterConfig.load_written(args.cluster) if args.cluster else (ClusterConfig(), frozenset())


def fleet(
    args: argparse.Namespace,
    upstream: Upstream | None,
    so: ScaledObjectModel,
    policy: TargetPolicy,
    measured: Measured | None,
    cold_start: ColdStartChoice,
    progress: Progress,
) -> tuple[ClusterConfig, ReplicaChoice, ColdStartChoice]:
    """The fleet the replay runs: ``--cluster``'s model with the replica measured from the history
    where it was not written (``scaler.replay.replica``) and the cold start (``cold_start``, or
    with ``--prometheus`` the pods kube-state-metrics recorded); the choices, to be said."""
    from scaler.replay import replica

    cluster, written = load_cluster(args)
    if measured is not None:
        cold_start = _recorded_cold_start(args, upstream, so, measured, cold_start, progress)
    chosen = replica.choose(cluster, written, policy, None if measured is None else measured.replica)
    return cluster.with_overrides(**chosen.overrides, cold_start_s=cold_start.seconds), chosen, cold_start


def limit_lines(chosen: ReplicaChoice, cold_start: ColdStartChoice) -> list[str]:
    """How the replica's sources limit the replay, for stderr."""
    lines = list(cold_start.limits)
    if chosen.defaults():
        lines.append(
            f"the replica's {', '.join(chosen.defaults())} are the cluster model's defaults, not your"
            " servers' (the replica: block says why): every policy's replicas and latency depend on them"
        )
    return lines


def replica_lines(chosen: ReplicaChoice, cold_start: ColdStartChoice) -> list[str]:
    """The report's ``replica:`` block: each figure of one replayed pod and where it came from."""
    return [
        "replica: what one replayed pod is, each figure from where (docs/replay-report.md)",
        *chosen.lines(),
        f"  {cold_start.said}",
    ]


def _run(args: argparse.Namespace, upstream: Upstream | None) -> int:
    from scaler.replay.progress import Progress

    with Progress("scaler replay") as progress:
        return _replay(args, upstream, progress)


def _replay(args: argparse.Namespace, upstream: Upstream | None, progress: Progress) -> int:  # noqa: PLR0912, PLR0915 - one command's steps, in order
    from scaler.config import parse_metadata
    from scaler.replay import ownfleet
    from scaler.replay.compare import compare, workers_for
    from scaler.replay.report import (
        all_figures,
        keda_calls,
        keda_lines,
        own_lines,
        scale_lines,
        static_line,
        table,
        write_summary,
    )
    from scaler.replay.trace import TraceError, load_trace

    started = time.perf_counter()
    _refuse_mixed(args)
    cluster, _ = load_cluster(args)
    scaler_so, baseline_so, baseline_name = _objects(args, upstream)
    # Before the history is read: a kubeconfig that cannot be used stops the replay at once.
    cold_start = _cold_start(args, upstream, scaler_so, cluster)
    assert scaler_so.external is not None
    policy = parse_metadata(scaler_so.external.metadata)
    cliargs.prometheus_over("scaler replay", args.prometheus, policy.prometheus_address, args.scaledobject)
    objective = args.objective or policy.ttft_objective_seconds
    measured: Measured | None = None
    if args.prometheus:
        measured = from_history(
            args, upstream, policy.model_copy(update={"ttft_objective_seconds": objective}), progress
        )
        start = measured.start
        trace: Trace = measured.trace(args.seed, args.rate_scale)
    else:
        start = datetime.fromisoformat((args.start or DEFAULT_START).replace("Z", "+00:00"))
        if start.tzinfo is None:
            raise ValueError("--start needs a timezone (Z or +08:00)")
        trace = load_trace(args.trace, args.sizes_from, args.seed, args.rate_scale)
        if args.hours:
            a, _, b = args.hours.partition(":")
            trace = trace.window(float(a) * 3600, float(b) * 3600)
    if len(trace) == 0:
        raise TraceError("the trace holds no request")
    cluster, chosen, cold_start = fleet(args, upstream, scaler_so, policy, measured, cold_start, progress)
    own: OwnFleet | None = None
    own_said = None
    if measured is not None:
        if args.rate_scale != 1.0:
            own_said = "own fleet: not checked (--rate-scale replays other rates than the history's)"
        elif measured.pods is None:
            own_said = "own fleet: not checked (pods reporting could not be read)"
        else:
            progress.stage("replaying your fleet as it ran, through the replica model", unit="step")
            own = ownfleet.check(
                measured, trace, cluster, start, objective, chosen.defaults(), scaler_so.max_replicas
            )
    progress.close()
    for line in limit_lines(chosen, cold_start):
        print(f"scaler replay: limit: {line}", file=sys.stderr)
    if measured is not None and args.export:
        _export(args, measured, cluster)

    comparison = compare(
        trace,
        cluster,
        start,
        [(SCALER, scaler_so), (BASELINE, baseline_so)],
        objective,
        (scaler_so.min_replicas, scaler_so.max_replicas),
        progress=progress,
        workers=workers_for(len(trace), 2),
        keda_version=args.keda_version,
        outages=() if measured is None else measured.gaps,
    )
    rows = all_figures(comparison.runs, objective)
    # Where the model does not reproduce the fleet as it ran, every row is marked as the model's.
    shown = ownfleet.marked(rows, own)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.no_plot:
        progress.stage("drawing replay.png", unit="step")
        plot_replay(
            out / "replay.png",
            args,
            trace,
            cluster,
            comparison.runs,
            objective,
            rows,
            (policy, scaler_so, baseline_so),
            start,
        )
    progress.close()
    minutes = trace.duration_s / 60
    for line in own.lines() if own is not None else [own_said] if own_said else []:
        print(line)
    print(
        f"{trace.source}: {len(trace):,} requests over {minutes:,.0f} min from {start.isoformat()};"
        f" cluster: {cluster.describe()}"
    )
    print(trace.sizes_line())
    for line in replica_lines(chosen, cold_start):
        print(line)
    if trace.note:
        print(f"note: {trace.note}")
    print(table(shown, objective))
    if measured is not None:
        print(measured.line(cluster.gpus_per_replica))
    search = comparison.search
    print(
        f"clairvoyant: per-minute schedule found in {search.iterations} replay(s),"
        f" {100 * search.attainment:.2f}% within the objective"
        + ("" if search.goal_met else " (short of 99.5%: GPUs or maxReplicas bind)")
    )
    print(static_line(search.peak, cluster.gpus_per_replica))
    for line in (*own_lines(rows), *scale_lines(rows, cluster.cold_start_s)):
        print(line)
    fallbacks = {SCALER: scaler_so.fallback, BASELINE: baseline_so.fallback}
    for line in keda_lines(args.keda_version, comparison.results, fallbacks):
        print(line)
    print(f"{BASELINE}: {baseline_name}")
    for so in (scaler_so, baseline_so):
        for note in so.notes:
            print(f"note ({so.name}): {note}")
    context: dict[str, Any] = {
        "trace": {
            "file": None if args.trace is None else str(args.trace),
            "requests": len(trace),
            "duration_s": trace.duration_s,
            **trace.sizes(),
            "note": trace.note,
        },
        "start": start.isoformat(),
        "seed": args.seed,
        "objective_s": objective,
        "cluster": cluster.__dict__,
        "replica": chosen.to_json(),
        "cold_start": cold_start.to_json(),
        "scaledobject": str(args.scaledobject),
        "baseline": baseline_name,
        "clairvoyant": {
            "replays": search.iterations,
            "attainment": search.attainment,
            "goal_met": search.goal_met,
            "peak_replicas": search.peak,
        },
    }
    context["keda"] = {"version": args.keda_version, "calls": keda_calls(comparison.results)}
    if measured is not None:
        context["prometheus"] = {"source": trace.source, **measured.to_json()}
    if own is not None:
        context["own_fleet"] = own.to_json()
    context["wall_seconds"] = time.perf_counter() - started
    write_summary(out / "summary.json", rows, context)
    written_files = "summary.json" + ("" if args.no_plot else " and replay.png")
    print(f"wrote {written_files} to {out}/ in {context['wall_seconds']:.1f}s")
    return 0


def plot_replay(
    path: Path,
    args: argparse.Namespace,
    trace: Any,
    cluster: Any,
    runs: Any,
    objective_s: float,
    rows: Any,
    objects: tuple[Any, Any, Any],
    start: datetime,
) -> None:
    """replay.png in the ScaledObject's timezone, its windows shaded, the trace's source cited:
    ``objects`` are this scaler's policy, its ScaledObject and the baseline's (``scaler replay`` and
    ``scaler convert --replay`` alike)."""
    from scaler.replay.keda import CronTrigger
    from scaler.replay.report import PlotContext, plot
    from scaler.replay.trace import source_of

    policy, scaler_so, baseline_so = objects
    title = f"{trace.source}: {len(trace):,} requests; cold start {cluster.cold_start_s:g}s"
    if args.prometheus:
        sources = f"{trace.source}, your own"
    else:
        given = (trace.source, getattr(args, "sizes_from", None))
        sources = ", ".join(dict.fromkeys(source_of(s) for s in given if s))
    windows = [*policy.spec.windows, *(t.window for t in baseline_so.triggers if isinstance(t, CronTrigger))]
    picture = PlotContext(start, policy.timezone, scaler_so.min_replicas, windows, sources)
    by_policy = {row.policy: row for row in rows}
    plot(path, trace, cluster, runs, objective_s, title, picture, by_policy)
