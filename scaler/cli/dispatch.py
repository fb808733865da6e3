"""Command line: every `scaler` subcommand (serve, dry-run, demo, replay, convert, doctor, timeline)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from importlib import resources
from typing import TYPE_CHECKING, cast

from pydantic import ValidationError

from scaler import __version__
from scaler.adoption import convert as convert_cli
from scaler.adoption import doctor as doctor_cli
from scaler.adoption import timeline as timeline_cli
from scaler.cli import args as cliargs
from scaler.config import TargetPolicy, parse_metadata
from scaler.errors import is_users, validation_problems
from scaler.inventory import ScaledObject
from scaler.outputs import dryrun, logs
from scaler.replay import cli as replay_cli
from scaler.service import settings as serve_settings
from scaler.sources.files import load_scaledobject, read_observations

if TYPE_CHECKING:
    from scaler.decider.coldstart import PodTimes

    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]


def _add_serve(sub: Subparsers) -> None:
    p = sub.add_parser(
        "serve",
        help="serve KEDA's ExternalScaler gRPC API",
        description="Serve KEDA's ExternalScaler gRPC API (with gRPC health and reflection) and"
        " the decisions as Prometheus series on --metrics-port. Every setting is a flag and a"
        " SCALER_* variable; a flag wins over the variable, which wins over the default."
        " SIGTERM stops it gracefully.",
    )
    serve_settings.add_flags(p)  # one flag per Settings field, each also a SCALER_* variable


def _add_dry_run(sub: Subparsers) -> None:
    p = sub.add_parser(
        "dry-run",
        help="print the decisions the scaler would make, without serving KEDA",
        description="Decide for one ScaledObject as `scaler serve` would and print each decision:"
        " offline, one per line of an observation file; live, from Prometheus (and Kubernetes),"
        " every --interval until Ctrl-C or once. Warns first of what KEDA would refuse"
        " or misread in the manifest; ends with a summary line.",
    )
    cliargs.add_file(
        p, "--scaledobject", "ScaledObject manifest (YAML) with an external trigger", required=True
    )
    source = p.add_mutually_exclusive_group()
    cliargs.add_file(source, "--observations", "offline: observations, one JSON object per line")
    cliargs.add_prometheus(
        source,
        "live: the Prometheus URL to read; it wins over the trigger's prometheusAddress (said on stderr),"
        " which is read when neither --observations nor --prometheus is given",
    )
    p.add_argument(
        "--rate-window",
        default="1m",
        type=cliargs.rate_window,
        help="live: PromQL rate() window for token rates",
    )
    cliargs.add_file(p, "--kubeconfig", "live: read replicas and GPUs through this kubeconfig file")
    p.add_argument(
        "--kubernetes",
        action="store_true",
        help="live: read replicas and GPUs (in-cluster inside a pod, else $KUBECONFIG or ~/.kube/config)",
    )
    when = p.add_mutually_exclusive_group()
    cliargs.add_duration(
        when,
        "--interval",
        "live: time between decisions (15s, 1m; bare seconds too)",
        kind=cliargs.duration(bare_seconds=True),
        default=15.0,
    )
    when.add_argument("--once", action="store_true", help="live: decide once (after warming from history)")
    p.add_argument(
        "--trigger-index",
        type=cliargs.whole(0),
        default=None,
        metavar="N",
        help="which trigger, when several are external",
    )
    cliargs.add_output(p, cliargs.FORMATS, DECISION_FORMATS)


DECISION_FORMATS = (
    "per decision: a short line with what changed since the last (text), every detail on one line,"
    " replica counts included (wide), or one JSON object (json)"
)


def _add_demo(sub: Subparsers) -> None:
    p = sub.add_parser(
        "demo",
        help="live decisions against a local Prometheus and a simulated vLLM fleet",
        description="Start Debian's prometheus ($SCALER_PROMETHEUS_BIN if set, else the one on PATH"
        " or /usr/bin/prometheus) on a free loopback port, a simulated vLLM fleet for it to scrape"
        " and a simulated pool of 8 GPUs, drive a scripted load through a pre-warm window and a"
        " burst, and print the decisions made on the live path.",
    )
    cliargs.add_output(p, cliargs.FORMATS, DECISION_FORMATS)
    cliargs.add_duration(
        p,
        "--duration",
        "how long to run (default: until the scripted load ends, 2-3 minutes; 0: until Ctrl-C)",
        kind=cliargs.duration(bare_seconds=True, above=False),
    )
    cliargs.add_duration(
        p,
        "--interval",
        "time between decisions (2s; bare seconds too)",
        kind=cliargs.duration(bare_seconds=True),
        default=2.0,
    )
    p.add_argument(
        "--offline", action="store_true", help="replay the embedded observation file instead (no Prometheus)"
    )


class HelpFormatter(argparse.HelpFormatter):
    """Each option's default appended to its help, unless the help already states one."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            "default" in text
            or action.default is None
            or action.default is False
            or action.default == argparse.SUPPRESS
            or not action.option_strings
        ):
            return text
        return f"{text} (default: %(default)s)"


