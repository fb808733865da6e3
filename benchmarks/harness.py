"""Shared pieces of the service benchmarks: a real stack, a KEDA-like client, process figures.

The scaler runs as its own process (``python -m scaler serve``), reading a real
Prometheus that scrapes simulated vLLM fleets; the client below calls it over a real
loopback socket the way KEDA does: per ScaledObject and polling interval, the operator's
GetMetricSpec + GetMetrics + IsActive, and half an interval later the HPA path's
GetMetrics + IsActive (KEDA's GetMetricsAndActivity calls both).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scaler.hpa import METRIC_NAME
from scaler.proto import externalscaler_pb2 as pb
from scaler.proto import externalscaler_pb2_grpc as pb_grpc
from scaler.sim.fleet import PodLoad, SimulatedFleet
from scaler.sim.prometheus import LocalPrometheus, free_port

if TYPE_CHECKING:
    from scaler.replay.trace import Trace


def add_kv_full(parser: argparse.ArgumentParser) -> None:
    """``--kv-full F``: the replayed fleet's KV cache usage with every batch slot busy (the cluster
    key ``kv_cache_usage_full_batch``)."""
    parser.add_argument(
        "--kv-full",
        type=float,
        default=1.0,
        help="the fleet's KV cache usage at a full batch (default 1: the KV cache bounds the batch;"
        " below 1, max_num_seqs binds first and the cache never fills)",
    )


def trace_parser(doc: str | None, traces: Sequence[str]) -> argparse.ArgumentParser:
    """The options every trace-replaying benchmark takes: ``--seeds``, ``--quick`` (seed 0 only)
    and ``--traces`` (of ``traces``); each benchmark adds its own."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds (default 0 1 2)")
    parser.add_argument("--quick", action="store_true", help="seed 0 only")
    parser.add_argument("--traces", nargs="+", default=list(traces), choices=traces)
    return parser


def run_cells(
    title: str,
    jobs: Sequence[Any],
    seeds: Sequence[int],
    traces: Sequence[str],
    cell: Callable[[Any], dict[str, Any]],
    show: Callable[[dict[str, Any]], None],
    workers: int,
) -> list[dict[str, Any]]:
    """A trace-replaying benchmark's cells: a heading, then ``cell`` run on each job in ``workers``
    processes (a fresh one per cell), and each cell's table (``show``) in the order of ``jobs``."""
    print(f"{title}: {len(jobs)} cells (traces {', '.join(traces)}; seeds {' '.join(map(str, seeds))})")
    with multiprocessing.Pool(workers, maxtasksperchild=1) as pool:
        cells = pool.map(cell, jobs, chunksize=1)
    for one in cells:
        show(one)
    return cells


def cell_record(
    trace: Trace, rows: Sequence[dict[str, Any]], began: float, /, **fields: Any
) -> dict[str, Any]:
    """A replayed cell's JSON record: ``fields`` (which cell, its settings), the trace's size and
    note, the figures' ``rows`` and the wall time since ``began`` (``time.perf_counter()``)."""
    return {
        **fields,
        "requests": len(trace),
        "hours": trace.duration_s / 3600,
        "note": trace.note,
        "figures": list(rows),
        "wall_s": time.perf_counter() - began,
    }


# The lines of `scaler replay`'s table: its header, its rule and one row per policy.
REPLAY_TABLE_ROWS = ("policy", "-----", "this", "keda", "clair", "static")


@dataclass(frozen=True)
class Timed:
    """A command run to its end: what it printed, its wall time, and its processes' CPU time and peak
    resident memory (``RUSAGE_CHILDREN``: every child the benchmark has waited for)."""

    done: subprocess.CompletedProcess[str]
    wall_s: float
    cpu_s: float
    peak_rss_mb: float

    def table(self) -> list[str]:
        """The lines of `scaler replay`'s table in what it printed (``REPLAY_TABLE_ROWS``)."""
        return [line for line in self.done.stdout.splitlines() if line.startswith(REPLAY_TABLE_ROWS)]


