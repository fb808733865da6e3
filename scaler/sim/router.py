"""A simulated router in front of the servers (llm-d's EPP, Dynamo's frontend), serving ``/metrics``.

It exports what the router's preset reads about the requests it holds
(``scaler.sim.exposition``): its queue, the pool's saturation and stale endpoints (llm-d; none of
them with flow control off, llm-d's default), the requests in flight on each endpoint (llm-d's
in-flight-load producer, one series per endpoint of its namespace), and the TTFT it measures from
its own receipt of a request, so queue time included.
llm-d-router v0.9 and v0.10 write every series under the current ``llm_d_epp_*`` name and
the older ``inference_extension_*`` one: ``generations`` chooses which it writes (by default
what the upstream writes: both for llm-d, as its preset says). Any router in the registry is
served.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from scaler.decider.flowcontrol import pool_saturation
from scaler.inputs import Input, Reading
from scaler.presets import ROUTERS
from scaler.presets.engines import VLLM_TTFT_BUCKETS
from scaler.sim.exposition import Exporter, Exposition, Observed, Simulated, write_preset
from scaler.sim.fleet import PodLoad


def saturation_of(pods: Iterable[PodLoad]) -> float:
    """The saturation llm-d's EPP reads from these pods' loads (``scaler.decider.flowcontrol``, the rule the
    replay's router gates on too): what a test sets beside the queue it holds."""
    return pool_saturation((pod.waiting, pod.kv_cache_usage) for pod in pods)


@dataclass
class RouterLoad:
    """What the router holds and measures now."""

    # Requests waiting in the router, not yet sent to a server; None: no series (llm-d writes its queue
    # gauge from a request's first enqueue, so an EPP that never queued has none).
    queued: float | None = 0.0
    queued_prefill: float = 0.0  # where the queue is per worker type (Dynamo): those for a prefill one
    saturation: float = 0.0  # llm-d's pool saturation (1.0: it stops dispatching; saturation_of)
    stale_endpoints: int = 0  # llm-d: endpoints whose metrics are stale
    requests_per_s: float = 0.0  # first tokens per second the router sees
    ttft_seconds: float = 0.05  # the TTFT users see: router queue included
    # llm-d: its flow control on (featureGates: flowControl): the queue, saturation and stale endpoints
    # are written; off (llm-d's default), none of them is.
    flow_control: bool = True
    inflight: float = 0.0  # llm-d: requests sent to its endpoints and not finished, spread over them


# The in-flight-load producer's other labels: its configured name, and the request's flow.
INFLIGHT_LABELS = {"producer_name": "inflight-load", "fairness_id": "default", "priority": "0"}


class SimulatedRouter(Exporter):
    """A router of the registry (llm-d's endpoint picker, Dynamo's frontend), for one pool and model."""

    def __init__(
        self,
        kind: str,
        pool: str = "llama-pool",
        model: str = "meta-llama/Llama-3.1-8B-Instruct",
        generations: tuple[str, ...] | None = None,
        clock: Callable[[], float] = time.monotonic,
        namespace: str = "inference",
        endpoints: tuple[str, ...] = ("vllm-0", "vllm-1"),
        inflight: bool = True,
    ) -> None:
        preset = ROUTERS.get(kind)
        if preset is None:
            raise ValueError(f"the simulated router is {' or '.join(ROUTERS)}, not {kind!r}")
        super().__init__(preset, model, generations, clock)
        self.kind = kind
        self.pool = pool
        self.namespace = namespace  # of the pool and its endpoints
        self.endpoints = endpoints  # the pods it dispatches to (llm-d's endpoint_name)
        self.inflight = (
            inflight  # llm-d: its in-flight-load producer runs (the default scorers'), writing per endpoint
        )
        self.load = RouterLoad()
        self._ttft = Observed(VLLM_TTFT_BUCKETS)  # the TTFT the router measures

    def set_load(self, load: RouterLoad) -> None:
        """What the router reports from now on."""
        with self._lock:
            self._advance()
            self.load = load

    def _advance(self) -> None:
        now = self.clock()
        n = self.load.requests_per_s * max(0.0, now - self._last)
        self._last = now
        self._ttft.observe(self.load.ttft_seconds, n)

    def render(self) -> str:
        """The Prometheus text exposition, named as the router names it."""
        with self._lock:
            self._advance()
            load = self.load
            values: dict[str, Simulated] = {Reading.ROUTER_TTFT: self._ttft.simulated()}
            if load.flow_control:
                if load.queued is not None:
                    values[Input.ROUTER_QUEUE_WAITING] = Simulated(load.queued)
                values[Input.ROUTER_SATURATION] = Simulated(load.saturation)
                values[Reading.ROUTER_STALE_ENDPOINTS] = Simulated(load.stale_endpoints)
            out = Exposition()
            for endpoint in self.endpoints if self.inflight else ():
                share: dict[str, Simulated] = {
                    Reading.ROUTER_INFLIGHT: Simulated(load.inflight / len(self.endpoints))
                }
                labels = {**INFLIGHT_LABELS, "endpoint_name": endpoint, "namespace": self.namespace}
                write_preset(out, self.preset, share, labels, model=self.model, generations=self.generations)
            # A queue labelled by the workers it routes to (Dynamo's worker_type): queued waits for a
            # decode worker, queued_prefill for a prefill one.
            role = next((f.role_label for f in self.preset.families if f.role_label), None)
            own = {role: "decode"} if role else {}
            write_preset(
                out, self.preset, values, own, model=self.model, pool=self.pool, generations=self.generations
            )
            if role:
                prefill: dict[str, Simulated] = {Input.ROUTER_QUEUE_WAITING: Simulated(load.queued_prefill)}
                write_preset(
                    out,
                    self.preset,
                    prefill,
                    {role: "prefill"},
                    model=self.model,
                    pool=self.pool,
                    generations=self.generations,
                )
            return out.text()
