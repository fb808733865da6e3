"""``scaler demo``: live decisions on an embedded default, without a cluster.

It starts Debian's real Prometheus on a free loopback port, a simulated vLLM fleet for it
to scrape, and a simulated GPU pool standing in for Kubernetes (8 GPUs, 20 s cold start).
A scripted load drives the fleet, timed around a one-minute pre-warm window that opens at
the first minute boundary at least 30 s after the start (``W`` seconds in):

    [0, W)         2 req/s: the pre-warm window sets the target one cold start before W
    [W, W+10)      a ramp to 14 req/s: the queue that forms asks for more
    [W+10, W+25)   40 req/s, more than 8 GPUs serve: the GPU inventory clamps the target
    [W+25, ...)    decay to 2 req/s; the window closes at W+60 and the load signal lets the
                   target down as the decay leaves the demand it planned one cold start ago

A replica holds 30 sequences, each decoding 30 tokens/s, and prefills 9,000 prompt tokens/s:
with 1,100-token prompts and 210-token completions a request is in service 7.1 s, so the
slots bind at 4.2 requests/s per replica.

Each decision is printed and lands on the simulated Deployment as it would in a cluster:
through ``scaler.hpa``, the HPA model the replay uses, with the example ScaledObject's
``behavior`` (scale-up at once with tolerance 0, scale-down 2 pods a minute), which the
simulated cluster also reports to the scaler as the HPA it reads;
the run ends with a summary (``scaler.outputs.dryrun.Summary``) and what it showed. The
scaler reads everything through the same live path as ``scaler serve``; the first decision
waits for Prometheus' first scrape of the fleet.
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
from importlib import resources
from typing import Any

import yaml

from scaler.hpa import Metric
from scaler.inventory import ScaledObject
from scaler.manifest import first_scaledobject
from scaler.model import ClampKind, Decision, Signal
from scaler.outputs.dryrun import Summary
from scaler.service.app import decider_params, decision_printer, dry_run_live, live_source, wall_clock
from scaler.sim.cluster import SimulatedCluster
from scaler.sim.fleet import PodLoad, SimulatedFleet
from scaler.sim.hpa import Hpa
from scaler.sim.prometheus import LocalPrometheus
from scaler.sources.files import scaledobject_from_dict
from scaler.targets.registry import Target

PROMPT_TOKENS = 1100  # per request, as in the Azure conversation trace
OUTPUT_TOKENS = 210
PREFILL_PER_REPLICA = 9000.0  # prompt tokens/s a replica prefills
SLOTS = 30  # sequences a replica runs at once
DECODE_PER_SEQUENCE = 30.0  # completion tokens/s each running sequence gets
DECODE_PER_REPLICA = SLOTS * DECODE_PER_SEQUENCE  # 900 tokens/s with every slot busy
IN_SERVICE_S = PROMPT_TOKENS / PREFILL_PER_REPLICA + OUTPUT_TOKENS / DECODE_PER_SEQUENCE  # 7.1 s
# A replica finishes requests as fast as its scarcer resource allows: prefill (8.2 req/s)
# or slots held for a request's time in service (30 / 7.1 s = 4.2 req/s): the slots bind.
REQUESTS_PER_REPLICA = min(PREFILL_PER_REPLICA / PROMPT_TOKENS, SLOTS / IN_SERVICE_S)


LOW, PEAK, BURST = 2.0, 14.0, 40.0  # requests per second
RAMP_S, BURST_S = 10.0, 15.0  # the ramp from W, then the burst (the module's table)
END_S = 130.0  # after the window opens: the scale-down shows from W+85
DEMO_RATE_WINDOW = "10s"  # PromQL rate window: short, so a three-minute script shows its ramps


def demand(t: float, window_opens_s: float) -> float:
    """Requests per second the demo's users send, t seconds after start (the module's table)."""
    w = window_opens_s
    if t < w:
        return LOW
    if t < w + RAMP_S:
        return LOW + (t - w) * (PEAK - LOW) / RAMP_S
    if t < w + RAMP_S + BURST_S:
        return BURST
    return max(LOW, PEAK * math.exp(-(t - w - RAMP_S - BURST_S) / 10))


def window_opening(now: datetime) -> datetime:
    """The first whole minute at least 30 s after ``now``: cron windows open on minutes."""
    return (now + timedelta(seconds=30 + 59)).replace(second=0, microsecond=0)


def demo_scaledobject(now: datetime) -> dict[str, Any]:
    """The example ScaledObject (scaler/examples/scaledobject.yaml: its HPA behavior, fallback and
    intervals) with the demo's bounds, 2 to 12, and trigger, whose one-minute pre-warm window
    opens 30-90 s from now."""
    opens = window_opening(now)
    closes = opens + timedelta(minutes=1)
    text = (resources.files("scaler") / "examples" / "scaledobject.yaml").read_text()
    doc = dict(first_scaledobject(text, "scaler/examples/scaledobject.yaml"))
    doc["metadata"] = {"name": "llama-3-8b", "namespace": "inference"}
    doc["spec"] = {
        **doc["spec"],
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
                    "coldStartSeconds": "20",
                    "prewarmStart": f"{opens.minute} {opens.hour} * * *",
                    "prewarmEnd": f"{closes.minute} {closes.hour} * * *",
                    "prewarmReplicas": "6",
                    "timezone": "UTC",
                },
            }
        ],
    }
    return doc


def demo_hpa(so: ScaledObject) -> Hpa:
    """The HPA KEDA creates for the ScaledObject: its replica bounds and ``behavior``."""
    return Hpa(so.min_replica_count, so.max_replica_count, so.behavior)


def served_metric(replicas: int) -> list[Metric]:
    """What KEDA serves the HPA for a decision of ``replicas``: one AverageValue metric of target 1."""
    return [(float(replicas), 1.0, "AverageValue")]


class LoadDriver:
    """Moves the simulated fleet's metrics from the scripted demand and the Ready replicas."""

    def __init__(
        self,
        fleet: SimulatedFleet,
        cluster: SimulatedCluster,
        clock: Callable[[], float],
        window_opens_s: float,
    ) -> None:
        self.window_opens_s = window_opens_s
        self.fleet = fleet
        self.cluster = cluster
        self.clock = clock
        self.start = clock()
        self.queue = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def step(self, dt: float) -> None:
        """Advance the scripted load by ``dt`` seconds and set the fleet's metrics from the Ready pods."""
        t = self.clock() - self.start
        ready = self.cluster.ready_pods()
        self.fleet.set_pods(ready or ["vllm-0"])
        capacity = len(ready) * REQUESTS_PER_REPLICA
        arrivals = demand(t, self.window_opens_s)
        served = min(capacity, arrivals + self.queue / max(dt, 1e-9))
        self.queue = max(0.0, self.queue + (arrivals - served) * dt)
        waiting_time = self.queue / capacity if capacity else 60.0
        running = served * IN_SERVICE_S
        prefill_s = PROMPT_TOKENS / PREFILL_PER_REPLICA
        busy = min(0.9, served * prefill_s / len(ready)) if ready else 0.9
        # vLLM's phase times: a request waits for the queue ahead and for the prompts before its
        # own (M/M/1 on the prefill), then its prompt is prefilled.
        queued_s = prefill_s / (1.0 - busy) - prefill_s + waiting_time
        self.fleet.set_fleet_load(
            PodLoad(
                waiting=self.queue,
                running=running,
                prompt_tokens_per_s=served * PROMPT_TOKENS,
                generation_tokens_per_s=served * OUTPUT_TOKENS,
                requests_per_s=served,
                ttft_seconds=queued_s + prefill_s,
                kv_cache_usage=min(1.0, running / (len(ready) * SLOTS)) if ready else 1.0,
                queue_time_seconds=queued_s,
                prefill_time_seconds=prefill_s,
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


class Showed:
    """What the run showed, for its closing lines: the three things the script is for."""

    def __init__(self) -> None:
        self.summary = Summary()
        self.prewarm_at: datetime | None = None  # pre-warm set the target while load was low
        self.peak = 0
        self.down_to: tuple[datetime, int] | None = None  # the lowest target since the peak
        self.last: Decision | None = None

    def __call__(self, target: Target, decision: Decision) -> None:
        """Take one decision (a sink): count it, note the first pre-warm, the peak and the low since."""
        self.summary.add(decision)
        self.last = decision
        if decision.binding is Signal.PREWARM and self.prewarm_at is None:
            self.prewarm_at = decision.now
        if decision.replicas > self.peak:
            self.peak, self.down_to = decision.replicas, None
        elif decision.replicas < self.peak and (self.down_to is None or decision.replicas < self.down_to[1]):
            self.down_to = (decision.now, decision.replicas)

    def lines(self) -> list[str]:
        """The closing lines: the summary, when pre-warm set the target, how far it came down."""
        prewarm = (
            f"the pre-warm window set the target at {self.prewarm_at:%H:%M:%S}, before the load rose"
            if self.prewarm_at
            else "the pre-warm window never set the target"
        )
        down = (
            f"after the burst the target came down from {self.peak} to {self.down_to[1]}"
            f" (by {self.down_to[0]:%H:%M:%S})"
            if self.down_to
            else f"the target stayed at its peak of {self.peak}"
        )
        lines = [f"# {self.summary.line()}", f"# showed: {prewarm}; {down}"]
        held = self.summary.clamps.get(ClampKind.GPU_INVENTORY.value, 0)
        if held:
            lines.append(
                f"# the GPU clamp held {held} of {self.summary.decisions} decisions: how many depends on"
                f" where the {BURST_S:g} s burst falls against the decision grid and Prometheus' scrapes,"
                " so two runs can differ severalfold"
            )
        if self.last is not None:
            lines.append(f"# ends at {self.last.replicas}: {ending(self.last)}")
        return lines


def ending(decision: Decision) -> str:
    """Why the target is where the run left it, in plain words."""
    if decision.binding is Signal.FLOOR:
        return "the floor (minReplicas): the load needs no more"
    if decision.binding is not Signal.LOAD:
        return f"the {decision.binding.value} signal: {decision.signal_reasons[decision.binding]}"
    reason = decision.signal_reasons[Signal.LOAD]
    resource = {"slots": "batch slots", "prefill": "prefill"}.get(reason.split(" binds")[0], "capacity")
    planned = decision.forecast.busy_replicas_at_horizon or 0.0
    lead = decision.lead.seconds if decision.lead else 0.0
    late = 100 * (decision.forecast.late_expected or 0.0)
    return (
        f"the demand planned within the last cold start ({lead:.0f} s) fills {planned:.1f} replicas'"
        f" {resource}, and with the room its forecast has missed by, {decision.replicas} keep the"
        f" first tokens expected late at {late:.2f}%; the target falls as that plan ages out"
    )


async def run_demo(
    duration_s: float | None, interval_s: float, output: str, write: Callable[[str], None] = print
) -> int:
    """Run the scripted demo for ``duration_s`` (None: until the script ends; 0: until Ctrl-C)."""
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
        # The first decision should see the fleet: wait for Prometheus' scrapes of it (two,
        # so that the token rates exist too).
        prometheus.wait_for("rate(vllm:prompt_tokens_total[10s])", timeout_s=30)
        started = wall_clock()
        opens_s = (window_opening(started) - started).total_seconds()
        if duration_s is None:
            duration_s = opens_s + END_S
        spec = scaledobject_from_dict(demo_scaledobject(started))
        # KEDA creates the HPA for the ScaledObject; the cluster runs it and reports it, so the
        # tolerance the decision reads is the one that turns its target into replicas.
        cluster.create_hpa(demo_hpa(spec))
        meta = spec.metadata
        write(
            f"# demo: Prometheus {prometheus.url} scraping a simulated vLLM fleet at {fleet.address};"
            f" a simulated pool of {cluster.gpus_total} GPUs, 1 per replica,"
            f" {cluster.cold_start_s:g}s cold start."
        )
        w = opens_s
        write(
            f"# load: {LOW:g} req/s, a ramp to {PEAK:g} req/s from {w:.0f} s, a {BURST:g} req/s"
            f" burst at {w + 10:.0f}-{w + 25:.0f} s, then decay; pre-warm window"
            f" {meta['prewarmStart']} -> {meta['prewarmEnd']} (UTC, {w:.0f}-{w + 60:.0f} s) for"
            f" {meta['prewarmReplicas']} replicas; {duration_s:.0f} s in all."
        )
        write("# ScaledObject (trigger metadata):")
        for line in yaml.safe_dump(dict(meta), sort_keys=False).splitlines():
            write(f"#   {line}")
        source = live_source(
            prometheus.url, cluster, rate_window=DEMO_RATE_WINDOW, history_seconds=60, step_s=interval_s
        )
        printer = decision_printer(output, f"{spec.namespace}/{spec.name}", write)

        def apply(target: Target, decision: Decision) -> None:
            cluster.sync_hpa(served_metric(decision.replicas))

        showed = Showed()
        with LoadDriver(fleet, cluster, clock, opens_s):
            await dry_run_live(
                spec,
                source,
                [printer, apply, showed],
                interval_s=interval_s,
                duration_s=duration_s or None,
                params=decider_params(DEMO_RATE_WINDOW),
            )
        for line in showed.lines():
            write(line)
        return 0
    finally:
        prometheus.close()
        fleet.stop()


def main(duration_s: float | None = None, interval_s: float = 2.0, output: str = "text") -> int:
    """Run ``scaler demo`` (``duration_s`` as ``run_demo`` reads it), SIGTERM unwinding like Ctrl-C."""
    # SIGTERM (as from `timeout`) unwinds like Ctrl-C, so Prometheus and the fleet are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    return asyncio.run(run_demo(duration_s, interval_s, output))