DESCRIPTION = (
    "A GPU-aware KEDA external scaler for LLM inference: one replica target from queue depth,"
    " predicted token load, pre-warm windows, a floor and the GPUs free, every decision explained."
    " `scaler serve` is what KEDA calls; the other commands check, convert, replay and draw."
    " Each command's --help lists its options; docs/cli.md documents them all."
)


def build_parser() -> argparse.ArgumentParser:
    """The ``scaler`` argument parser, with every subcommand (each a ``cliargs.Parser``)."""
    parser = cliargs.Parser(prog="scaler", description=DESCRIPTION, formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    # Each subcommand's parser is a cliargs.Parser too (argparse makes them of the parent's class).
    sub = cast("Subparsers", parser.add_subparsers(dest="command", required=True))
    _add_serve(sub)
    _add_dry_run(sub)
    _add_demo(sub)
    replay_cli.add_parser(sub)
    convert_cli.add_parser(sub)
    doctor_cli.add_parser(sub)
    timeline_cli.add_parser(sub)
    for command in {id(p): p for p in sub.choices.values()}.values():  # an old name shares its parser
        command.formatter_class = HelpFormatter
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
    return parser


DEBUG_HELP = "on an error that is a bug of ours, show its traceback (exit status 1 either way)"


def _checked(spec: ScaledObject) -> TargetPolicy:
    """The trigger's policy (or MetadataError), after warning of what KEDA would refuse or misread."""
    policy = parse_metadata(spec.metadata)
    for warning in dryrun.manifest_warnings(spec, policy.min_replicas, policy.max_replicas):
        print(f"scaler dry-run: warning: {warning}", file=sys.stderr)
    return policy


def _end(summary: dryrun.Summary, output: str) -> None:
    """The closing line: on stdout after text lines, on stderr so JSON output stays JSON lines."""
    print(summary.line(), file=sys.stderr if output == "json" else sys.stdout, flush=True)


def _print_decisions(scaledobject: str, observations: str, output: str, trigger_index: int | None) -> int:
    from scaler.service.app import dry_run_offline

    spec = load_scaledobject(scaledobject, trigger_index)
    policy = _checked(spec)
    name = f"{spec.namespace}/{spec.name}"
    summary = dryrun.Summary()
    compact = dryrun.CompactLines(policy.timezone)
    for decision in dry_run_offline(dict(spec.metadata), read_observations(observations)):
        if output == "json":
            print(dryrun.format_json(decision, name, policy.ttft_objective_seconds), flush=True)
        elif output == "wide":
            print(
                dryrun.format_line(decision, None, policy.timezone, policy.ttft_objective_seconds), flush=True
            )
        else:
            print(compact(decision), flush=True)
        summary.add(decision)
    _end(summary, output)
    return 0


def _dry_run_live(args: argparse.Namespace) -> int:
    from scaler.service.app import (
        decider_params,
        decision_printer,
        dry_run_live,
        live_source,
        start_inventory,
    )

    spec = load_scaledobject(args.scaledobject, args.trigger_index)
    written = spec.metadata.get("prometheusAddress")
    name = f"{spec.namespace}/{spec.name}"
    if not args.prometheus:
        if not written:
            raise cliargs.UsageError(
                "--observations FILE (offline) or --prometheus URL (live): one is needed, the trigger"
                f" of {args.scaledobject} names no prometheusAddress"
            )
        problem = cliargs.url_problem(written)
        if problem is not None:
            raise cliargs.UsageError(
                f"the trigger's prometheusAddress {written!r}: {problem}; or give --prometheus"
            )
        print(f"scaler dry-run: live, from the trigger's prometheusAddress {written}", file=sys.stderr)
    elif cliargs.prometheus_over("scaler dry-run", args.prometheus, written, name) != written:
        spec = dataclasses.replace(
            spec, metadata={k: v for k, v in spec.metadata.items() if k != "prometheusAddress"}
        )
    policy = _checked(spec)
    summary = dryrun.Summary()
    printer = decision_printer(
        args.output, name, lambda line: print(line, flush=True), policy.timezone, summary
    )
    inventory = None
    if args.kubeconfig or args.kubernetes:
        inventory = start_inventory(args.kubeconfig, probe=True)
        if not inventory.wait_synced(30):
            print(f"scaler dry-run: warning: Kubernetes not synced: {inventory.problem()}", file=sys.stderr)
    try:
        source = live_source(args.prometheus, inventory, rate_window=args.rate_window, step_s=args.interval)
        params = decider_params(args.rate_window)
        asyncio.run(
            dry_run_live(spec, source, [printer], interval_s=args.interval, once=args.once, params=params)
        )
    except KeyboardInterrupt:
        _end(summary, args.output)  # Ctrl-C ends a live run: its summary, then exit status 130
        raise
    finally:
        if inventory is not None:
            inventory.stop()
    _end(summary, args.output)  # after --once; never before a fatal error's line
    return 0


def _serve(args: argparse.Namespace) -> int:
    from scaler.service.app import serve

    settings = serve_settings.from_args(args)
    log = logs.configure(settings.log_format, settings.log_level)
    asyncio.run(serve(settings, log))
    return 0


def _demo(args: argparse.Namespace) -> int:
    if not args.offline:
        from scaler.cli.demo import main as demo_main

        return demo_main(args.duration, args.interval, args.output)
    examples = resources.files("scaler") / "examples"
    with (
        resources.as_file(examples / "scaledobject.yaml") as so,
        resources.as_file(examples / "observations.jsonl") as obs,
    ):
        return _print_decisions(str(so), str(obs), args.output, None)


def _converted(text: str) -> tuple[str, list[str]]:
    """``scaler convert``'s rewrite of a plain KEDA ScaledObject: the new YAML, one line per change."""
    new, conversions = convert_cli.convert_text(text)
    return new, [line for c in conversions for line in (*c.changes, *(f"warning: {w}" for w in c.warnings))]


def _replay(args: argparse.Namespace) -> int:
    from scaler.sources.history import read_history, scrape_interval
    from scaler.sources.kube_state import recorded_pods
    from scaler.sources.prometheus import router_queues

    def read_pods(kubeconfig: str | None, namespace: str, deployment: str) -> tuple[str, list[PodTimes]]:
        from scaler.sources.kubernetes import KubernetesConfigError, read_pod_times

        try:
            return read_pod_times(kubeconfig, namespace, deployment)
        except KubernetesConfigError as exc:  # the user's input: one error line, exit 2
            raise cliargs.UsageError(f"--kubeconfig: {exc}") from None

    return replay_cli.run(
        args,
        replay_cli.Upstream(
            read_history, _converted, read_pods, router_queues, recorded_pods, scrape_interval
        ),
    )


def _dry_run(args: argparse.Namespace) -> int:
    if args.observations:
        return _print_decisions(args.scaledobject, args.observations, args.output, args.trigger_index)
    return _dry_run_live(args)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "serve": _serve,
    "dry-run": _dry_run,
    "demo": _demo,
    "replay": _replay,
    "convert": convert_cli.run,
    "doctor": doctor_cli.run,
    "timeline": timeline_cli.run,
}
# Old names of commands, still answered for one release with a deprecation line: "trace" is the
# request trace a replay replays, so the decision history a command draws is a timeline.
RENAMED_COMMANDS = {"trace": "timeline"}


