"""Shared test helpers: an in-process gRPC server on a real loopback socket, `scaler serve` in a
subprocess, clocks, polling, and the objects several tests build (a plain KEDA ScaledObject, a
weekday cron trigger)."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, TypeVar

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scaler.config import parse_metadata
from scaler.decider.engine import Engine
from scaler.decider.params import DEFAULT, DeciderParams
from scaler.model import Decision, Observation
from scaler.outputs.grpc_server import ExternalScalerService, GrpcServer, ServerOptions, TlsFiles
from scaler.proto import externalscaler_pb2 as pb
from scaler.proto import externalscaler_pb2_grpc as pb_grpc
from scaler.sim.fleet import SimulatedFleet
from scaler.sim.prometheus import LocalPrometheus
from scaler.targets.registry import ObservationSource, Target, TargetKey, TargetRegistry
from scaler.targets.runtime import OfflineSource, Runtime
from tests.conftest import require_prometheus

T = TypeVar("T")


def script(name: str) -> Any:
    """scripts/<name>.py of this repository, loaded as a module."""
    path = Path(__file__).resolve().parent.parent / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def target_of(
    key: TargetKey,
    metadata: Mapping[str, str],
    fingerprint: str = "",
    latest: Decision | None = None,
    params: DeciderParams = DEFAULT,
) -> Target:
    """A target as the registry registers one for ``metadata`` (at time 0), its engine fresh."""
    policy = parse_metadata(metadata)
    return Target(
        key, fingerprint, policy, Engine(policy.spec, params), 0.0, 0.0, latest, metadata=dict(metadata)
    )


def eventually(
    probe: Callable[[], T], check: Callable[[T], bool] = bool, timeout: float = 5.0, every: float = 0.01
) -> T:
    """Poll ``probe`` until ``check`` holds for its value; fail with the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if check(value):
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout}s; last value: {value!r}")
        time.sleep(every)


class StepClock:
    """A clock the test moves by hand."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        """The clock's current time."""
        return self.now

    def advance(self, seconds: float) -> datetime:
        """Move the clock forward by ``seconds`` and return the new time."""
        self.now += timedelta(seconds=seconds)
        return self.now


class SecondsClock:
    """A clock in seconds, as ``time.monotonic`` counts them, that the test sets by hand (``t``)."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        """The clock's current time, in seconds."""
        return self.t


class ScriptedSource(OfflineSource):
    """A live source whose observations the test sets per target (or for all targets); like the
    offline source it has no history to warm from."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.per_target: dict[TargetKey, dict[str, Any]] = {}
        self.calls = 0
        self.fail: Exception | None = None

    async def observe(self, targets: Sequence[Target], now: datetime) -> Mapping[TargetKey, Observation]:
        """The scripted observations for each target, or the scripted failure raised."""
        self.calls += 1
        if self.fail is not None:
            raise self.fail
        return {
            t.key: Observation(now=now, **{**self.values, **self.per_target.get(t.key, {})}) for t in targets
        }

    def expects_data(self, target: Target) -> bool:
        """Every target is expected to have data."""
        return True


class ServerThread:
    """Runs the scaler's gRPC server, its event loop in a background thread, on a free loopback port."""

    def __init__(
        self,
        source: ObservationSource | None = None,
        clock: Callable[[], datetime] | None = None,
        refresh_interval_s: float = 3600.0,
        tls: TlsFiles | None = None,
        options: ServerOptions | None = None,
        grid: bool = False,
        settle_s: float | None = None,
    ) -> None:
        self.grid = grid
        self.settle_s = settle_s
        self.source = source or OfflineSource()
        self.clock = clock or (lambda: datetime.now(UTC))  # noqa: TID251 - the server under test runs on the wall clock unless given one
        self.refresh_interval_s = refresh_interval_s
        self.tls = tls
        self.options = options or ServerOptions()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.port = 0

    def __enter__(self) -> ServerThread:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)
        return self

    async def _start(self) -> None:
        self.runtime = Runtime(
            TargetRegistry(),
            self.source,
            self.clock,
            refresh_interval_s=self.refresh_interval_s,
            grid=self.grid,
            settle_s=min(1.0, self.refresh_interval_s / 4) if self.settle_s is None else self.settle_s,
        )
        self.service = ExternalScalerService(self.runtime, self.options)
        self.server = GrpcServer(self.service)
        self.port = self.server.bind("127.0.0.1:0", self.tls)
        await self.server.start()
        self.stop_event = asyncio.Event()
        self.refresher = asyncio.get_running_loop().create_task(self.runtime.run(self.stop_event))

    def call(self, coro_factory: Callable[[], Any]) -> Any:
        """Run the coroutine ``coro_factory`` makes on the server's loop and return its result."""

        async def run() -> Any:
            return await coro_factory()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def refresh(self) -> None:
        """Run one refresh of every registered target on the server's loop."""
        self.call(self.runtime.refresh_once)

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            self.stop_event.set()
            await self.server.stop(1.0)
            await self.refresher
            await self.runtime.close()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def channel(self) -> grpc.Channel:
        """An insecure channel to the server's loopback port."""
        return grpc.insecure_channel(f"127.0.0.1:{self.port}")

    def stub(self) -> pb_grpc.ExternalScalerStub:
        """An ExternalScaler stub on a new insecure channel to the server."""
        return pb_grpc.ExternalScalerStub(self.channel())  # type: ignore[no-untyped-call]


