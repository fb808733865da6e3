"""The ``scaler doctor`` command: its options, the table or JSON it prints, and its exit status."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict

from scaler.adoption.doctor.diagnose import diagnose
from scaler.adoption.doctor.objects import DEFAULT_MAX_GENERATION_S, Finding, Options
from scaler.adoption.doctor.read import (
    inert_reasons,
    inert_reported,
    read_cluster,
    router_queues,
    scraped_pods,
)
from scaler.cli import args as cliargs


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``scaler doctor`` subcommand and its options."""
    p = subparsers.add_parser(
        "doctor",
        help="check a cluster, read-only, for what makes LLM latency bad",
        description="Read Nodes, Deployments, ScaledObjects, HPAs, Ingresses and, where allowed, Services and"
        " PodDisruptionBudgets and, where served, DRA's and Kueue's objects (read-only) and print"
        " one row per pitfall found: severity, object, what is wrong, the fix. Exit 1 on an error.",
    )
    cliargs.add_file(
        p,
        "--kubeconfig",
        "kubeconfig file (default: in-cluster inside a pod, else $KUBECONFIG or ~/.kube/config)",
    )
    p.add_argument("--namespace", default=None, help="only this namespace (Nodes are always read)")
    cliargs.add_output(p, ("text", "json"), "a table, or one JSON array")
    cliargs.add_prometheus(
        p,
        "also check that Prometheus scrapes each workload, whether its series are there, fresh and"
        " picked by the labelSelector (and what a running scaler reports inert), and whether a router"
        " holds requests a ScaledObject does not read; it wins over every trigger's prometheusAddress"
        " (said on stderr)",
    )
    cliargs.add_duration(
        p,
        "--max-generation",
        "the longest generation you serve (10m; bare seconds too), for grace periods and timeouts"
        f" (default {DEFAULT_MAX_GENERATION_S:g}s)",
        kind=cliargs.duration(bare_seconds=True),
        default=DEFAULT_MAX_GENERATION_S,
        dest="max_generation_seconds",
    )
    cliargs.deprecated(
        p,
        ["--max-generation-seconds"],
        "--max-generation",
        dest="max_generation_seconds",
        type=cliargs.duration(bare_seconds=True),
    )


def format_text(findings: Sequence[Finding]) -> str:
    """The findings as an aligned table with a count line, or ``no findings``."""
    if not findings:
        return "no findings"
    rows = [(f.severity, f.object, f.problem, f.fix) for f in findings]
    width = max(len(r[1]) for r in rows)
    lines = [f"{'SEVERITY':<8}  {'OBJECT':<{width}}  PROBLEM -> FIX"]
    lines += [f"{s:<8}  {o:<{width}}  {p} -> {x}" for s, o, p, x in rows]
    errors = sum(f.severity == "error" for f in findings)
    lines.append(f"{len(findings)} findings, {errors} errors")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run ``scaler doctor``: print the findings; exit 1 on an error, 2 when the cluster is unreadable."""
    try:
        cluster = read_cluster(args.kubeconfig, args.namespace)
        scraped = scraped_pods(cluster, args.prometheus)
        queues = router_queues(cluster, args.prometheus)
        inert, reported = inert_reasons(cluster, args.prometheus), inert_reported(args.prometheus)
    except Exception as exc:  # noqa: BLE001 - the client's errors have no common base; say what failed
        from scaler.errors import UnreachableError
        from scaler.sources.kubernetes import KubernetesConfigError
        from scaler.sources.unreached import why_unreached

        # A kubeconfig that cannot be used says so itself (the file, or what is wrong in it); a
        # connection that failed, the OS's reason (not urllib3's text around it).
        if isinstance(exc, KubernetesConfigError | UnreachableError):  # each names what and why
            what = str(exc)
        else:
            why = why_unreached(exc)
            what = f"{type(exc).__name__}: {exc}" if why is None else why
        print(f"scaler doctor: error: cannot read the cluster: {what}", file=sys.stderr)
        return 2
    cluster = dataclasses.replace(
        cluster, scraped=scraped, router_queues=queues, inert=inert, inert_reported=reported
    )
    findings = diagnose(cluster, Options(max_generation_s=args.max_generation_seconds))
    if args.output == "json":
        print(json.dumps([asdict(f) for f in findings], indent=2))
    else:
        print(format_text(findings))
    return 1 if any(f.severity == "error" for f in findings) else 0