def run_timed(command: Sequence[str], env: dict[str, str] | None = None) -> Timed:
    """Run ``command`` (its output captured, its exit status kept) and time it (``Timed``)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(list(command), capture_output=True, text=True, check=False, env=env)
    wall_s = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timed(done, wall_s, cpu_s, after.ru_maxrss / 1024)


def target_lines(title: str, checks: Sequence[tuple[bool, str]]) -> list[str]:
    """A benchmark's targets, counted in a heading and each beside its figure, ``MISSED`` where it
    is not met."""
    return [
        f"## {title} ({sum(ok for ok, _ in checks)} of {len(checks)} met)",
        *(f"  [{'met' if ok else 'MISSED'}] {text}" for ok, text in checks),
    ]


ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")


class Stack:
    """``models`` simulated vLLM fleets (two pods each) and one real Prometheus scraping them.

    Runs in its own process (``python -m benchmarks.harness``), so the exporters' threads
    do not share an interpreter lock with the load client that measures latencies.
    """

    def __init__(
        self, models: int = 10, scrape_interval_s: float = 5.0, extra_models: Sequence[str] = ()
    ) -> None:
        pin(server=False)  # this process is the load client
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.harness", str(models), str(scrape_interval_s), *extra_models],
            stdout=subprocess.PIPE,
            cwd=ROOT,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line.startswith("http://"):
            raise RuntimeError(f"stack did not start: {line!r}")
        self.prometheus = RemotePrometheus(line, self.process)

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(30)


class RemotePrometheus:
    """The stack process's Prometheus: query it; stop and start it by signals to the stack."""

    def __init__(self, url: str, process: subprocess.Popen[str]) -> None:
        self.url = url
        self._process = process

    def query(self, promql: str) -> list[dict[str, object]]:
        import json as _json
        import urllib.parse
        import urllib.request

        with urllib.request.urlopen(
            f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql}), timeout=10
        ) as reply:
            result: list[dict[str, object]] = _json.loads(reply.read())["data"]["result"]
            return result

    def _ask(self, command: str) -> None:
        os.kill(self._process.pid, signal.SIGUSR1 if command == "stop" else signal.SIGUSR2)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                self.query("1")
                up = True
            except OSError:
                up = False
            if up == (command == "start"):
                return
            time.sleep(0.2)
        raise TimeoutError(f"prometheus did not {command}")

    def stop(self) -> None:
        self._ask("stop")

    def start(self) -> None:
        self._ask("start")


class _LocalStack:
    def __init__(self, models: int, scrape_interval_s: float, extra_models: Sequence[str] = ()) -> None:
        self.fleets = []
        names = [f"model-{m}" for m in range(models)] + list(extra_models)
        for m, name in enumerate(names):
            fleet = SimulatedFleet(namespace="inference", model=name)
            fleet.set_pods([f"{name}-0", f"{name}-1"])
            fleet.set_fleet_load(
                PodLoad(
                    waiting=5 * m,
                    running=8,
                    prompt_tokens_per_s=2000 * (m + 1),
                    generation_tokens_per_s=400 * (m + 1),
                    requests_per_s=2,
                    ttft_seconds=0.3,
                )
            )
            fleet.start()
            self.fleets.append(fleet)
        self.prometheus = LocalPrometheus(scrape_interval_s=scrape_interval_s)
        self.prometheus.start([f.address for f in self.fleets])
        self.prometheus.wait_for("count(rate(vllm:prompt_tokens_total[1m]) > 0) >= 2", timeout_s=60)


def _serve_stack(models: int, scrape_interval_s: float, extra_models: Sequence[str] = ()) -> None:
    """The stack process: print the Prometheus URL, then stop/start Prometheus on SIGUSR1/SIGUSR2."""
    stack = _LocalStack(models, scrape_interval_s, extra_models)
    signal.signal(signal.SIGUSR1, lambda *_: stack.prometheus.stop())
    signal.signal(signal.SIGUSR2, lambda *_: stack.prometheus.start())
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(stack.prometheus.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    finally:
        stack.prometheus.close()
        for fleet in stack.fleets:
            fleet.stop()


if __name__ == "__main__":
    _serve_stack(int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:])


def scaledobjects(
    count: int, models: int, address: str, stale_every: int = 0, stale_after: int = 30
) -> list[pb.ScaledObjectRef]:
    refs = []
    for i in range(count):
        md = {
            "scalerAddress": address,
            "labelSelector": f'model_name="model-{i % models}"',
            "minReplicas": "1",
            "maxReplicas": "50",
            "promptTokensPerSecondPerReplica": "9000",
            "generationTokensPerSecondPerReplica": "1800",
            "coldStartSeconds": "180",
        }
        if stale_every and i % stale_every == 0:
            md["maxStalenessSeconds"] = str(stale_after)
        refs.append(pb.ScaledObjectRef(name=f"so-{i}", namespace=f"team-{i // 100}", scalerMetadata=md))
    return refs


