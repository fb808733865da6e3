"""The ``scaler convert`` command: its options, and the run that writes the YAML and the report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scaler.cli import args as cliargs
from scaler.manifest import DEFAULT_SCALER_ADDRESS
from scaler.replay import INSTALL_HINT, missing_extra
from scaler.replay.cli import DEFAULT_START, KEDA_VERSION, KEDA_VERSIONS, add_history_options

# convert's YAML library is its own extra (the server image has none of it).
CONVERT_EXTRA = "ruamel"
CONVERT_HINT = "convert needs its extra: pip install 'llm-gpu-scaler[convert]' (ruamel.yaml)"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``scaler convert`` subcommand and its options."""
    p = subparsers.add_parser(
        "convert",
        help="rewrite a ScaledObject with plain KEDA triggers for this scaler",
        description="Rewrite a ScaledObject with plain KEDA triggers (prometheus, cron) as one external"
        " trigger for this scaler, printing each change and why: every key is carried (the report says"
        " where), or dropped with its reason. A key KEDA does not accept (a misspelled trigger key or"
        " ScaledObject field) is an error naming the key meant, exit status 2, unless --force"
        " (docs/convert.md).",
    )
    p.add_argument(
        "scaledobject",
        type=cliargs.existing_file,
        metavar="FILE",
        help="the existing ScaledObject (YAML; other documents are kept)",
    )
    p.add_argument(
        "--out",
        default=None,
        type=cliargs.to_write(),
        metavar="FILE",
        help="write the new ScaledObject here (default: stdout)",
    )
    cliargs.deprecated(p, ["-o", "--output"], "--out", dest="out", type=cliargs.to_write(), metavar="FILE")
    p.add_argument(
        "--scaler-address",
        default=DEFAULT_SCALER_ADDRESS,
        help=f"this scaler's gRPC address as KEDA reaches it (default {DEFAULT_SCALER_ADDRESS})",
    )
    p.add_argument(
        "--replay",
        metavar="TRACE.csv",
        nargs="?",
        const="",
        default=None,
        type=_trace_or_history,
        help="also replay the old and the new ScaledObject on this trace (or, with no file, on --prometheus'"
        " history): one table, a row each, with the clairvoyant reference",
    )
    add_history_options(p, "with --replay: replay")
    cliargs.add_file(p, "--cluster", "with --replay: the cluster model (docs/replay.md)")
    p.add_argument(
        "--replay-out",
        default="replay-out",
        type=cliargs.to_write(folder=True),
        metavar="DIR",
        help="with --replay: the folder for replay.png and summary.json",
    )
    p.add_argument("--no-plot", action="store_true", help="with --replay: skip replay.png")
    p.add_argument(
        "--keda-version",
        choices=KEDA_VERSIONS,
        default=KEDA_VERSION,
        help="with --replay: the KEDA whose calls are replayed, as scaler replay's --keda-version"
        f" (default {KEDA_VERSION})",
    )
    cliargs.add_instant(
        p, "--start", f"with --replay TRACE.csv: wall time of the trace's second 0 (default {DEFAULT_START})"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="convert even when a key is not one KEDA accepts (a misspelled trigger key or"
        " ScaledObject field): drop it and report it dropped; without it such a key is an error",
    )


def _trace_or_history(text: str) -> str:
    """``--replay``'s value: a trace file that is there, or nothing (the --prometheus history)."""
    return text if text == "" else cliargs.existing_file(text)


def run(args: argparse.Namespace) -> int:
    """Run ``scaler convert``: write the new ScaledObject, report each change, replay if asked;
    without the convert extra, one line saying what to install (exit status 2)."""
    try:
        return _run(args)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != CONVERT_EXTRA:
            raise
        print(f"scaler convert: error: {CONVERT_HINT}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    from scaler.adoption.convert.compare import replay
    from scaler.adoption.convert.report import ConvertError, RefusedKeysError, print_report
    from scaler.adoption.convert.rewrite import convert_text

    try:
        text = Path(args.scaledobject).read_text()
        converted, conversions = convert_text(text, args.scaler_address, args.force, args.scaledobject)
    except OSError as exc:
        print(f"scaler convert: error: cannot read {args.scaledobject}: {exc.strerror}", file=sys.stderr)
        return 2
    except RefusedKeysError as exc:
        for line in exc.lines:
            print(f"scaler convert: error: {line} (--force drops it)", file=sys.stderr)
        return 2
    except ConvertError as exc:
        print(f"scaler convert: error: {exc}", file=sys.stderr)
        return 2
    # The YAML goes to stdout unless --out names a file; the report goes wherever the YAML does not.
    report = sys.stdout if args.out else sys.stderr
    print_report(conversions, report)
    if args.out:
        Path(args.out).write_text(converted)
        print(f"wrote {args.out}", file=report)
    else:
        sys.stdout.write(converted)
        sys.stdout.flush()
    if args.replay is not None or args.prometheus:
        try:
            return replay(args, text, converted, report)
        except ModuleNotFoundError as exc:
            if not missing_extra(exc):
                raise
            print(f"scaler convert: error: --replay: {INSTALL_HINT}", file=sys.stderr)
            return 2
    return 0
