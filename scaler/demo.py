"""``scaler demo``: live decisions on an embedded default, without a cluster.

It starts Debian's real Prometheus on a free loopback port, a simulated vLLM fleet for it
to scrape, and a simulated GPU pool standing in for Kubernetes (8 GPUs, 20 s cold start).
A scripted load (idle, a ramp, a burst larger than the pool, the decay) drives the fleet;
each decision is printed and applied to the simulated Deployment, as KEDA would apply it.
The scaler reads everything through the same live path as ``scaler serve``.
"""

from __future__ import annotations

import asyncio
import math
import signal
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

import yaml

from scaler.app import decision_printer, dry_run_live, wall_clock
from scaler.model import Decision
from scaler.registry import Target
from scaler.sim.cluster import SimulatedCluster
from scaler.sim.fleet import PodLoad, SimulatedFleet
from scaler.sim.prometheus import LocalPrometheus
from scaler.sources.files import scaledobject_from_dict
from scaler.sources.live import LiveSource
from scaler.sources.prometheus import PrometheusReader

PROMPT_TOKENS = 1100  # per request, as in the Azure conversation trace
OUTPUT_TOKENS = 210
PREFILL_PER_REPLICA = 9000.0  # tokens/s
DECODE_PER_REPLICA = 1800.0
REQUESTS_PER_REPLICA = 1.0 / (PROMPT_TOKENS / PREFILL_PER_REPLICA + OUTPUT_TOKENS / DECODE_PER_REPLICA)


def demand(t: float) -> float:
    """Requests per second the demo's users send, t seconds after start."""
    if t < 20:
        return 2.0
    if t < 50:
        return 2.0 + (t - 20) * 0.4  # ramp to 14/s
    if t < 70:
        return 40.0  # a burst bigger than 8 GPUs can serve
    return max(3.0, 14.0 * math.exp(-(t - 70) / 20))


def demo_scaledobject(now: datetime) -> dict[str, object]:
    """The embedded ScaledObject, with a pre-warm window opening within the next two minutes."""
    opens = (now + timedelta(seconds=75)).replace(second=0, microsecond=0) + timedelta(minutes=1)
    closes = opens + timedelta(minutes=1)
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": "llama-3-8b", "namespace": "inference"},
        "spec": {
            "scaleTargetRef": {"name": "vllm-llama-3-8b"},
            "minReplicaCount": 2,
            "maxReplicaCount": 12,
            "triggers": [
                {
                    "type": "external",
                    "metadata": {
                        "scalerAddress": "demo:9090",
                        "engine": "vllm",
                        "labelSelector": 'model_name="meta-llama/Llama-3.1-8B-Instruct"',
                        "minReplicas": "2",
                        "maxReplicas": "12",
                        "targetQueuePerReplica": "10",
                        "promptTokensPerSecondPerReplica": f"{PREFILL_PER_REPLICA:g}",
                        "generationTokensPerSecondPerReplica": f"{DECODE_PER_REPLICA:g}",
                        "targetUtilization": "0.75",
                        "coldStartSeconds": "20",
                        "prewarmStart": f"{opens.minute} {opens.hour} * * *",
                        "prewarmEnd": f"{closes.minute} {closes.hour} * * *",
                        "prewarmReplicas": "6",
                        "timezone": "UTC",
                    },
                }
            ],
        },
    }


class LoadDriver:
    """Moves the simulated fleet's metrics from the scripted demand and the Ready replicas."""

    def __init__(self, fleet: SimulatedFleet, cluster: SimulatedCluster, clock: Callable[[], float]) -> None:
        self.fleet = fleet
        self.cluster = cluster
        self.clock = clock
        self.start = clock()
        self.queue = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def step(self, dt: float) -> None:
        t = self.clock() - self.start
        ready = self.cluster.ready_pods()
        self.fleet.set_pods(ready or ["vllm-0"])
        capacity = len(ready) * REQUESTS_PER_REPLICA
        arrivals = demand(t)
        served = min(capacity, arrivals + self.queue / max(dt, 1e-9))
        self.queue = max(0.0, self.queue + (arrivals - served) * dt)
        waiting_time = self.queue / capacity if capacity else 60.0
        self.fleet.set_fleet_load(
            PodLoad(
                waiting=self.queue,
                running=min(served, capacity) * 4,
                prompt_tokens_per_s=served * PROMPT_TOKENS,
                generation_tokens_per_s=served * OUTPUT_TOKENS,
                requests_per_s=served,
                ttft_seconds=0.15 + waiting_time,
                kv_cache_usage=min(1.0, served / capacity) if capacity else 1.0,
            )
        )

    def _run(self) -> None:
        last = self.clock()
        while not self._stop.wait(0.25):
            now = self.clock()
            self.step(now - last)
            last = now

    def __enter__(self) -> LoadDriver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


async def run_demo(
    duration_s: float, interval_s: float, output: str, write: Callable[[str], None] = print
) -> int:
    clock = time.monotonic
    cluster = SimulatedCluster(
        gpus_total=8, gpus_per_replica=1, cold_start_s=20, initial_replicas=2, clock=clock
    )
    fleet = SimulatedFleet(namespace="inference", model="meta-llama/Llama-3.1-8B-Instruct")
    fleet.set_pods(cluster.ready_pods())
    fleet.start()
    prometheus = LocalPrometheus(scrape_interval_s=1.0)
    try:
        prometheus.start([fleet.address])
        doc = demo_scaledobject(wall_clock())
        spec = scaledobject_from_dict(doc)
        meta = spec.metadata
        write(
            f"# demo: Prometheus {prometheus.url} scraping a simulated vLLM fleet at {fleet.address};"
            f" a simulated pool of {cluster.gpus_total} GPUs, 1 per replica,"
            f" {cluster.cold_start_s:g}s cold start."
        )
        write(
            "# load: 2 req/s, a ramp to 14 req/s from 20 s, a 40 req/s burst at 50-70 s, then decay;"
            f" pre-warm window {meta['prewarmStart']} -> {meta['prewarmEnd']} (UTC)"
            f" for {meta['prewarmReplicas']} replicas."
        )
        write("# ScaledObject (trigger metadata):")
        for line in yaml.safe_dump(dict(meta), sort_keys=False).splitlines():
            write(f"#   {line}")
        reader = PrometheusReader(
            prometheus.url, rate_window="10s", history_seconds=60, history_step_s=interval_s
        )
        source = LiveSource(reader, cluster)
        printer = decision_printer(output, f"{spec.namespace}/{spec.name}", write)

        def apply(target: Target, decision: Decision) -> None:
            cluster.set_target(decision.replicas)

        with LoadDriver(fleet, cluster, clock):
            await dry_run_live(
                spec, source, [printer, apply], interval_s=interval_s, duration_s=duration_s or None
            )
        return 0
    finally:
        prometheus.close()
        fleet.stop()


def main(duration_s: float = 150.0, interval_s: float = 2.0, output: str = "text") -> int:
    # SIGTERM (as from `timeout`) unwinds like Ctrl-C, so Prometheus and the fleet are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    return asyncio.run(run_demo(duration_s, interval_s, output))
