"""A disaggregated fleet: a prefill pool handing finished prompts to a decode pool. Event-driven.

The model of llm-d's (and Dynamo's) prefill/decode disaggregation, at the level the scaler sees
it: two Deployments of the same model, each with its own pods (``scaler.sim.pods``), replica count
and ScaledObject (``role: prefill`` and ``role: decode``), serving the same arrivals.

* **Prefill pool**: a request goes to the Ready prefill pod with the fewest outstanding prompts
  (ties: the one whose queue frees first, then the oldest); each pod computes one prompt at a
  time, first come first served, at ``prefill_tokens_per_s``, and nothing else: no decoding
  competes for its GPU. Its series show the prompts *waiting* (routed, not started) and
  *running* (in prefill), the prompt tokens when a prefill ends, and a first-token histogram of
  its own requests: arrival to the end of the prefill (the prefill pod's vLLM answers a request
  of one token).
* **KV transfer**: the prompt's KV cache then moves to a decode pod, taking
  ``transfer_latency_s + prompt_tokens / transfer_tokens_per_s``. The defaults: 5 ms to set up,
  and 50,000 tokens a second, a 70B model's KV of 320 KB a token (80 layers, 8 KV heads of 128,
  keys and values in 16 bits) over about 16 GB/s of NIXL on RDMA: 1,300 prompt tokens in 31 ms.
* **Decode pool**: the request goes to the Ready decode pod with the fewest outstanding
  sequences and waits for one of its ``decode_slots`` (first come, first served over the slots);
  its first token streams when it gets one, and it decodes its other tokens at
  ``decode_tokens_per_s_per_seq`` (no prefill on the pod to slow it: ``separate`` physics). Its
  series show the requests *waiting* for a slot and *running* (holding one), the prompt and
  generated tokens, the KV cache in use (slots held over slots), and the first-token histogram
  of the TTFT users see (the client's request enters through the decode pod in llm-d).

So a user's TTFT = prefill queue + prefill + transfer + wait for a decode slot.

*Example*: a 1,300-token prompt arrives at t=0 on an idle fleet of the benchmark's replicas
(5,000 prompt tokens/s, 24 slots at 18 tokens/s): prefill 0.26 s, transfer 0.031 s, a free slot:
first token at 0.291 s; its 1,500 generated tokens end at 0.291 + 1,499 / 18 = 83.6 s.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from scaler.replay.fleet.cluster import ClusterConfig, ClusterError, ServingPod, pick
from scaler.replay.trace import Trace
from scaler.sim.pods import PodLifecycle

ROLES = ("prefill", "decode")


@dataclass(frozen=True)
class DisaggConfig:
    """The two pools: the replica of ``cluster`` (its prefill rate, slots, decode rate, cold start and
    GPUs per replica) in each, each pool's GPUs, and the KV transfer between them."""

    cluster: ClusterConfig
    prefill_gpus: int
    decode_gpus: int
    transfer_latency_s: float = 0.005
    transfer_tokens_per_s: float = 50_000.0

    def __post_init__(self) -> None:
        problems = []
        per = self.cluster.gpus_per_replica
        for name in ("prefill_gpus", "decode_gpus"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= per):
                problems.append(f"{name} must be an integer >= gpus_per_replica ({per}), got {value!r}")
        if not (math.isfinite(self.transfer_latency_s) and self.transfer_latency_s >= 0):
            problems.append(f"transfer_latency_s must be a number >= 0, got {self.transfer_latency_s!r}")
        if not (math.isfinite(self.transfer_tokens_per_s) and self.transfer_tokens_per_s > 0):
            problems.append(f"transfer_tokens_per_s must be a number > 0, got {self.transfer_tokens_per_s!r}")
        if problems:
            raise ClusterError("; ".join(problems))

    def transfer_s(self, prompt_tokens: float) -> float:
        """Seconds the prompt's KV cache takes from the prefill pod to the decode pod."""
        return self.transfer_latency_s + prompt_tokens / self.transfer_tokens_per_s

    def gpus(self, role: str) -> int:
        """The GPUs the pool of ``role`` may use."""
        return self.prefill_gpus if role == "prefill" else self.decode_gpus


