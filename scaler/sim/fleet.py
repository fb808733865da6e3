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

# vLLM's inter-token latency buckets (vllm/v1/metrics/loggers.py), in seconds.
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
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
)
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
    """What one pod reports: queue, running requests, token and request rates, TTFT, KV usage."""

    waiting: float = 0.0
    running: float = 0.0
    prompt_tokens_per_s: float = 0.0
    generation_tokens_per_s: float = 0.0
    requests_per_s: float = 0.0
    ttft_seconds: float = 0.05
    kv_cache_usage: float = 0.0
    itl_seconds: float = 0.03  # the gap between two tokens of a sequence


@dataclass
class _PodState:
    load: PodLoad = field(default_factory=PodLoad)
    prompt_total: float = 0.0
    generation_total: float = 0.0
    requests_total: float = 0.0
    ttft_sum: float = 0.0
    ttft_buckets: list[float] = field(default_factory=lambda: [0.0] * len(TTFT_BUCKETS))
    itl_count: float = 0.0
    itl_sum: float = 0.0
    itl_buckets: list[float] = field(default_factory=lambda: [0.0] * len(ITL_BUCKETS))


def _labels(pairs: dict[str, str]) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in pairs.items())
    return "{" + inner + "}"


class _Exposition:
    """Prometheus text format 0.0.4, written by hand so the names are exactly the server's.

    Samples are grouped by family, as the format requires, whatever order they come in.
    """

    def __init__(self) -> None:
        self._families: dict[str, tuple[str, str, list[str]]] = {}

    def family(self, name: str, kind: str, help_text: str = "") -> None:
        self._families.setdefault(name, (kind, help_text or name, []))

    def _family_of(self, name: str) -> list[str]:
        if name in self._families:
            return self._families[name][2]
        for suffix in ("_bucket", "_sum", "_count"):
            base = name.removesuffix(suffix)
            if base != name and base in self._families:
                return self._families[base][2]
        self.family(name, "counter" if name.endswith("_total") else "gauge")
        return self._families[name][2]

    def sample(self, name: str, labels: dict[str, str], value: float) -> None:
        self._family_of(name).append(f"{name}{_labels(labels)} {value:.6f}")

    def histogram(
        self,
        name: str,
        labels: dict[str, str],
        buckets: list[tuple[float, float]],
        total: float,
        count: float,
    ) -> None:
        self.family(name, "histogram")
        for bound, cumulative in buckets:
            self.sample(f"{name}_bucket", {**labels, "le": f"{bound:g}"}, cumulative)
        self.sample(f"{name}_bucket", {**labels, "le": "+Inf"}, count)
        self.sample(f"{name}_sum", labels, total)
        self.sample(f"{name}_count", labels, count)

    def text(self) -> str:
        lines: list[str] = []
        for name, (kind, help_text, samples) in self._families.items():
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")
            lines.extend(samples)
        return "\n".join(lines) + "\n"