def commands() -> dict[str, argparse.ArgumentParser]:
    """Each ``scaler`` subcommand's parser by its current name, in the order ``scaler --help`` lists
    them (the old names of RENAMED_COMMANDS left out)."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {name: p for name, p in sub.choices.items() if name not in RENAMED_COMMANDS}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``scaler`` command line; returns the exit status.

    0 done; 2 the user's input or a source it names cannot be used (``scaler.errors``: one line,
    ``scaler COMMAND: error: ...``); 1 a bug of ours (one line, the traceback with ``--debug``);
    130 Ctrl-C.
    """
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # a bad command line (cliargs.Parser.error: its line said), --help
        return int(exc.code or 0)
    if args.command in RENAMED_COMMANDS:
        new = RENAMED_COMMANDS[args.command]
        print(
            f"scaler: deprecated: `scaler {args.command}` is now `scaler {new}`; the old name goes in the"
            " next release",
            file=sys.stderr,
        )
        args.command = new
    prog = f"scaler {args.command}"
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader left (``| head``): stop quietly, and let nothing flush into the closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # noqa: BLE001 - every error ends in one line; only a bug's says so
        return _ended(exc, prog, args.debug)


def _ended(exc: Exception, prog: str, debug: bool) -> int:
    """The line an error ends the command with, and its exit status: 2 for the user's (the input,
    or a source it names: ``scaler.errors``; pydantic's ValidationError of a model built from the
    input), 1 for a bug of ours, its traceback first with ``--debug``."""
    if isinstance(exc, ValidationError):  # a model built from the input: its problems, in our words
        print(f"{prog}: error: {exc.title}: {validation_problems(exc.errors())}", file=sys.stderr)
        return 2
    if is_users(exc):
        print(f"{prog}: error: {_said(exc)}", file=sys.stderr)
        return 2
    if debug:
        traceback.print_exc()
    print(
        f"{prog}: bug: {type(exc).__name__}: {exc}"
        + ("" if debug else " (--debug shows the traceback; please report it)"),
        file=sys.stderr,
    )
    return 1


def _said(exc: BaseException) -> str:
    """The error's one line: a file that cannot be opened (to read or to write) says which and why."""
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    return str(exc)