@dataclass(frozen=True, slots=True)
class PoolView:
    """What Kubernetes and Prometheus show of one pool at one instant (per serving pod lists)."""

    pending: int
    starting: int
    ready: int
    gpus_free: int
    waiting: list[int]  # per serving pod (Ready or draining)
    running: list[int]

    @property
    def replicas(self) -> int:
        """Pods counted in the Deployment's replicas."""
        return self.pending + self.starting + self.ready


class Pool(PodLifecycle[ServingPod]):
    """One pool's pods on its GPUs: the prefill pool (one prompt at a time a pod) or the decode one."""

    def __init__(self, config: DisaggConfig, role: str, initial_ready: int) -> None:
        cfg = config.cluster
        slots = 1 if role == "prefill" else cfg.decode_slots
        super().__init__(
            lambda index, t: ServingPod(index, t, slots),
            config.gpus(role),
            cfg.gpus_per_replica,
            cfg.cold_start_s,
            initial_ready,
        )
        self.role = role
        self.slots_per_pod = slots
        self._p = cfg.prefill_tokens_per_s
        self._r = cfg.decode_tokens_per_s_per_seq

    def _pick(self, now: float) -> ServingPod:
        if now >= self._next_event:
            self.advance(now)
        return pick(self.ready, self.active, now, f"the {self.role} pool")

    def prefill(self, now: float, prompt_tokens: float) -> tuple[float, float]:
        """Route one prompt arriving at ``now``: (when its prefill starts, when it ends)."""
        pod = self._pick(now)
        start = max(now, pod.free_at, pod.ready_at)
        end = start + prompt_tokens / self._p
        heapq.heappush(pod.ends, end)
        if start > now:
            pod.starts.append(start)
        pod.free_at = end
        return start, end

    def decode(self, now: float, output_tokens: float) -> tuple[float, float]:
        """Route one request whose KV arrives at ``now``: (when it gets a slot, its first token; its end)."""
        pod = self._pick(now)
        slot_free = heapq.heappop(pod.slots)
        admitted = max(now, pod.ready_at, slot_free)
        end = admitted + max(0.0, output_tokens - 1) / self._r
        heapq.heappush(pod.slots, end)
        heapq.heappush(pod.ends, end)
        if admitted > now:
            pod.starts.append(admitted)
        return admitted, end

    def view(self, now: float) -> PoolView:
        """Advance to ``now`` and return what the sources would show of the pool."""
        self.advance(now)
        pending, starting, ready = self.counts()
        waiting, running = [], []
        for pod in self.ready + self.draining:
            w = pod.waiting(now)
            waiting.append(w)
            running.append(pod.outstanding(now) - w)
        gpus_free = self.gpus_free - self.gpus_bound
        return PoolView(pending, starting, ready, gpus_free, waiting, running)


def kv_usage(view: PoolView, slots: int) -> float | None:
    """The mean over serving pods of the share of slots in use (None with no serving pod)."""
    return min(1.0, sum(view.running) / (len(view.running) * slots)) if view.running else None


def busy_per_bucket(trace: Trace, cfg: ClusterConfig, bucket_s: float) -> dict[str, NDArray[np.float64]]:
    """Per role, the replicas the requests arriving in each bucket keep busy (fractional): prompt
    seconds, and decode slot-seconds over the slots. Queueing is left out: a lower bound."""
    if len(trace) == 0:
        return {role: np.zeros(1) for role in ROLES}
    buckets = (trace.arrivals // bucket_s).astype(np.int64)
    size = int(buckets[-1]) + 1
    prefill = trace.prompt_tokens / cfg.prefill_tokens_per_s
    hold = np.maximum(0, trace.output_tokens - 1) / cfg.decode_tokens_per_s_per_seq
    return {
        "prefill": np.bincount(buckets, weights=prefill, minlength=size) / bucket_s,
        "decode": np.bincount(buckets, weights=hold, minlength=size) / cfg.decode_slots / bucket_s,
    }
