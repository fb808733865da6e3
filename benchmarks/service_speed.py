"""Service speed: 1,000 ScaledObjects polled the way KEDA does, over real sockets.

    python -m benchmarks.service_speed [--scaledobjects 1000] [--load-seconds 90]

Prints p50/p99 latency per RPC for the scaler and, in the same run on the same machine,
for an empty ExternalScaler (constants only: the floor a gRPC Python server pays), the
scaler's CPU seconds per refresh cycle (measured while no RPC arrives, so it is the
refresh alone: seven batched Prometheus queries, 1,000 decisions and their log lines),
and its resident memory. Targets: p99 under 10 ms for each RPC, RSS under 250 MB.
Writes benchmarks/results/service_speed.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import time
import urllib.request
from typing import Any

from benchmarks.harness import (
    ALL_CPUS,
    ROOT,
    KedaClient,
    Recorder,
    Stack,
    cpu_seconds,
    layout,
    rss_mb,
    scaledobjects,
    start_empty_server,
    start_scaler,
)

RESULTS = ROOT / "benchmarks" / "results"


def scrape_value(metrics_port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as reply:
        for line in reply.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
    return float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scaledobjects", type=int, default=1000)
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--refresh", type=float, default=15.0)
    parser.add_argument("--quiet-cycles", type=int, default=3)
    parser.add_argument("--load-seconds", type=float, default=90.0)
    parser.add_argument("--empty-seconds", type=float, default=60.0)
    parser.add_argument("--bursts", type=int, default=20, help="bursts of 200 concurrent GetMetrics, alone")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)

    stack = Stack(models=args.models)
    scaler, port, metrics_port = start_scaler(
        stack.prometheus.url, args.refresh, RESULTS / "service_speed.scaler.log"
    )
    try:
        refs = scaledobjects(args.scaledobjects, args.models, f"127.0.0.1:{port}")
        recorder = Recorder()
        client = KedaClient(f"127.0.0.1:{port}", refs, recorder)
        registration_s = asyncio.run(client.register())
        print(f"registered {len(refs)} ScaledObjects in {registration_s:.1f}s", flush=True)

        refreshes_before = scrape_value(metrics_port, "llm_scaler_refreshes_total")
        cpu_before = cpu_seconds(scaler.pid)
        time.sleep(args.refresh * args.quiet_cycles + 1)
        cpu_quiet = cpu_seconds(scaler.pid) - cpu_before
        refreshes = scrape_value(metrics_port, "llm_scaler_refreshes_total") - refreshes_before
        refresh_wall = scrape_value(metrics_port, "llm_scaler_refresh_duration_seconds")
        cpu_per_refresh = cpu_quiet / max(refreshes, 1)
        print(
            f"quiet: {refreshes:.0f} refreshes, {cpu_per_refresh:.3f} CPU s each, last took {refresh_wall:.3f}s",
            flush=True,
        )

        load = Recorder()
        cpu_before = cpu_seconds(scaler.pid)
        asyncio.run(KedaClient(f"127.0.0.1:{port}", refs, load).run(args.load_seconds, args.refresh))
        cpu_load = cpu_seconds(scaler.pid) - cpu_before
        rss = rss_mb(scaler.pid)
        burst = Recorder()
        asyncio.run(KedaClient(f"127.0.0.1:{port}", refs, burst).bursts(args.bursts))
        queries: list[dict[str, Any]] = stack.prometheus.query(
            'sum(prometheus_http_requests_total{handler="/api/v1/query"})'
        )
    finally:
        scaler.terminate()
        scaler.wait(30)
        stack.close()

    empty_proc, empty_port = start_empty_server()
    try:
        empty_refs = scaledobjects(args.scaledobjects, args.models, f"127.0.0.1:{empty_port}")
        empty = Recorder()
        asyncio.run(
            KedaClient(f"127.0.0.1:{empty_port}", empty_refs, empty).run(args.empty_seconds, args.refresh)
        )
        empty_rss = rss_mb(empty_proc.pid)
        empty_burst = Recorder()
        asyncio.run(KedaClient(f"127.0.0.1:{empty_port}", empty_refs, empty_burst).bursts(args.bursts))
    finally:
        empty_proc.terminate()
        empty_proc.wait(30)

    ours, floor = load.summary(), empty.summary()
    failed = {f"{m}/{c}": n for (m, c), n in load.codes.items() if c != "OK"}
    result = {
        "machine": f"{platform.machine()}, {len(ALL_CPUS)} CPUs,"
        f" Python {platform.python_version()}; {layout()}",
        "scaledobjects": len(refs),
        "rpcs_per_second": sum(v["calls"] for v in ours.values()) / args.load_seconds,
        "registration_seconds": registration_s,
        "cpu_seconds_per_refresh": cpu_per_refresh,
        "refresh_wall_seconds": refresh_wall,
        "cpu_seconds_per_second_under_load": cpu_load / args.load_seconds,
        "rss_mb": rss,
        "empty_rss_mb": empty_rss,
        "scaler": ours,
        "empty_servicer": floor,
        "bursts_of_200": {"scaler": burst.summary(), "empty_servicer": empty_burst.summary()},
        "failed_rpcs": failed,
        "prometheus_queries_total": float(queries[0]["value"][1]) if queries else None,
    }
    (RESULTS / "service_speed.json").write_text(json.dumps(result, indent=2))

    print(f"\n{len(refs)} ScaledObjects, {result['rpcs_per_second']:.0f} RPC/s ({result['machine']})")
    print(
        f"{'RPC':<15}{'scaler p50':>12}{'p99':>9}{'max':>9}   {'empty p50':>10}{'p99':>9}   target p99 < 10 ms"
    )
    for method in ("GetMetricSpec", "GetMetrics", "IsActive"):
        a, b = ours[method], floor[method]
        verdict = "met" if a["p99_ms"] < 10 else "MISSED"
        print(
            f"{method:<15}{a['p50_ms']:>10.2f}ms{a['p99_ms']:>7.2f}ms{a['max_ms']:>7.1f}ms"
            f"   {b['p50_ms']:>8.2f}ms{b['p99_ms']:>7.2f}ms   {verdict}"
        )
    print(
        f"CPU per refresh cycle ({len(refs)} targets, no RPCs): {cpu_per_refresh:.3f} s;"
        f" last refresh wall {refresh_wall:.3f} s"
    )
    print(f"CPU under KEDA's load: {result['cpu_seconds_per_second_under_load']:.3f} s/s")
    rss_verdict = "met" if rss < 250 else "MISSED"
    print(
        f"resident memory: {rss:.0f} MB (empty servicer {empty_rss:.0f} MB)   target < 250 MB: {rss_verdict}"
    )
    b_ours, b_floor = burst.summary()["GetMetrics"], empty_burst.summary()["GetMetrics"]
    print(
        f"{args.bursts} bursts of 200 concurrent GetMetrics, nothing else running: scaler p50"
        f" {b_ours['p50_ms']:.1f} ms p99 {b_ours['p99_ms']:.1f} ms max {b_ours['max_ms']:.1f} ms;"
        f" empty servicer p50 {b_floor['p50_ms']:.1f} ms p99 {b_floor['p99_ms']:.1f} ms"
        f" max {b_floor['max_ms']:.1f} ms (for comparison; no target)"
    )
    print(f"failed RPCs: {failed or 'none'}")
    return 0 if not failed and rss < 250 and all(v["p99_ms"] < 10 for v in ours.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
