"""Command line: ``scaler serve | dry-run | demo``. Parses arguments, prints, exits."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from importlib import resources

from pydantic import ValidationError

from scaler import __version__
from scaler.config import MetadataError, Settings
from scaler.outputs import dryrun, logs
from scaler.replay import cli as replay_cli
from scaler.sources.files import InputFileError, load_scaledobject, read_observations


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"SCALER_{name}", default)


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", help="serve KEDA's ExternalScaler gRPC API")
    p.add_argument("--host", default=_env("HOST", "0.0.0.0"), help="listen address (SCALER_HOST)")  # noqa: S104
    p.add_argument(
        "--port", type=int, default=int(_env("PORT", "9090") or 9090), help="gRPC port (SCALER_PORT)"
    )
    p.add_argument(
        "--refresh-interval",
        type=float,
        default=float(_env("REFRESH_INTERVAL", "15") or 15),
        help="seconds between refreshes of every target's decision (SCALER_REFRESH_INTERVAL)",
    )
    p.add_argument(
        "--grace",
        type=float,
        default=float(_env("GRACE", "20") or 20),
        help="seconds in-flight RPCs get on SIGTERM (SCALER_GRACE)",
    )
    p.add_argument("--log-format", choices=["json", "console"], default=_env("LOG_FORMAT", "json"))
    p.add_argument(
        "--log-level", choices=["debug", "info", "warning", "error"], default=_env("LOG_LEVEL", "info")
    )
    p.add_argument("--tls-cert-file", default=_env("TLS_CERT_FILE"), help="server certificate (PEM) for TLS")
    p.add_argument("--tls-key-file", default=_env("TLS_KEY_FILE"), help="server private key (PEM) for TLS")
    p.add_argument(
        "--tls-client-ca-file",
        default=_env("TLS_CLIENT_CA_FILE"),
        help="CA bundle (PEM); when set, clients must present a certificate it signed (mutual TLS)",
    )


def _add_dry_run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("dry-run", help="print the decisions the scaler would make, without serving KEDA")
    p.add_argument(
        "--scaledobject", required=True, help="ScaledObject manifest (YAML) with an external trigger"
    )
    p.add_argument("--observations", required=True, help="observations, one JSON object per line")
    p.add_argument("--trigger-index", type=int, default=None, help="which trigger, when several are external")
    p.add_argument("--output", choices=["text", "json"], default="text")


def _add_demo(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("demo", help="dry-run the embedded example ScaledObject over an embedded scenario")
    p.add_argument("--output", choices=["text", "json"], default="text")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scaler", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_serve(sub)
    _add_dry_run(sub)
    _add_demo(sub)
    replay_cli.add_parser(sub)
    return parser


def _print_decisions(scaledobject: str, observations: str, output: str, trigger_index: int | None) -> int:
    from scaler.app import dry_run_offline

    spec = load_scaledobject(scaledobject, trigger_index)
    name = f"{spec.namespace}/{spec.name}"
    for decision in dry_run_offline(dict(spec.metadata), read_observations(observations)):
        line = dryrun.format_json(decision, name) if output == "json" else dryrun.format_line(decision)
        print(line, flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "serve":
            from scaler.app import serve

            settings = Settings(
                host=args.host,
                port=args.port,
                refresh_interval_seconds=args.refresh_interval,
                grace_seconds=args.grace,
                log_format=args.log_format,
                log_level=args.log_level,
                tls_cert_file=args.tls_cert_file,
                tls_key_file=args.tls_key_file,
                tls_client_ca_file=args.tls_client_ca_file,
            )
            log = logs.configure(settings.log_format, settings.log_level)
            asyncio.run(serve(settings, log))
            return 0
        if args.command == "dry-run":
            return _print_decisions(args.scaledobject, args.observations, args.output, args.trigger_index)
        if args.command == "replay":
            return replay_cli.run(args)
        if args.command == "demo":
            examples = resources.files("scaler") / "examples"
            with (
                resources.as_file(examples / "scaledobject.yaml") as so,
                resources.as_file(examples / "observations.jsonl") as obs,
            ):
                return _print_decisions(str(so), str(obs), args.output, None)
    except (MetadataError, InputFileError, ValidationError, ValueError, OSError) as exc:
        print(f"scaler: error: {exc}", file=sys.stderr)
        return 2
    return 2
