"""Restart: N new ScaledObjects against a real Prometheus holding an hour of history.

    python -m benchmarks.restart [--targets 1 50 1000] [--models 10] [--spread 30]

What a restart (or a rollout) of the scaler costs Prometheus and KEDA: every ScaledObject is
new to the process, so each is warmed from an hour of history (``history_seconds``) before its
first decision. A real Prometheus is filled with 75 minutes of ``--models`` vLLM models
(``tests/fleet_history.py``: two pods each, token counters, queue, running, KV cache, TTFT and
inter-token latency histograms, a sample every 15 s) by ``promtool tsdb create-blocks-from``.
The serving runtime (``scaler.service.app.live_source`` and ``Runtime`` on the refresh grid, as
``scaler serve`` wires them, its refresh loop running) then registers N targets the way KEDA's first calls do
(``registry.resolve`` + ``on_new_target``, what the ExternalScaler service does), spread over
the ``--spread`` seconds of KEDA's polling interval, or all at once with ``--spread 0``. Target
``i`` selects ``model_name="model-<i mod models>"``.

Printed per N: the range and instant queries Prometheus received (its own
``prometheus_http_requests_total`` by handler, less this benchmark's own read of it) from the
first registration until every target had its first decision, and the seconds from a target's
registration to its first decision (median and max). Writes ``benchmarks/results/restart.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import time
import urllib.request
from typing import Any

from benchmarks.harness import ROOT
from scaler.service.app import live_source, wall_clock
from scaler.sim.prometheus import LocalPrometheus
from scaler.targets.registry import Target, TargetKey, TargetRegistry
from scaler.targets.runtime import Runtime
from tests.fleet_history import history

RESULTS = ROOT / "benchmarks" / "results"
HISTORY_MINUTES = 75  # more than the hour a new target warms from
REFRESH_S = 15.0  # scaler serve's default refresh interval, the step the warm-up reads on


def counts(prometheus: LocalPrometheus) -> dict[str, float]:
    """Requests Prometheus has answered per API handler, read from its own /metrics (not its TSDB,
    which holds the self-scrape a scrape interval late)."""
    with urllib.request.urlopen(f"{prometheus.url}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("prometheus_http_requests_total{"):
            handler = line.split('handler="', 1)[1].split('"', 1)[0]
            out[handler] = out.get(handler, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


async def restart(
    url: str, prometheus: LocalPrometheus, n: int, models: int, spread_s: float
) -> dict[str, Any]:
    """Register ``n`` targets over ``spread_s`` seconds on a fresh runtime; its queries and first decisions."""
    source = live_source(url, None, None, history_seconds=3600.0, step_s=REFRESH_S)
    registry = TargetRegistry()
    decided: dict[TargetKey, float] = {}

    def first(target: Target, decision: object) -> None:
        decided.setdefault(target.key, time.monotonic())

    runtime = Runtime(
        registry, source, wall_clock, sinks=[first], refresh_interval_s=REFRESH_S, grid=True, settle_s=2.0
    )
    stop = asyncio.Event()
    loop_task = asyncio.create_task(runtime.run(stop))
    await asyncio.sleep(0.5)  # the first refresh (of no target yet) has run
    before = counts(prometheus)
    registered: dict[TargetKey, float] = {}
    targets: list[Target] = []
    started = time.monotonic()
    for i in range(n):
        due = started + (spread_s * i / n if n > 1 else 0.0)
        if due > time.monotonic():
            await asyncio.sleep(due - time.monotonic())
        key = TargetKey(f"team-{i // 100}", f"so-{i}")
        metadata = {
            "labelSelector": f'model_name="model-{i % models}"',
            "minReplicas": "1",
            "maxReplicas": "50",
            "coldStartSeconds": "180",
            "itlObjectiveSeconds": "0.05",
        }
        target, new = registry.resolve(key, metadata, runtime.now_timestamp())
        registered[key] = time.monotonic()
        if new:
            runtime.on_new_target(target)
        targets.append(target)
    for target in targets:
        await runtime.first_decision(target, 600.0)
    all_done = time.monotonic()
    after = counts(prometheus)
    stop.set()
    await loop_task
    await runtime.close()
    firsts = [decided[t.key] - registered[t.key] for t in targets if t.key in decided]
    return {
        "targets": n,
        "spread_s": spread_s,
        "range_queries": after.get("/api/v1/query_range", 0.0) - before.get("/api/v1/query_range", 0.0),
        "instant_queries": after.get("/api/v1/query", 0.0) - before.get("/api/v1/query", 0.0),
        "seconds_to_first_decision_p50": statistics.median(firsts) if firsts else None,
        "seconds_to_first_decision_max": max(firsts) if firsts else None,
        "seconds_until_all_decided": all_done - started,
        "refreshes": runtime.refreshes,
        "undecided": n - len(firsts),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--targets", type=int, nargs="+", default=[1, 50, 1000])
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument(
        "--spread",
        type=float,
        default=30.0,
        help="seconds the first calls spread over (KEDA's pollingInterval)",
    )
    parser.add_argument("--label", default="", help="a name for this run in the results file (e.g. before)")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    now = int(time.time())
    prometheus = LocalPrometheus(retention="30d")
    runs = []
    try:
        prometheus.import_openmetrics(history(args.models, now, HISTORY_MINUTES))
        prometheus.start()
        prometheus.wait_for("vllm:num_requests_running", timeout_s=60)
        for n in args.targets:
            result = asyncio.run(restart(prometheus.url, prometheus, n, args.models, args.spread))
            runs.append(result)
            print(
                f"{n:>5} new targets over {args.spread:g}s: {result['range_queries']:.0f} range queries,"
                f" {result['instant_queries']:.0f} instant queries ({result['refreshes']} refreshes);"
                f" first decision p50 {result['seconds_to_first_decision_p50']:.2f}s"
                f" max {result['seconds_to_first_decision_max']:.2f}s after registering;"
                f" all decided {result['seconds_until_all_decided']:.1f}s after the first call",
                flush=True,
            )
    finally:
        prometheus.close()
    path = RESULTS / "restart.json"
    stored = json.loads(path.read_text()) if path.exists() else {}
    stored[args.label or "latest"] = {
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
        "models": args.models,
        "runs": runs,
    }
    path.write_text(json.dumps(stored, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
