"""Wiring: builds sources, engine runtime and outputs from Settings, and runs them."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from scaler.config import engine_for
from scaler.decider.params import DEFAULT, DeciderParams
from scaler.inventory import ScaledObject
from scaler.model import Decision, Observation
from scaler.outputs.dryrun import CompactLines, Summary, format_json, format_line
from scaler.outputs.endpoint import serve_metrics
from scaler.outputs.grpc_server import ExternalScalerService, GrpcServer, ServerOptions, TlsFiles
from scaler.outputs.logs import DecisionLogger
from scaler.service.settings import Settings
from scaler.sources.history import History
from scaler.sources.kubeprobe import check_reachable
from scaler.sources.kubernetes import KubernetesInventory, api_client
from scaler.sources.live import LiveSource, WorkloadProvider
from scaler.sources.prometheus import PrometheusReader, redact_url, window_seconds
from scaler.targets.registry import DecisionSink, ObservationSource, Target, TargetKey, TargetRegistry
from scaler.targets.runtime import Runtime


def wall_clock() -> datetime:
    """The current time in UTC: the one wall clock the live path reads."""
    return datetime.now(UTC)  # noqa: TID251 - the one wall clock the live path reads


def decider_params(rate_window: str) -> DeciderParams:
    """The decider's constants for a source that reads rates over ``rate_window`` (PromQL, e.g.
    ``1m``): the window the engine reads its rates, growth and sizes over is the one Prometheus
    computed them over, so the two cannot disagree (``DeciderParams.rate_window_s``)."""
    return replace(DEFAULT, rate_window_s=window_seconds(rate_window))


def live_source(
    prometheus_address: str | None,
    workloads: WorkloadProvider | None = None,
    log: Any = None,
    *,
    rate_window: str = "1m",
    timeout_s: float = 5.0,
    history_seconds: float = 3600.0,
    step_s: float = 15.0,
) -> LiveSource:
    """The live path, wired once: a Prometheus reader and the workloads, into Observations.

    ``scaler serve`` (``build_source``), ``scaler dry-run`` and the demo all build theirs here;
    ``step_s`` is the refresh interval, which the history warm-up is read on.
    """
    reader = PrometheusReader(prometheus_address, rate_window=rate_window, timeout_s=timeout_s)
    return LiveSource(reader, workloads, log, History(reader, history_seconds, step_s))


def build_source(
    settings: Settings, log: Any, workloads: WorkloadProvider | None = None
) -> ObservationSource:
    """Live when a Prometheus or Kubernetes is configured; offline (floor and pre-warm only) otherwise.

    Targets can still name their own Prometheus with ``prometheusAddress``.
    """
    return live_source(
        settings.prometheus_address,
        workloads,
        log,
        rate_window=settings.rate_window,
        timeout_s=settings.prometheus_timeout_seconds,
        history_seconds=settings.history_seconds,
        step_s=settings.refresh_interval_seconds,
    )


def start_inventory(kubeconfig: str | None, log: Any = None, probe: bool = False) -> KubernetesInventory:
    """The Kubernetes inventory (in-cluster inside a pod, else the kubeconfig), started; with
    ``probe``, after one look that the API server answers (``scaler.sources.kubeprobe``: a command
    run by hand fails at once, in one line, where a server waits for it)."""
    api = api_client(kubeconfig)
    if probe:
        check_reachable(
            api, f"kubeconfig {kubeconfig}" if kubeconfig else "the default kubeconfig or in-cluster account"
        )
    inventory = KubernetesInventory(api, log=log)
    inventory.start()
    return inventory


def build_inventory(settings: Settings, log: Any) -> KubernetesInventory | None:
    """The Kubernetes inventory when asked for (in-cluster config, or --kubeconfig), started."""
    if not (settings.kubernetes or settings.kubeconfig):
        return None
    return start_inventory(settings.kubeconfig, log)


def build_runtime(
    settings: Settings,
    log: Any,
    clock: Callable[[], datetime] = wall_clock,
    workloads: WorkloadProvider | None = None,
) -> Runtime:
    """The serving Runtime: a registry, the source the settings choose, a decision logger, on the grid."""
    registry = TargetRegistry(
        idle_seconds=settings.target_idle_seconds, params=decider_params(settings.rate_window)
    )
    source = build_source(settings, log, workloads)
    return Runtime(
        registry,
        source,
        clock,
        sinks=[DecisionLogger(log, only_changes=settings.log_decisions == "changes")],
        refresh_interval_s=settings.refresh_interval_seconds,
        log=log,
        grid=True,
        settle_s=min(2.0, settings.refresh_interval_seconds / 4),
    )


def quiet_garbage_collector() -> None:
    """Keep the cyclic GC from pausing RPCs for a tenth of a second.

    Everything alive once the server has started (modules, the gRPC and Kubernetes
    clients' classes) is moved out of the collector's reach with ``gc.freeze``, and the
    youngest generation is collected less often: a refresh allocates tens of thousands of
    short-lived objects, and full collections over a large heap were the slowest RPCs.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 20, 20)
    # RPCs run on gRPC's threads, the refresh on the event loop and its worker threads:
    # hand the interpreter lock over every millisecond instead of every five, so an RPC
    # waits for at most a millisecond of a refresh's work.
    sys.setswitchinterval(0.001)