def ref(name: str = "llama", namespace: str = "inference", **metadata: str) -> pb.ScaledObjectRef:
    """A ScaledObjectRef carrying a scalerAddress plus the given metadata."""
    md = {"scalerAddress": "scaler:9090", **metadata}
    return pb.ScaledObjectRef(name=name, namespace=namespace, scalerMetadata=md)


def serve(port: int, *args: str, env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
    """``python -m scaler serve --host 127.0.0.1 --port PORT ARGS``, its stdout and stderr piped (text)."""
    return subprocess.Popen(
        [sys.executable, "-m", "scaler", "serve", "--host", "127.0.0.1", "--port", str(port), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def wait_serving(proc: subprocess.Popen[str], channel: grpc.Channel) -> None:
    """Wait until ``scaler serve`` in ``proc`` accepts gRPC on ``channel``, or fail with its stderr
    if it ended first. The condition, not a deadline: how long a process takes to import and bind
    depends on the machine's load (pytest-timeout bounds a server that never comes).

    It asks the health service, waiting for the channel to be ready, rather than
    ``grpc.channel_ready_future``: a ready future that timed out stays subscribed, and its
    connectivity-polling thread then races the channel's close (``Channel closed!`` raised in that
    thread, seen as a warning under load). A call starts no thread."""
    health = health_pb2_grpc.HealthStub(channel)
    while True:
        try:
            health.Check(health_pb2.HealthCheckRequest(), timeout=1, wait_for_ready=True)
            return
        except grpc.RpcError as exc:
            if (
                exc.code() is not grpc.StatusCode.DEADLINE_EXCEEDED
                and exc.code() is not grpc.StatusCode.UNAVAILABLE
            ):
                raise
            if proc.poll() is not None:
                _, err = proc.communicate()
                pytest.fail(f"scaler serve ended with status {proc.returncode} before serving: {err[-2000:]}")


def get_metrics(stub: pb_grpc.ExternalScalerStub, request: pb.GetMetricsRequest) -> pb.GetMetricsResponse:
    """GetMetrics as KEDA calls it. A target's first call waits ``first_decision_timeout`` for its
    first decision and is answered UNAVAILABLE ("no decision yet") if the first refresh (warming
    from history, then deciding) takes longer, as it does on a loaded machine; KEDA asks again, and
    so does this, until the decision is there (pytest-timeout bounds one that never comes)."""
    while True:
        try:
            reply: pb.GetMetricsResponse = stub.GetMetrics(request, timeout=30)
            return reply
        except grpc.RpcError as exc:
            if exc.code() is not grpc.StatusCode.UNAVAILABLE or "no decision yet" not in (
                exc.details() or ""
            ):
                raise
        time.sleep(0.1)


class Closeable(Protocol):
    """What ``started`` closes."""

    def close(self) -> None:
        """Stop it."""


C = TypeVar("C", bound=Closeable)


class ScrapedFleets:
    """A real Prometheus scraping simulated fleets every half second: each fleet started, then
    Prometheus on their addresses; ``close`` stops them all."""

    def __init__(self, fleets: Sequence[SimulatedFleet]) -> None:
        self.fleets = list(fleets)
        for fleet in self.fleets:
            fleet.start()
        self.prometheus = LocalPrometheus(scrape_interval_s=0.5)
        self.prometheus.start([f.address for f in self.fleets])

    def close(self) -> None:
        """Stop Prometheus and the fleets."""
        self.prometheus.close()
        for fleet in self.fleets:
            fleet.stop()


def started(factory: Callable[[], C]) -> Iterator[C]:
    """A fixture's body for a stack that needs Prometheus: ``factory()`` (skipped, or failed under
    CI, without Prometheus), closed after the last test that uses it."""
    require_prometheus()
    stack = factory()
    yield stack
    stack.close()


def replica_counts(state: Any) -> tuple[int, int, int, int]:
    """A WorkloadState's current, Ready, starting and Pending replicas."""
    return (state.current_replicas, state.ready_replicas, state.starting_replicas, state.pending_replicas)


def slowdown_history(
    start: datetime, count: int = 300, prefill_tokens_per_s: float = 9000.0, slows: bool = True
) -> list[Observation]:
    """``count`` refreshes from ``start``, 15 s apart, of 4 replicas computing ``prefill_tokens_per_s``
    each on 1,000-token prompts, in which prefill keeps a replica 10-60% busy while 40 sequences
    decode at 20 tokens/s, slowed by prefill's busy share when ``slows``: enough to fit the decode
    slowdown (``scaler.decider.capacity``), 1 when it ``slows`` and 0 when not."""
    out = []
    for i in range(count):
        busy = 0.1 + 0.5 * (i % 20) / 20
        served = busy * 4 * prefill_tokens_per_s / 1000
        speed = 20.0 * (1 - busy) if slows else 20.0
        out.append(
            Observation(
                now=start + timedelta(seconds=15 * i),
                ready_replicas=4,
                current_replicas=4,
                queue_waiting=0,
                requests_per_s=served,
                prompt_tokens_per_s=served * 1000,
                generation_tokens_per_s=speed * 40,
                requests_running=40.0 + served * 0.2,
                ttft_mean_seconds=0.2,
                kv_cache_usage=0.5,
            )
        )
    return out


# KEDA's cron trigger: 8 replicas on weekday mornings, 09:00 to 12:00 in Asia/Shanghai.
WEEKDAY_CRON: dict[str, Any] = {
    "type": "cron",
    "metadata": {
        "timezone": "Asia/Shanghai",
        "start": "0 9 * * 1-5",
        "end": "0 12 * * 1-5",
        "desiredReplicas": "8",
    },
}


def plain_scaledobject(server: str, query: str, threshold: int, min_replicas: int, max_replicas: int) -> str:
    """A plain KEDA ScaledObject, ``llama`` in ``inference`` scaling ``vllm-llama``, as YAML: one
    prometheus trigger on ``query`` at ``server``."""
    return f"""\
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: llama
  namespace: inference
spec:
  scaleTargetRef:
    name: vllm-llama
  minReplicaCount: {min_replicas}
  maxReplicaCount: {max_replicas}
  triggers:
    - type: prometheus
      metadata:
        serverAddress: {server}
        query: {query}
        threshold: "{threshold}"
"""
