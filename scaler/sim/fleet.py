"""A simulated fleet of inference-server pods serving ``/metrics`` like the real servers.

Each pod exports the metric family of its engine with the labels Kubernetes service
discovery would add (``namespace``, ``pod``) and the server's own (``model_name`` for
vLLM). Gauges are set directly; counters advance from the token rates set on each pod,
integrated over real time between changes, so ``rate()`` in Prometheus reads back the
rates the test or the demo set. The names emitted here are written out independently
of the scaler's query presets, so a wrong preset fails the tests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)


@dataclass
class PodLoad:
    waiting: float = 0.0
    running: float = 0.0
    prompt_tokens_per_s: float = 0.0
    generation_tokens_per_s: float = 0.0
    requests_per_s: float = 0.0
    ttft_seconds: float = 0.05
    kv_cache_usage: float = 0.0


@dataclass
class _PodState:
    load: PodLoad = field(default_factory=PodLoad)
    prompt_total: float = 0.0
    generation_total: float = 0.0
    requests_total: float = 0.0
    ttft_sum: float = 0.0
    ttft_buckets: list[float] = field(default_factory=lambda: [0.0] * len(TTFT_BUCKETS))


def _labels(pairs: dict[str, str]) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in pairs.items())
    return "{" + inner + "}"


class SimulatedFleet:
    """Pods of one model in one namespace; ``engine`` picks the metric names (vllm)."""

    def __init__(
        self,
        namespace: str = "inference",
        model: str = "meta-llama/Llama-3.1-8B-Instruct",
        engine: str = "vllm",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if engine != "vllm":
            raise ValueError(f"the simulator speaks vllm only so far, not {engine!r}")
        self.namespace = namespace
        self.model = model
        self.engine = engine
        self.clock = clock
        self._pods: dict[str, _PodState] = {}
        self._last = clock()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.scrapes = 0

    # ---- load control -------------------------------------------------------------------

    def _advance(self) -> None:
        now = self.clock()
        dt = max(0.0, now - self._last)
        self._last = now
        for pod in self._pods.values():
            load = pod.load
            pod.prompt_total += load.prompt_tokens_per_s * dt
            pod.generation_total += load.generation_tokens_per_s * dt
            n = load.requests_per_s * dt
            pod.requests_total += n
            pod.ttft_sum += n * load.ttft_seconds
            for i, bound in enumerate(TTFT_BUCKETS):
                if load.ttft_seconds <= bound:
                    pod.ttft_buckets[i] += n

    def set_pods(self, names: Iterable[str]) -> None:
        with self._lock:
            self._advance()
            wanted = list(names)
            for name in list(self._pods):
                if name not in wanted:
                    del self._pods[name]
            for name in wanted:
                self._pods.setdefault(name, _PodState())

    @property
    def pods(self) -> list[str]:
        with self._lock:
            return list(self._pods)

    def set_pod_load(self, pod: str, load: PodLoad) -> None:
        with self._lock:
            self._advance()
            self._pods.setdefault(pod, _PodState()).load = load

    def set_fleet_load(self, total: PodLoad) -> None:
        """Spread a fleet-wide load evenly over the current pods."""
        with self._lock:
            self._advance()
            n = max(1, len(self._pods))
            for pod in self._pods.values():
                pod.load = PodLoad(
                    waiting=total.waiting / n,
                    running=total.running / n,
                    prompt_tokens_per_s=total.prompt_tokens_per_s / n,
                    generation_tokens_per_s=total.generation_tokens_per_s / n,
                    requests_per_s=total.requests_per_s / n,
                    ttft_seconds=total.ttft_seconds,
                    kv_cache_usage=total.kv_cache_usage,
                )

    # ---- exposition ----------------------------------------------------------------------

    def render(self) -> str:
        """The Prometheus text exposition of every pod, as vLLM (V1 engine) writes it."""
        with self._lock:
            self._advance()
            self.scrapes += 1
            lines: list[str] = []

            def family(name: str, kind: str, help_text: str) -> None:
                lines.append(f"# HELP {name} {help_text}")
                lines.append(f"# TYPE {name} {kind}")

            def base(pod: str) -> dict[str, str]:
                return {"namespace": self.namespace, "pod": pod, "model_name": self.model, "engine": "0"}

            gauges = [
                ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", "waiting"),
                ("vllm:num_requests_running", "Number of requests in model execution batches.", "running"),
                ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", "kv_cache_usage"),
            ]
            for name, help_text, attr in gauges:
                family(name, "gauge", help_text)
                for pod, state in self._pods.items():
                    lines.append(f"{name}{_labels(base(pod))} {getattr(state.load, attr):.6f}")
            counters = [
                ("vllm:prompt_tokens", "Number of prefill tokens processed.", "prompt_total"),
                ("vllm:generation_tokens", "Number of generation tokens processed.", "generation_total"),
            ]
            for name, help_text, attr in counters:
                family(f"{name}_total", "counter", help_text)
                for pod, state in self._pods.items():
                    lines.append(f"{name}_total{_labels(base(pod))} {getattr(state, attr):.6f}")
            hist = "vllm:time_to_first_token_seconds"
            family(hist, "histogram", "Histogram of time to first token in seconds.")
            for pod, state in self._pods.items():
                for bound, count in zip(TTFT_BUCKETS, state.ttft_buckets, strict=True):
                    lines.append(f"{hist}_bucket{_labels({**base(pod), 'le': f'{bound}'})} {count:.6f}")
                lines.append(
                    f"{hist}_bucket{_labels({**base(pod), 'le': '+Inf'})} {state.requests_total:.6f}"
                )
                lines.append(f"{hist}_count{_labels(base(pod))} {state.requests_total:.6f}")
                lines.append(f"{hist}_sum{_labels(base(pod))} {state.ttft_sum:.6f}")
            return "\n".join(lines) + "\n"

    # ---- HTTP ----------------------------------------------------------------------------

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        fleet = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                body = fleet.render().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self.address

    @property
    def address(self) -> str:
        if self._server is None:
            raise RuntimeError("not started")
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