def tls_files(settings: Settings) -> TlsFiles | None:
    """The TLS files the settings name, or None for plaintext; ValueError for a cert without a key."""
    if not settings.tls_cert_file:
        return None
    if not settings.tls_key_file:
        raise ValueError("--tls-cert-file needs --tls-key-file")
    return TlsFiles(settings.tls_cert_file, settings.tls_key_file, settings.tls_client_ca_file)


async def serve(settings: Settings, log: Any, ready: Callable[[int], None] | None = None) -> None:
    """Serve KEDA until SIGTERM or SIGINT, then stop gracefully within ``grace_seconds``."""
    inventory = build_inventory(settings, log)
    runtime = build_runtime(settings, log, workloads=inventory)
    service = ExternalScalerService(
        runtime, ServerOptions(first_decision_timeout_s=settings.first_decision_timeout_seconds), log
    )
    metrics = serve_metrics(runtime, settings.host, settings.metrics_port, lambda: service.rpc_counts)
    server = GrpcServer(service)
    port = server.bind(f"{settings.host}:{settings.port}", tls_files(settings))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    await server.start()
    quiet_garbage_collector()
    log.info(
        "serving",
        port=port,
        tls=settings.tls_cert_file is not None,
        mutual_tls=settings.tls_client_ca_file is not None,
        prometheus=redact_url(settings.prometheus_address) if settings.prometheus_address else None,
        kubernetes=inventory is not None,
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
    if inventory is not None:
        inventory.stop()
    log.info("stopped")


def dry_run_offline(metadata: dict[str, str], observations: Iterable[Observation]) -> Iterator[Decision]:
    """Decide for each observation in order, as the server would on each refresh."""
    engine = engine_for(metadata)
    for obs in observations:
        yield engine.decide(obs)


def decision_printer(
    output: str,
    name: str,
    write: Callable[[str], None] = print,
    timezone: str = "UTC",
    summary: Summary | None = None,
) -> DecisionSink:
    """A sink that prints each decision (a compact line, a wide one, or JSON), counting it in
    ``summary`` if given."""

    compact = CompactLines(timezone)

    def sink(target: Target, decision: Decision) -> None:
        objective = target.policy.ttft_objective_seconds
        if output == "json":
            write(format_json(decision, name, objective))
        elif output == "wide":
            write(format_line(decision, None, timezone, objective))
        else:
            write(compact(decision))
        if summary is not None:
            summary.add(decision)

    return sink


async def dry_run_live(
    spec: ScaledObject,
    source: ObservationSource,
    sinks: list[DecisionSink],
    interval_s: float = 15.0,
    once: bool = False,
    duration_s: float | None = None,
    clock: Callable[[], datetime] = wall_clock,
    params: DeciderParams = DEFAULT,
) -> int:
    """Decide for one ScaledObject on the live path, as ``scaler serve`` would, without serving KEDA.

    ``params``: the decider's constants, from the source's rate window (``decider_params``).
    Raises MetadataError for invalid trigger metadata. Returns the number of decisions made.
    """
    registry = TargetRegistry(params=params)
    runtime = Runtime(registry, source, clock, sinks=sinks, refresh_interval_s=interval_s)
    target, _ = registry.resolve(TargetKey(spec.namespace, spec.name), spec.metadata, clock().timestamp())
    await source.warm([target], clock())
    loop = asyncio.get_running_loop()
    deadline = None if duration_s is None else loop.time() + duration_s
    decisions = 0
    while True:
        started = loop.time()
        await runtime.refresh_once()
        decisions += 1
        if once or (deadline is not None and loop.time() >= deadline):
            return decisions
        await asyncio.sleep(max(0.0, interval_s - (loop.time() - started)))