LOG_DECISIONS = os.environ.get("BENCH_LOG_DECISIONS", "all")


def serve_command(port: int, metrics_port: int, *options: str) -> list[str]:
    """The command line of the scaler under test: ``python -m scaler serve`` on loopback at ``port``,
    its /metrics at ``metrics_port`` (0: none), with ``options``."""
    return [
        sys.executable,
        "-m",
        "scaler",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--metrics-port",
        str(metrics_port),
        *options,
    ]


def _start(command: list[str], port: int, log_path: Path) -> subprocess.Popen[bytes]:
    """``command`` started, its output in ``log_path``, pinned to the server's core, once its gRPC
    health check on ``port`` answers SERVING."""
    log = open(log_path, "wb")  # noqa: SIM115 - the process owns it until it exits
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    pin(server=True, pid=proc.pid)
    wait_serving(port)
    return proc


def start_scaler(
    prometheus_url: str, refresh_s: float, log_path: Path
) -> tuple[subprocess.Popen[bytes], int, int]:
    """The scaler reading ``prometheus_url`` every ``refresh_s``, logging its decisions as JSON."""
    port, metrics_port = free_port(), free_port()
    command = serve_command(
        port, metrics_port, "--prometheus", prometheus_url, "--refresh-interval", f"{refresh_s:g}"
    )
    command += ["--log-format", "json", "--log-decisions", LOG_DECISIONS]
    return _start(command, port, log_path), port, metrics_port


def start_scaler_offline(log_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    """The scaler with no Prometheus or Kubernetes: decisions from metadata alone (floor, pre-warm)."""
    port = free_port()
    return _start(serve_command(port, 0), port, log_path), port


def start_empty_server() -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / "empty_server.py"), str(port)],
        cwd=ROOT,
    )
    pin(server=True, pid=proc.pid)
    wait_serving(port)
    return proc, port


def wait_serving(port: int, timeout_s: float = 60.0) -> None:
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    health = health_pb2_grpc.HealthStub(channel)
    deadline = time.monotonic() + timeout_s
    # Waiting for the channel in the call starts no connectivity-polling thread to race its close
    # (tests/helpers.py:wait_serving).
    while (
        health.Check(health_pb2.HealthCheckRequest(), timeout=timeout_s, wait_for_ready=True).status
        != health_pb2.HealthCheckResponse.SERVING
    ):
        if time.monotonic() > deadline:
            raise TimeoutError("server never became SERVING")
        time.sleep(0.1)
    channel.close()


ALL_CPUS = sorted(os.sched_getaffinity(0))


def pin(server: bool, pid: int = 0) -> None:
    """Give the server under test a core of its own and everything else the other cores.

    On a small machine the load client, Prometheus and the exporters would otherwise take
    CPU from the server in the middle of a measurement. Called on each server process
    right after it is spawned (before it starts threads, which inherit the mask), and once
    for the client process itself.
    """
    if len(ALL_CPUS) >= 2:
        os.sched_setaffinity(pid, {ALL_CPUS[0]} if server else set(ALL_CPUS[1:]))


def layout() -> str:
    if len(ALL_CPUS) < 2:
        return "one CPU, shared by server, client and Prometheus"
    rest = ",".join(map(str, ALL_CPUS[1:]))
    return f"server pinned to CPU {ALL_CPUS[0]}; client, Prometheus and exporters on CPU {rest}"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@dataclass
class Recorder:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    codes: Counter[tuple[str, str]] = field(default_factory=Counter)
    failures: list[tuple[float, str, str, str]] = field(default_factory=list)

    def summary(self) -> dict[str, dict[str, float]]:
        out = {}
        for method, values in sorted(self.latencies.items()):
            ordered = sorted(values)
            out[method] = {
                "calls": len(ordered),
                "p50_ms": 1000 * statistics.median(ordered),
                "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
                "max_ms": 1000 * ordered[-1],
            }
        return out


