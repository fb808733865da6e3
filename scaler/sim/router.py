"""A simulated router in front of the servers (llm-d's EPP, Dynamo's frontend), serving ``/metrics``.

It exports what the real router exports about the requests it holds: its queue, the pool's
saturation and stale endpoints (llm-d), and the TTFT it measures from its own receipt of a
request, so queue time included. llm-d-router v0.9 and v0.10 write every series under the
current ``llm_d_epp_*`` name and the older ``inference_extension_*`` one: ``generations``
chooses which it writes (both by default, as released versions do). The names are written
out here independently of the scaler's presets (``scaler/sources/presets.py``), so a wrong
preset fails the tests; each method names the upstream file its names come from.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from scaler.flowcontrol import pool_saturation
from scaler.sim.fleet import TTFT_BUCKETS, MetricsServer, PodLoad, _Exposition


def saturation_of(pods: Iterable[PodLoad]) -> float:
    """The saturation llm-d's EPP reads from these pods' loads (``scaler.flowcontrol``, the rule the
    replay's router gates on too): what a test sets beside the queue it holds."""
    return pool_saturation((pod.waiting, pod.kv_cache_usage) for pod in pods)


@dataclass
class RouterLoad:
    """What the router holds and measures now."""

    queued: float = 0.0  # requests waiting in the router, not yet sent to a server
    saturation: float = 0.0  # llm-d's pool saturation (1.0: it stops dispatching; saturation_of)
    stale_endpoints: int = 0  # llm-d: endpoints whose metrics are stale
    requests_per_s: float = 0.0  # first tokens per second the router sees
    ttft_seconds: float = 0.05  # the TTFT users see: router queue included


@dataclass
class _Counters:
    requests_total: float = 0.0
    ttft_sum: float = 0.0
    ttft_buckets: list[float] = field(default_factory=lambda: [0.0] * len(TTFT_BUCKETS))


class SimulatedRouter:
    """llm-d's endpoint picker or Dynamo's frontend as a router, for one pool and model."""

    def __init__(
        self,
        kind: str = "llm-d",
        pool: str = "llama-pool",
        model: str = "meta-llama/Llama-3.1-8B-Instruct",
        generations: tuple[str, ...] = ("current", "legacy"),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if kind not in ("llm-d", "dynamo"):
            raise ValueError(f"the simulated router is llm-d or dynamo, not {kind!r}")
        self.kind = kind
        self.pool = pool
        self.model = model
        self.generations = generations
        self.clock = clock
        self.load = RouterLoad()
        self._counters = _Counters()
        self._last = clock()
        self._lock = threading.Lock()
        self._http = MetricsServer(self.render)

    def set_load(self, load: RouterLoad) -> None:
        """What the router reports from now on."""
        with self._lock:
            self._advance()
            self.load = load

    def _advance(self) -> None:
        now = self.clock()
        n = self.load.requests_per_s * max(0.0, now - self._last)
        self._last = now
        c = self._counters
        c.requests_total += n
        c.ttft_sum += n * self.load.ttft_seconds
        for i, bound in enumerate(TTFT_BUCKETS):
            if self.load.ttft_seconds <= bound:
                c.ttft_buckets[i] += n

    def render(self) -> str:
        """The Prometheus text exposition, named as the router names it."""
        with self._lock:
            self._advance()
            out = _Exposition()
            if self.kind == "llm-d":
                self._llm_d(out)
            else:
                self._dynamo(out)
            return out.text()

    def _ttft(self, out: _Exposition, name: str, labels: dict[str, str]) -> None:
        c = self._counters
        out.histogram(
            name, labels, list(zip(TTFT_BUCKETS, c.ttft_buckets, strict=True)), c.ttft_sum, c.requests_total
        )

    # llm-d-router pkg/epp/metrics/llm_d_router_metrics.go (current) and metrics.go (legacy names)
    def _llm_d(self, out: _Exposition) -> None:
        load = self.load
        request = {"model_name": self.model, "target_model_name": self.model}
        # The queue is split over two priority bands, as flow control keeps it.
        bands = ((0.75, "0"), (0.25, "1"))
        for generation, prefix in (("current", "llm_d_epp_"), ("legacy", "inference_extension_")):
            if generation not in self.generations:
                continue
            for share, priority in bands:
                labels = {
                    "fairness_id": "default",
                    "priority": priority,
                    "inference_pool": self.pool,
                    **request,
                }
                out.sample(f"{prefix}flow_control_queue_size", labels, load.queued * share)
            out.sample(
                f"{prefix}flow_control_pool_saturation", {"inference_pool": self.pool}, load.saturation
            )
        if "current" in self.generations:
            out.sample(
                "llm_d_epp_flow_control_stale_endpoints",
                {"detector": "utilization-detector"},
                load.stale_endpoints,
            )
            labels = {**request, "fairness_id": "default", "priority": "0", "streaming": "true"}
            self._ttft(out, "llm_d_epp_request_ttft_seconds", labels)

    # ai-dynamo/dynamo lib/runtime/src/metrics/prometheus_names.rs (model lower-cased by the frontend)
    def _dynamo(self, out: _Exposition) -> None:
        model = self.model.lower()
        labels = {"model": model, "worker_type": "decode", "policy_class": "default"}
        out.sample("dynamo_frontend_router_queue_pending_requests", labels, self.load.queued)
        self._ttft(out, "dynamo_frontend_time_to_first_token_seconds", {"model": model})

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve ``/metrics`` from a daemon thread; returns the ``host:port`` it listens on."""
        return self._http.start(host, port)

    @property
    def address(self) -> str:
        """The ``host:port`` the server listens on."""
        return self._http.address

    def stop(self) -> None:
        """Shut the metrics server down."""
        self._http.stop()
