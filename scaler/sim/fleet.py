"""A simulated fleet of inference-server pods serving ``/metrics`` like the real servers.

Each pod exports its engine's families as the engine's preset reads them
(``scaler.sim.exposition``): named as the server names them, with the labels Kubernetes
service discovery would add (``namespace``, ``pod``) and the server's own (``model_name``
for vLLM). An engine whose preset has one frontend for the fleet (Dynamo) exports the
pods' sums from one process. Gauges are set directly; counters advance from the token rates
set on each pod, integrated over real time between changes, so ``rate()`` in Prometheus reads
back the rates the test or the demo set. Any engine in the registry is served, one
registered in a test included.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from scaler.inputs import Input, Reading
from scaler.presets import DEFAULT_ENGINE, PRESETS, Combine
from scaler.presets.engines import VLLM_ITL_BUCKETS, VLLM_TTFT_BUCKETS
from scaler.sim.exposition import Exporter, Exposition, Observed, Simulated, write_preset

# One pod's KV cache, in tokens: Llama-3.1-8B in bf16 holds 128 KiB a token (2 x 32 layers x 8 KV
# heads x 128 x 2 bytes); an 80 GB GPU at vLLM's gpu_memory_utilization 0.9 leaves about 52 GB of
# its 72 GB after 16 GB of weights and the activations' peak: 400,000 tokens.
SIMULATED_KV_CACHE_TOKENS = 400_000.0


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
    queue_time_seconds: float = 0.0  # waiting before the engine first schedules a request
    prefill_time_seconds: float | None = None  # first scheduling to first token (None: TTFT - queue time)
    waiting_deferred: float = 0.0  # of ``waiting``, deferred by a transient constraint (vLLM's reason)
    waiting_by_reason: bool = True  # the server writes why requests wait (vLLM PR #38435 and later)

    @property
    def prefill_seconds(self) -> float:
        """The prefill time a request reports: as set, or what its TTFT leaves after its queue time."""
        if self.prefill_time_seconds is not None:
            return self.prefill_time_seconds
        return max(0.0, self.ttft_seconds - self.queue_time_seconds)


@dataclass
class _PodState:
    load: PodLoad = field(default_factory=PodLoad)
    prompt_total: float = 0.0
    generation_total: float = 0.0
    requests_total: float = 0.0
    ttft: Observed = field(default_factory=lambda: Observed(VLLM_TTFT_BUCKETS))
    itl: Observed = field(default_factory=lambda: Observed(VLLM_ITL_BUCKETS))
    queue_time_sum: float = 0.0  # the phase-time histograms' _sum (their _count is requests_total)
    prefill_time_sum: float = 0.0


class SimulatedFleet(Exporter):
    """Pods of one model in one namespace; ``engine`` picks the metric names."""

    def __init__(
        self,
        namespace: str = "inference",
        model: str = "meta-llama/Llama-3.1-8B-Instruct",
        engine: str = DEFAULT_ENGINE,
        clock: Callable[[], float] = time.monotonic,
        generations: tuple[str, ...] | None = None,
    ) -> None:
        preset = PRESETS.get(engine)
        if preset is None:
            raise ValueError(f"the simulator speaks {', '.join(PRESETS)}, not {engine!r}")
        super().__init__(preset, model, generations, clock)
        self.namespace = namespace
        self.engine = engine
        self._pods: dict[str, _PodState] = {}
        # Labels the scrape's relabelling copies from each pod onto its series (a pod label such as
        # llm-d's role, llm-d.ai/role, arrives as llm_d_ai_role), or a server's own that differs
        # per pod (SGLang's engine_type): over the preset's.
        self.pod_labels: dict[str, dict[str, str]] = {}
        self.scrapes = 0
        self.max_num_seqs = 256  # what Dynamo's frontend exports per replica
        # vLLM's cache_config_info kv_cache_size_tokens (PR #42206), each pod's one engine; None: the
        # label not written (a vLLM before it).
        self.kv_cache_tokens: float | None = SIMULATED_KV_CACHE_TOKENS

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
            pod.ttft.observe(load.ttft_seconds, n)
            pod.queue_time_sum += n * load.queue_time_seconds
            pod.prefill_time_sum += n * load.prefill_seconds
            # one gap before each token after the first
            pod.itl.observe(load.itl_seconds, load.generation_tokens_per_s * dt)

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
                    queue_time_seconds=total.queue_time_seconds,
                    prefill_time_seconds=total.prefill_time_seconds,
                    waiting_deferred=total.waiting_deferred / n,
                    waiting_by_reason=total.waiting_by_reason,
                )

    # ---- exposition ----------------------------------------------------------------------

    def render(self) -> str:
        """The Prometheus text exposition of every pod, named as the engine's server names it."""
        with self._lock:
            self._advance()
            self.scrapes += 1
            out = Exposition()
            pods = {name: self._values(state) for name, state in self._pods.items()}
            if not self.preset.per_pod:  # one frontend process, its series the fleet's sums
                pods = {f"{self.engine}-frontend-0": self._fleet(list(pods.values()))}
            for pod, values in pods.items():
                labels = {"namespace": self.namespace, "pod": pod, **self.pod_labels.get(pod, {})}
                write_preset(out, self.preset, values, labels, model=self.model, generations=self.generations)
            return out.text()

    def _values(self, state: _PodState) -> dict[str, Simulated]:
        """What one pod reports for each input a preset can read."""
        load = state.load
        ttft, itl = state.ttft.simulated(), state.itl.simulated()
        reasons: dict[str, Simulated] = {
            Input.QUEUE_WAITING_CAPACITY: Simulated(max(0.0, load.waiting - load.waiting_deferred)),
            Input.QUEUE_WAITING_DEFERRED: Simulated(load.waiting_deferred),
        }
        cache: dict[str, Simulated] = {}
        if self.kv_cache_tokens is not None:
            cache[Input.KV_CACHE_TOKENS] = Simulated(self.kv_cache_tokens)
        return {
            **(reasons if load.waiting_by_reason else {}),
            **cache,
            Input.QUEUE_WAITING: Simulated(load.waiting),
            Input.REQUESTS_RUNNING: Simulated(load.running),
            Input.REQUESTS_RUNNING_MAX: Simulated(load.running),  # the same series, read as a max
            Reading.REPLICAS_REPORTING: Simulated(load.running),  # one series a pod: what is counted
            Input.PROMPT_TOKENS_PER_S: Simulated(state.prompt_total, state.requests_total),
            Input.GENERATION_TOKENS_PER_S: Simulated(state.generation_total, state.requests_total),
            Input.KV_CACHE_USAGE: Simulated(load.kv_cache_usage),
            Input.KV_CACHE_USAGE_MAX: Simulated(load.kv_cache_usage),
            Input.SLOTS_PER_REPLICA: Simulated(self.max_num_seqs),
            Reading.TTFT: ttft,
            Reading.TTFT_SUM: ttft,
            Reading.ITL: itl,
            Reading.ITL_SUM: itl,
            # Each request's phase times, observed when it finishes (here: as its first token comes).
            Reading.QUEUE_TIME_SUM: Simulated(state.queue_time_sum, state.requests_total),
            Reading.QUEUE_TIME_COUNT: Simulated(state.queue_time_sum, state.requests_total),
            Reading.PREFILL_TIME_SUM: Simulated(state.prefill_time_sum, state.requests_total),
            Reading.PREFILL_TIME_COUNT: Simulated(state.prefill_time_sum, state.requests_total),
            Reading.PREFILL_TIME_SUM_MAX: Simulated(state.prefill_time_sum, state.requests_total),
        }

    def _fleet(self, pods: list[dict[str, Simulated]]) -> dict[str, Simulated]:
        """The pods' values as one frontend writes them: summed, or averaged where the preset
        combines a family by its mean (the batch slots of a replica)."""
        if not pods:
            pods = [self._values(_PodState())]
        means = {f.field for f in self.preset.families if f.combine is Combine.MEAN}
        out = {}
        for name in pods[0]:
            values = [p[name] for p in pods]
            n = len(values) if name in means else 1
            buckets = tuple(
                (bound, sum(v.buckets[i][1] for v in values) / n)
                for i, (bound, _) in enumerate(values[0].buckets)
            )
            out[name] = Simulated(sum(v.value for v in values) / n, sum(v.count for v in values) / n, buckets)
        return out