class KedaClient:
    """Calls the scaler as KEDA does, on one pooled channel, recording latency per RPC."""

    def __init__(self, address: str, refs: Sequence[pb.ScaledObjectRef], recorder: Recorder) -> None:
        self.address = address
        self.refs = list(refs)
        self.recorder = recorder

    async def _call(self, stub: pb_grpc.ExternalScalerStub, method: str, ref: pb.ScaledObjectRef) -> None:
        # perf_counter: some event loops' clocks tick in whole milliseconds.
        started = time.perf_counter()
        code = "OK"
        try:
            if method == "GetMetrics":
                await stub.GetMetrics(
                    pb.GetMetricsRequest(scaledObjectRef=ref, metricName=METRIC_NAME), timeout=5
                )
            else:
                await getattr(stub, method)(ref, timeout=5)
        except grpc.aio.AioRpcError as exc:
            code = exc.code().name
            self.recorder.failures.append((time.time(), method, code, exc.details() or ""))
        self.recorder.latencies[method].append(time.perf_counter() - started)
        self.recorder.codes[(method, code)] += 1

    async def register(self, concurrency: int = 50) -> float:
        async with grpc.aio.insecure_channel(self.address) as channel:
            stub = pb_grpc.ExternalScalerStub(channel)  # type: ignore[no-untyped-call]
            started = time.monotonic()
            semaphore = asyncio.Semaphore(concurrency)

            async def one(ref: pb.ScaledObjectRef) -> None:
                async with semaphore:
                    await self._call(stub, "GetMetrics", ref)

            await asyncio.gather(*(one(r) for r in self.refs))
            return time.monotonic() - started

    async def bursts(self, count: int = 20, size: int = 200, gap_s: float = 1.0, seed: int = 2) -> None:
        """Only bursts: ``count`` times, ``size`` concurrent GetMetrics, ``gap_s`` apart."""
        rng = random.Random(seed)
        gc.collect()
        gc.disable()
        try:
            async with grpc.aio.insecure_channel(self.address) as channel:
                stub = pb_grpc.ExternalScalerStub(channel)  # type: ignore[no-untyped-call]
                await stub.IsActive(self.refs[0], timeout=10)
                for _ in range(count):
                    await asyncio.sleep(gap_s)
                    chosen = rng.sample(self.refs, min(size, len(self.refs)))
                    await asyncio.gather(*(self._call(stub, "GetMetrics", r) for r in chosen))
        finally:
            gc.enable()

    async def run(
        self,
        duration_s: float,
        period_s: float = 15.0,
        burst_every_s: float = 0.0,
        burst_size: int = 200,
        seed: int = 1,
    ) -> None:
        # The client is the measuring instrument: keep its own garbage collector from
        # adding pauses to the latencies it records.
        gc.collect()
        gc.freeze()
        gc.disable()
        try:
            await self._run(duration_s, period_s, burst_every_s, burst_size, seed)
        finally:
            gc.enable()
            gc.unfreeze()

    async def _run(
        self, duration_s: float, period_s: float, burst_every_s: float, burst_size: int, seed: int
    ) -> None:
        rng = random.Random(seed)
        async with grpc.aio.insecure_channel(self.address) as channel:
            stub = pb_grpc.ExternalScalerStub(channel)  # type: ignore[no-untyped-call]
            # KEDA keeps its connection pooled: connect before the clock starts.
            await stub.IsActive(self.refs[0], timeout=10)
            loop = asyncio.get_running_loop()
            end = loop.time() + duration_s

            async def poll(i: int, ref: pb.ScaledObjectRef) -> None:
                await asyncio.sleep(period_s * i / len(self.refs))
                while loop.time() < end:
                    cycle = loop.time()
                    for method in ("GetMetricSpec", "GetMetrics", "IsActive"):  # the operator's loop
                        await self._call(stub, method, ref)
                    await asyncio.sleep(max(0.0, cycle + period_s / 2 - loop.time()))
                    for method in ("GetMetrics", "IsActive"):  # the HPA, through KEDA's metrics adapter
                        await self._call(stub, method, ref)
                    await asyncio.sleep(max(0.0, cycle + period_s - loop.time()))

            async def bursts() -> None:
                while burst_every_s and loop.time() + burst_every_s < end:
                    await asyncio.sleep(burst_every_s)
                    chosen = rng.sample(self.refs, min(burst_size, len(self.refs)))
                    await asyncio.gather(*(self._call(stub, "GetMetrics", r) for r in chosen))

            await asyncio.gather(*(poll(i, r) for i, r in enumerate(self.refs)), bursts())
