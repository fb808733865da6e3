"""The ``/metrics`` HTTP endpoint: the decision series and process metrics, served.

Nothing is registered or started at import: ``install`` (scaler.outputs.collector)
registers a collector on the registry it is given, and ``serve_metrics`` serves that
registry, with process, platform and GC metrics, on ``/metrics`` from a daemon thread.
The catalogue (scaler.outputs.series) and the collector are re-exported here for
existing callers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
)

from scaler.outputs.collector import DecisionCollector, install
from scaler.outputs.series import SERIES, SERIES_BY_NAME
from scaler.targets.runtime import Runtime

__all__ = [
    "SERIES",
    "SERIES_BY_NAME",
    "DecisionCollector",
    "MetricsEndpoint",
    "install",
    "serve_metrics",
]


class MetricsEndpoint:
    """An HTTP server answering ``/metrics`` from one registry, in a daemon thread."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self.server, self._thread = start_http_server(port, addr=host, registry=registry)

    @property
    def port(self) -> int:
        """The bound port (the real one when 0 was asked for)."""
        return int(self.server.server_port)

    def close(self) -> None:
        """Shut the HTTP server down and wait (up to 5 s) for its thread."""
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)


def serve_metrics(
    runtime: Runtime,
    host: str,
    port: int | None,
    rpc_counts: Callable[[], Mapping[tuple[str, str], int]] | None = None,
) -> MetricsEndpoint | None:
    """Serve the decision series and process metrics on ``host:port``; ``0`` or ``None`` disables it."""
    if not port:
        return None
    registry = CollectorRegistry()
    install(runtime, registry, rpc_counts)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return MetricsEndpoint(registry, host, port)
