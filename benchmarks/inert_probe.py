"""What looking for inert targets costs a refresh: 1,000 ScaledObjects read with and without the probe.

    python -m benchmarks.inert_probe [--scaledobjects 1000] [--models 10] [--refreshes 5]

A real Prometheus scrapes ``--models`` simulated vLLM fleets (two pods each, every 5 s); the live
source observes ``--scaledobjects`` ScaledObjects over those models, one batch per refresh, as
``scaler serve`` does (``LiveSource._observe``), three ways: without the probe (the reads
alone), with it on healthy series, and with it while one model's servers write another model
name (its targets ``no_series``: the hour's subquery runs for them). Prints, per way, the
Prometheus queries and the wall and CPU seconds of one refresh (the median of ``--refreshes``),
and the reasons found.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from scaler.sim.fleet import PodLoad, SimulatedFleet
from scaler.sim.prometheus import LocalPrometheus
from scaler.sources.live import LiveSource
from scaler.sources.probe import SeriesProbe
from scaler.sources.prometheus import PrometheusReader
from scaler.targets.registry import TargetKey, TargetRegistry


class NoProbe:
    """The live source as it was before the probe: no layouts, so no inert reason."""

    def layouts(self, targets: Any, at: datetime) -> dict[Any, Any]:
        return {}


def refresh(
    source: LiveSource, targets: list[Any], reader: PrometheusReader
) -> tuple[float, float, int, Counter[str]]:
    """One refresh: wall s, CPU s, queries, and the reasons found over the targets."""
    before = reader.queries
    wall, cpu = time.perf_counter(), time.process_time()
    seen = source._observe(targets, datetime.now(UTC))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    reasons: Counter[str] = Counter(i.reason.value for obs in seen.values() for i in obs.inert)
    return wall, cpu, reader.queries - before, reasons


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scaledobjects", type=int, default=1000)
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--refreshes", type=int, default=5)
    args = parser.parse_args()

    fleets = []
    for m in range(args.models):
        fleet = SimulatedFleet(namespace=f"team-{m % 2}", model=f"model-{m}")
        fleet.set_pods([f"model-{m}-a", f"model-{m}-b"])
        fleet.set_fleet_load(PodLoad(waiting=4, running=20, prompt_tokens_per_s=4000, requests_per_s=4))
        fleet.start()
        fleets.append(fleet)
    prom = LocalPrometheus(scrape_interval_s=5.0)
    prom.start([f.address for f in fleets])
    try:
        prom.wait_for(f"count(vllm:num_requests_waiting) >= {2 * args.models}", 60)
        time.sleep(12)  # two scrapes more: every rate has its samples
        registry = TargetRegistry()
        targets = []
        for i in range(args.scaledobjects):
            meta = {"labelSelector": f'model_name="model-{i % args.models}"', "minReplicas": "1"}
            targets.append(registry.resolve(TargetKey(f"team-{i % 2}", f"so-{i}"), meta, 0.0)[0])
        rows = []
        for way in ("without the probe", "with the probe, healthy", "with the probe, one model renamed"):
            reader = PrometheusReader(prom.url, rate_window="15s")
            probe = NoProbe() if way == "without the probe" else SeriesProbe(reader)
            source = LiveSource(reader, probe=probe)  # type: ignore[arg-type]
            if way.endswith("renamed"):
                fleets[0].model = "model-0-renamed"
                time.sleep(12)
            runs = [refresh(source, targets, reader) for _ in range(args.refreshes)]
            rows.append(
                (
                    way,
                    statistics.median(r[2] for r in runs),
                    statistics.median(r[0] for r in runs),
                    statistics.median(r[1] for r in runs),
                    runs[-1][3],
                )
            )
        print(
            f"{args.scaledobjects} ScaledObjects over {args.models} models, {args.refreshes} refreshes each"
        )
        print(f"{'':36} {'queries':>8} {'wall s':>8} {'CPU s':>8}  reasons")
        for way, queries, wall, cpu, reasons in rows:
            found = ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())) or "none"
            print(f"{way:36} {queries:8.0f} {wall:8.3f} {cpu:8.3f}  {found}")
    finally:
        prom.close()
        for fleet in fleets:
            fleet.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