class MetricsServer:
    """``/metrics`` over HTTP from a daemon thread, with the text ``render`` returns at each scrape."""

    def __init__(self, render: Callable[[], str]) -> None:
        self.render = render
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Start serving; returns the ``host:port`` it listens on."""
        render = self.render

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                body = render().encode()
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
        """The ``host:port`` the server listens on; RuntimeError before ``start``."""
        if self._server is None:
            raise RuntimeError("not started")
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def stop(self) -> None:
        """Shut the server down, if it runs."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class SimulatedFleet:
    """Pods of one model in one namespace; ``engine`` picks the metric names."""

    def __init__(
        self,
        namespace: str = "inference",
        model: str = "meta-llama/Llama-3.1-8B-Instruct",
        engine: str = "vllm",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if engine not in ("vllm", "sglang", "tgi", "triton", "dynamo"):
            raise ValueError(f"the simulator speaks vllm, sglang, tgi, triton and dynamo, not {engine!r}")
        self.namespace = namespace
        self.model = model
        self.engine = engine
        self.clock = clock
        self._pods: dict[str, _PodState] = {}
        # Labels the scrape's relabelling copies from each pod onto its series (a pod label such as
        # llm-d's role, llm-d.ai/role, arrives as llm_d_ai_role), or a server label (engine_type).
        self.pod_labels: dict[str, dict[str, str]] = {}
        self._last = clock()
        self._lock = threading.Lock()
        self._http = MetricsServer(self.render)
        self.scrapes = 0
        self.max_num_seqs = 256  # what Dynamo's frontend exports per replica
        # vLLM's inter-token latency histogram; "vllm:time_per_output_token_seconds" before 0.11
        self.itl_name = "vllm:inter_token_latency_seconds"

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
            gaps = load.generation_tokens_per_s * dt  # one gap before each token after the first
            pod.itl_count += gaps
            pod.itl_sum += gaps * load.itl_seconds
            for i, bound in enumerate(ITL_BUCKETS):
                if load.itl_seconds <= bound:
                    pod.itl_buckets[i] += gaps

    def set_pods(self, names: Iterable[str]) -> None:
        """Keep exactly these pods: add new ones idle, drop the others."""
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
        """Names of the fleet's pods."""
        with self._lock:
            return list(self._pods)

    def set_pod_load(self, pod: str, load: PodLoad) -> None:
        """Set what one pod reports from now on (adding the pod if it is new)."""
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
                    itl_seconds=total.itl_seconds,
                )

    # ---- exposition ----------------------------------------------------------------------

    def render(self) -> str:
        """The Prometheus text exposition of every pod, named as the engine's server names it."""
        with self._lock:
            self._advance()
            self.scrapes += 1
            out = _Exposition()
            renderer = {
                "vllm": self._vllm,
                "sglang": self._sglang,
                "tgi": self._tgi,
                "triton": self._triton,
                "dynamo": self._dynamo,
            }
            renderer[self.engine](out)
            return out.text()

    def _pod_labels(self, pod: str, model_label: str | None) -> dict[str, str]:
        labels = {"namespace": self.namespace, "pod": pod, **self.pod_labels.get(pod, {})}
        if model_label:
            labels[model_label] = self.model
        return labels

    def _ttft(
        self, out: _Exposition, name: str, labels: dict[str, str], state: _PodState, scale: float
    ) -> None:
        cumulative = [
            (bound * scale, count) for bound, count in zip(TTFT_BUCKETS, state.ttft_buckets, strict=True)
        ]
        out.histogram(name, labels, cumulative, state.ttft_sum * scale, state.requests_total)

    # vLLM V1: vllm/v1/metrics/loggers.py (labels model_name, engine)
    def _vllm(self, out: _Exposition) -> None:
        out.family("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.")
        out.family("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.")
        out.family("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.")
        out.family("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.")
        out.family("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.")
        out.family(
            "vllm:time_to_first_token_seconds", "histogram", "Histogram of time to first token in seconds."
        )
        for pod, state in self._pods.items():
            labels = {**self._pod_labels(pod, "model_name"), "engine": "0"}
            out.sample("vllm:num_requests_waiting", labels, state.load.waiting)
            out.sample("vllm:num_requests_running", labels, state.load.running)
            out.sample("vllm:kv_cache_usage_perc", labels, state.load.kv_cache_usage)
            out.sample("vllm:prompt_tokens_total", labels, state.prompt_total)
            out.sample("vllm:generation_tokens_total", labels, state.generation_total)
            self._ttft(out, "vllm:time_to_first_token_seconds", labels, state, 1.0)
            itl = list(zip(ITL_BUCKETS, state.itl_buckets, strict=True))
            out.histogram(self.itl_name, labels, itl, state.itl_sum, state.itl_count)

    # SGLang: python/sglang/srt/metrics/collector.py (labels model_name, tp_rank, pp_rank)
    def _sglang(self, out: _Exposition) -> None:
        for pod, state in self._pods.items():
            labels = {**self._pod_labels(pod, "model_name"), "tp_rank": "0", "pp_rank": "0"}
            out.sample("sglang:num_queue_reqs", labels, state.load.waiting)
            out.sample("sglang:num_running_reqs", labels, state.load.running)
            out.sample("sglang:token_usage", labels, state.load.kv_cache_usage)
            out.sample("sglang:prompt_tokens_total", labels, state.prompt_total)
            out.sample("sglang:generation_tokens_total", labels, state.generation_total)
            self._ttft(out, "sglang:time_to_first_token_seconds", labels, state, 1.0)

    # TGI: docs/source/reference/metrics.md (no model label; per-request token histograms)
    def _tgi(self, out: _Exposition) -> None:
        for pod, state in self._pods.items():
            labels = self._pod_labels(pod, None)
            out.sample("tgi_queue_size", labels, state.load.waiting)
            out.sample("tgi_batch_current_size", labels, state.load.running)
            out.histogram("tgi_request_input_length", labels, [], state.prompt_total, state.requests_total)
            out.histogram(
                "tgi_request_generated_tokens", labels, [], state.generation_total, state.requests_total
            )

    # Triton + TensorRT-LLM backend: custom_metrics_reporter.cc; core first-response histogram in ms
    def _triton(self, out: _Exposition) -> None:
        for pod, state in self._pods.items():
            labels = {**self._pod_labels(pod, "model"), "version": "1"}
            for kind, value in (
                ("waiting", state.load.waiting),
                ("active", state.load.running),
                ("scheduled", state.load.running),
                ("max", 256.0),
            ):
                out.sample("nv_trt_llm_request_metrics", {**labels, "request_type": kind}, value)
            out.sample(
                "nv_trt_llm_kv_cache_block_metrics",
                {**labels, "kv_cache_block_type": "fraction"},
                state.load.kv_cache_usage,
            )
            out.histogram(
                "nv_llm_input_token_len",
                {**labels, "response_metric_type": "total_input_tokens"},
                [],
                state.prompt_total,
                state.requests_total,
            )
            out.histogram(
                "nv_llm_output_token_len",
                {**labels, "response_metric_type": "total_output_tokens"},
                [],
                state.generation_total,
                state.requests_total,
            )
            self._ttft(out, "nv_inference_first_response_histogram_ms", labels, state, 1000.0)

    # Dynamo's frontend (lib/runtime/src/metrics/prometheus_names.rs): one process in front of the
    # workers, labelled by the model lower-cased; its series sum what the workers (pods) serve.
    def _dynamo(self, out: _Exposition) -> None:
        labels = {"namespace": self.namespace, "pod": "dynamo-frontend-0", "model": self.model.lower()}
        pods = list(self._pods.values())
        out.sample("dynamo_frontend_queued_requests", labels, sum(p.load.waiting for p in pods))
        out.sample("dynamo_frontend_inflight_requests", labels, sum(p.load.running for p in pods))
        requests = sum(p.requests_total for p in pods)
        out.histogram(
            "dynamo_frontend_input_sequence_tokens", labels, [], sum(p.prompt_total for p in pods), requests
        )
        out.sample("dynamo_frontend_output_tokens_total", labels, sum(p.generation_total for p in pods))
        out.sample("dynamo_frontend_model_max_num_seqs", labels, self.max_num_seqs)
        buckets = [(bound, sum(p.ttft_buckets[i] for p in pods)) for i, bound in enumerate(TTFT_BUCKETS)]
        out.histogram(
            "dynamo_frontend_time_to_first_token_seconds",
            labels,
            buckets,
            sum(p.ttft_sum for p in pods),
            requests,
        )

    # ---- HTTP ----------------------------------------------------------------------------

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve ``/metrics`` over HTTP from a daemon thread; returns the ``host:port`` it listens on."""
        return self._http.start(host, port)

    @property
    def address(self) -> str:
        """The ``host:port`` the server listens on; RuntimeError before ``start``."""
        return self._http.address

    def stop(self) -> None:
        """Shut the metrics server down, if it runs."""
        self._http.stop()
