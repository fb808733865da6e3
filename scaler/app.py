"""Wiring: builds sources, engine runtime and outputs from Settings, and runs them."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from scaler.config import Settings
from scaler.engine import Engine
from scaler.model import Decision, Observation
from scaler.outputs.grpc_server import ExternalScalerService, GrpcServer, ServerOptions, TlsFiles
from scaler.outputs.logs import DecisionLogger
from scaler.outputs.trace import serve_metrics
from scaler.registry import ObservationSource, TargetRegistry
from scaler.runtime import OfflineSource, Runtime


def wall_clock() -> datetime:
    return datetime.now(UTC)


def build_source(settings: Settings, log: Any) -> ObservationSource:
    return OfflineSource()


def build_runtime(settings: Settings, log: Any, clock: Callable[[], datetime] = wall_clock) -> Runtime:
    registry = TargetRegistry(idle_seconds=settings.target_idle_seconds)
    source = build_source(settings, log)
    return Runtime(
        registry,
        source,
        clock,
        sinks=[DecisionLogger(log)],
        refresh_interval_s=settings.refresh_interval_seconds,
        log=log,
    )


def tls_files(settings: Settings) -> TlsFiles | None:
    if not settings.tls_cert_file:
        return None
    if not settings.tls_key_file:
        raise ValueError("--tls-cert-file needs --tls-key-file")
    return TlsFiles(settings.tls_cert_file, settings.tls_key_file, settings.tls_client_ca_file)


async def serve(settings: Settings, log: Any, ready: Callable[[int], None] | None = None) -> None:
    """Serve KEDA until SIGTERM or SIGINT, then stop gracefully within ``grace_seconds``."""
    runtime = build_runtime(settings, log)
    metrics = serve_metrics(runtime, settings.host, settings.metrics_port)
    service = ExternalScalerService(
        runtime, ServerOptions(first_decision_timeout_s=settings.first_decision_timeout_seconds), log
    )
    server = GrpcServer(service)
    port = server.bind(f"{settings.host}:{settings.port}", tls_files(settings))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    await server.start()
    log.info(
        "serving",
        port=port,
        tls=settings.tls_cert_file is not None,
        mutual_tls=settings.tls_client_ca_file is not None,
        live_sources=runtime.source.live,
        refresh_interval_seconds=settings.refresh_interval_seconds,
        metrics_port=metrics.port if metrics else None,
    )
    if ready is not None:
        ready(port)
    refresher = asyncio.create_task(runtime.run(stop))
    await stop.wait()
    log.info("stopping", grace_seconds=settings.grace_seconds)
    await server.stop(settings.grace_seconds)
    await refresher
    await runtime.close()
    if metrics is not None:
        metrics.close()
    log.info("stopped")


def dry_run_offline(metadata: dict[str, str], observations: Iterable[Observation]) -> Iterator[Decision]:
    """Decide for each observation in order, as the server would on each refresh."""
    engine = Engine.from_metadata(metadata)
    for obs in observations:
        yield engine.decide(obs)
