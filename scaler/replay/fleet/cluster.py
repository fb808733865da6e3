"""The simulated fleet: pods, GPUs, routing, prefill and decode. Event-driven, per request.

Model (defaults in ``ClusterConfig``; docs/replay.md explains each choice):

* **Pods** go Pending, starting for ``cold_start_s``, Ready, and on scale-down draining, as
  ``scaler.sim.pods`` models them (the demo's simulated cluster uses the same model). Only
  Ready pods receive requests; a removed pod finishes the requests it holds.
* **Dispatch** (``dispatch``) picks the Ready pod each request goes to:
  ``least-outstanding`` (default) the one with the fewest outstanding requests (ties: the one
  whose prefill queue frees first, then the oldest pod), as a router that reads the pods'
  queues does (llm-d's endpoint picker); ``random`` one at random, as a Kubernetes Service
  spreads connections (seeded by ``dispatch_seed``: the same picks on every run);
  ``round-robin`` each in turn.
* **Serving**: a pod prefills one request at a time, first come first served, from its own
  queue, at ``prefill_tokens_per_s``; a request needs one of ``decode_slots`` batch slots
  from the start of its prefill to its last token, and its prefill starts when both the
  pod's prefill and a slot are free. How decoding shares the GPU with prefill is the
  ``physics``:

  - ``shared`` (default): prefill has priority on the GPU (vLLM schedules waiting prefill
    chunks every step), so decoding runs in the GPU time prefill leaves: each sequence
    decodes at ``decode_tokens_per_s_per_seq * (1 - f)`` where ``f`` is the pod's recent
    prefill busy fraction (an exponential average over ``busy_time_constant_s``). The
    pod's capacity is additive GPU time, ``prompt/P + generation/(slots * r) <= 1``.
  - ``separate``: prefill and decode are separate resources. Each sequence decodes at
    ``decode_tokens_per_s_per_seq`` whatever prefill does, limited only by the batch
    slots, and decoding never slows prefill (decode is memory-bound at small batch, and a
    chunked-prefill step carries the decode tokens almost for free). The pod's capacity
    is the tighter of two limits, ``prompt/P <= 1`` and ``slots busy <= decode_slots``.

  - ``step``: vLLM V1's scheduler step by step (``scaler.replay.fleet.stepped``): chunked prefill
    sharing each step's token budget with the decodes, a KV cache in blocks with preemption, and
    a step time that grows with the batch, the prompt tokens and the context, for one of the
    replica ``profile``s taken from published vLLM measurements. ``prefill_tokens_per_s``,
    ``decode_slots`` and ``decode_tokens_per_s_per_seq`` do not apply (the profile says what
    the replica does), and ``waiting`` is vLLM V1's.

  Real vLLM lies between the two fluid ones (docs/replay.md cites why), and ``step`` is a model
  of it that the decider's figures are not the inputs of; the scaler is not told which it runs in.
* **TTFT** = waiting for a slot and for the prefill queue + the prompt's prefill time.
* **What the metrics show** (``waiting``): a request is *waiting* until it is first
  scheduled and *running* from then to its last token. When it is first scheduled is the
  waiting model; the schedule (TTFT, ends) is the same under both:

  - ``slot`` (default): when it gets a batch slot (not admitted for want of a sequence slot
    or KV blocks); its wait in the pod's prefill queue counts as running.
  - ``prefill``: when its prefill starts, as vLLM V1 counts it (a request stays WAITING
    until a step's token budget admits its first chunk), so a prefill backlog shows as
    waiting while running stays below the slots.

  *Example*: one pod, 8 slots, free; three 5,000-token prompts arrive at once on a 5,000
  tokens/s prefill: first tokens at 1, 2 and 3 s under both. Half a second in, ``slot``: 0
  waiting, 3 running; ``prefill``: 2 waiting, 1 running.
  vLLM's phase-time histograms (``vllm/v1/metrics/stats.py``) follow it: queue time is
  arrival at the pod to first scheduled, prefill time first scheduled to first token, both
  observed when the request finishes (``phase_histograms: false``: a stack exporting none).
  The busiest pod's running count, KV cache and prefill are read beside the fleet's sums, as
  ``max by (pod)`` reads them (``pod_maxima: false``: a stack read as the fleet's sums only).
  The KV cache's usage is the share of batch slots in use times ``kv_cache_usage_full_batch``:
  1 (default) where the KV cache is what bounds the batch, less where ``max_num_seqs`` does
  and the cache keeps room.
* **A router** (``router: llm-d``): llm-d's endpoint picker with flow control holds requests
  while the Ready pods read saturated (``scaler/replay/fleet/router.py``); with ``none`` (default)
  each request goes to a pod as it arrives.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml

from scaler.errors import InputError
from scaler.replay.fleet.stepped import DEFAULT_PROFILE, PROFILES, Request, Sink, StepPod
from scaler.sim.pods import Pod, PodLifecycle, PodState

Physics = Literal["shared", "separate", "step"]
PHYSICS: tuple[Physics, ...] = ("shared", "separate", "step")
FLUID: tuple[Physics, ...] = ("shared", "separate")  # the physics that compute a request at its arrival
Router = Literal["none", "llm-d"]
ROUTERS: tuple[Router, ...] = ("none", "llm-d")
Dispatch = Literal["least-outstanding", "random", "round-robin"]
DISPATCH: tuple[Dispatch, ...] = ("least-outstanding", "random", "round-robin")
Waiting = Literal["slot", "prefill"]
WAITING: tuple[Waiting, ...] = ("slot", "prefill")


class ClusterError(InputError):
    """A cluster model that cannot be read or is invalid; the message says why."""

    pass


@dataclass(frozen=True)
class ClusterConfig:
    """One model's replicas on a GPU pool. Field names are the CLUSTER.yaml keys."""

    prefill_tokens_per_s: float = 9000.0  # one replica, GPU fully on prefill
    decode_slots: int = 60  # sequences in the batch (max_num_seqs / KV cache)
    decode_tokens_per_s_per_seq: float = 30.0  # per sequence, GPU fully on decode
    cold_start_s: float = 180.0  # schedule to Ready
    gpus_per_replica: int = 1
    gpus_free: int = 16  # GPUs this workload may use in the pool
    busy_time_constant_s: float = 10.0  # window of the prefill busy fraction that slows decode
    physics: Physics = "shared"  # how prefill and decode share a replica's GPU (module docstring)
    kv_cache_usage_full_batch: float = 1.0  # KV cache usage (0-1] with every batch slot busy
    router: Router = "none"  # what sends requests to the pods (module docstring)
    dispatch: Dispatch = "least-outstanding"  # how a request's pod is picked (module docstring)
    dispatch_seed: int = 0  # the random dispatch's seed: the same picks on every run
    waiting: Waiting = "slot"  # until when a request counts as waiting (module docstring)
    phase_histograms: bool = True  # whether the pods export queue- and prefill-time histograms
    pod_maxima: bool = True  # whether the busiest pod's running, KV cache and prefill are read
    profile: str = DEFAULT_PROFILE  # step physics: the replica (scaler.replay.fleet.stepped.PROFILES)

    def __post_init__(self) -> None:
        problems = []
        for name, choices in (
            ("physics", PHYSICS),
            ("router", ROUTERS),
            ("dispatch", DISPATCH),
            ("waiting", WAITING),
        ):
            if getattr(self, name) not in choices:
                problems.append(f"{name} must be one of {', '.join(choices)}, got {getattr(self, name)!r}")
        for flag in ("phase_histograms", "pod_maxima"):
            if not isinstance(getattr(self, flag), bool):
                problems.append(f"{flag} must be true or false, got {getattr(self, flag)!r}")
        problems += self._profile_problems()
        seed = self.dispatch_seed
        if not (isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0):
            problems.append(f"dispatch_seed must be an integer >= 0, got {seed!r}")
        kv = self.kv_cache_usage_full_batch
        if not (isinstance(kv, int | float) and 0 < kv <= 1):
            problems.append(f"kv_cache_usage_full_batch must be a number in (0, 1], got {kv!r}")
        for name in (
            "prefill_tokens_per_s",
            "decode_tokens_per_s_per_seq",
            "cold_start_s",
            "busy_time_constant_s",
        ):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                problems.append(f"{name} must be a number > 0, got {value!r}")
        for name in ("decode_slots", "gpus_per_replica"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 1):
                problems.append(f"{name} must be an integer >= 1, got {value!r}")
        if not (isinstance(self.gpus_free, int) and self.gpus_free >= self.gpus_per_replica):
            problems.append(f"gpus_free must be an integer >= gpus_per_replica, got {self.gpus_free!r}")
        if problems:
            raise ClusterError("; ".join(problems))

    def _profile_problems(self) -> list[str]:
        """What is wrong with the step physics' profile, if anything."""
        if self.profile not in PROFILES:
            return [f"profile must be one of {', '.join(PROFILES)}, got {self.profile!r}"]
        gpus = PROFILES[self.profile].gpus
        if self.physics == "step" and self.gpus_per_replica != gpus:
            return [
                f"gpus_per_replica must be {gpus} with physics step and profile {self.profile} (the"
                f" profile's GPUs), got {self.gpus_per_replica!r}"
            ]
        return []

    @property
    def decode_tokens_per_s(self) -> float:
        """One replica's decode throughput with a full batch and no prefill."""
        return self.decode_slots * self.decode_tokens_per_s_per_seq

    @property
    def max_replicas_on_gpus(self) -> int:
        """The most replicas the free GPUs hold."""
        return self.gpus_free // self.gpus_per_replica

    def describe(self) -> str:
        """The fleet in a few words, for reports: GPUs, cold start, the router in front, and the
        serving model where it is not the default."""
        router = ", behind llm-d's flow control (router: llm-d)" if self.router == "llm-d" else ""
        gpus = f"{self.gpus_free} GPUs, {self.gpus_per_replica} per replica"
        step = f", step physics ({self.profile})" if self.physics == "step" else ""
        return f"{gpus}, cold start {self.cold_start_s:g}s{router}{step}{self.serving_words()}"

    def serving_words(self) -> str:
        """The serving model where it differs from the default, as ``", ..."`` (empty for the default)."""
        words = []
        if self.dispatch != "least-outstanding":
            seed = f" (seed {self.dispatch_seed})" if self.dispatch == "random" else ""
            words.append(f"{self.dispatch} dispatch{seed}")
        if self.waiting == "prefill" and self.physics != "step":
            words.append("waiting until its prefill starts (vLLM V1)")
        if not self.phase_histograms:
            words.append("no phase-time histograms")
        if not self.pod_maxima:
            words.append("sums only (no busiest pod)")
        return "".join(f", {w}" for w in words)

    def kv_cache_usage(self, running: float) -> float:
        """One pod's KV cache usage (0-1) while ``running`` sequences hold batch slots."""
        return min(1.0, running / self.decode_slots * self.kv_cache_usage_full_batch)

    def busy_fraction(self, prompt_tokens_per_s: float, generation_tokens_per_s: float) -> float:
        """Replicas' worth of capacity these token rates use, under this physics.

        ``shared``: prefill and decode add as GPU time. ``separate``: the tighter of the
        two resources binds (decode counted against a full batch of slots).
        """
        prefill = prompt_tokens_per_s / self.prefill_tokens_per_s
        decode = generation_tokens_per_s / self.decode_tokens_per_s
        return prefill + decode if self.physics == "shared" else max(prefill, decode)

    def with_overrides(self, **changes: Any) -> ClusterConfig:
        """A copy with the given fields changed (validated again)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        return ClusterConfig(**values)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> ClusterConfig:
        """The defaults with these CLUSTER.yaml keys applied; ClusterError on an unknown key. With
        ``physics: step`` and no ``gpus_per_replica``, a replica has its profile's GPUs."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ClusterError(f"unknown cluster keys {unknown}; known: {', '.join(sorted(known))}")
        values = dict(raw)
        profile = PROFILES.get(str(values.get("profile", DEFAULT_PROFILE)))
        if values.get("physics") == "step" and "gpus_per_replica" not in values and profile is not None:
            values["gpus_per_replica"] = profile.gpus
        return cls().with_overrides(**values)

    @classmethod
    def load(cls, path: str | Path) -> ClusterConfig:
        """The cluster model in a CLUSTER.yaml file; ClusterError when unreadable or invalid."""
        return cls.load_written(path)[0]

    @classmethod
    def load_written(cls, path: str | Path) -> tuple[ClusterConfig, frozenset[str]]:
        """The cluster model in a CLUSTER.yaml file and the keys it writes (the rest are defaults)."""
        try:
            raw = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ClusterError(f"cannot read {path}: {exc}") from None
        if not isinstance(raw, Mapping):
            raise ClusterError(f"{path}: expected a mapping of cluster keys")
        return cls.from_mapping(raw), frozenset(str(k) for k in raw)


class ServingPod(Pod):
    """One simulated pod: its lifecycle (``scaler.sim.pods``), batch slots and the requests it holds."""

    __slots__ = ("ends", "free_at", "pf_load", "pf_t", "prefill_s", "slots", "starts")

    def __init__(self, index: int, now: float, slots: int) -> None:
        super().__init__(index, now)
        self.ends: list[float] = []  # heap: end times of requests not yet known to be finished
        self.slots = [0.0] * slots  # heap: when each batch slot frees (FIFO over c slots)
        self.starts: deque[float] = deque()  # first-scheduled times not yet reached (waiting requests)
        self.free_at = 0.0  # when the prefill queue frees
        self.pf_load = 0.0  # exponential average of prefill busy fraction
        self.prefill_s = 0.0  # seconds of prefill assigned to the pod so far (its prefill-time _sum)
        self.pf_t = 0.0

    def holds_requests(self) -> bool:
        """Whether requests were routed here that may not have finished."""
        return bool(self.ends)

    def last_request_end(self, now: float) -> float:
        """When the last request routed here ends (``now`` if they all have)."""
        return max(now, max(self.ends, default=now))

    def outstanding(self, now: float) -> int:
        """Requests assigned to the pod and not finished by ``now``."""
        ends = self.ends
        while ends and ends[0] <= now:
            heapq.heappop(ends)
        return len(ends)

    def waiting(self, now: float) -> int:
        """Requests assigned to the pod not yet first scheduled at ``now`` (vLLM's waiting; when a
        request is first scheduled is the cluster's waiting model)."""
        starts = self.starts
        while starts and starts[0] <= now:
            starts.popleft()
        return len(starts)


def pick(ready: Sequence[ServingPod], active: Iterable[ServingPod], now: float, what: str) -> ServingPod:
    """The pod a request is routed to: the Ready one with the fewest outstanding requests (the
    earliest free on a tie); with none Ready, the first to become Ready, where it waits.
    ClusterError naming ``what`` (the fleet, a pool) when no pod can ever serve."""
    best: ServingPod | None = None
    best_key = (math.inf, math.inf)
    for pod in ready:
        key = (pod.outstanding(now), pod.free_at)
        if key < best_key:
            best, best_key = pod, key
    if best is not None:
        return best
    return first_to_be_ready(active, what)


PodT = TypeVar("PodT", bound=Pod)


def first_to_be_ready(active: Iterable[PodT], what: str) -> PodT:
    """With no pod Ready, the starting one that is Ready first, where a request waits; ClusterError
    naming ``what`` when none is starting either."""
    starting = [p for p in active if p.state is PodState.STARTING]
    if starting:
        return min(starting, key=lambda p: p.ready_at)
    raise ClusterError(f"no pod can ever serve: {what} has no Ready or starting replica")


@dataclass(frozen=True, slots=True)
class FleetView:
    """What Kubernetes and Prometheus would show about the fleet at one instant."""

    now: float
    pending: int
    starting: int
    ready: int
    draining: int
    gpus_bound: int
    gpus_free: int
    waiting: int
    running: int

    @property
    def replicas(self) -> int:
        """Pods that count in the Deployment's replicas (and the HPA's status.replicas)."""
        return self.pending + self.starting + self.ready


def fleet_view(
    cluster: PodLifecycle[Any], gpus_free: int, now: float, waiting: int, running: int
) -> FleetView:
    """What Kubernetes and Prometheus show of ``cluster`` (on a pool of ``gpus_free`` GPUs) at ``now``,
    with the requests its Ready and draining pods hold waiting and running."""
    pending, starting, ready = cluster.counts()
    return FleetView(
        now=now,
        pending=pending,
        starting=starting,
        ready=ready,
        draining=len(cluster.draining),
        gpus_bound=cluster.gpus_bound,
        gpus_free=gpus_free - cluster.gpus_bound,
        waiting=waiting,
        running=running,
    )


class Cluster(PodLifecycle[ServingPod]):
    """The fleet under one policy: the pod lifecycle plus serving. Requests must come in arrival order."""

    def __init__(self, config: ClusterConfig, initial_ready: int, now: float = 0.0) -> None:
        self.config = config
        slots = config.decode_slots
        super().__init__(
            lambda index, t: ServingPod(index, t, slots),
            config.gpus_free,
            config.gpus_per_replica,
            config.cold_start_s,
            initial_ready,
            now,
        )
        # Slow-path constants, bound once.
        self._p = config.prefill_tokens_per_s
        self._r = config.decode_tokens_per_s_per_seq
        self._tau = config.busy_time_constant_s
        self._shared = config.physics == "shared"
        self._waits_for_prefill = config.waiting == "prefill"
        self._rng = random.Random(config.dispatch_seed)  # noqa: S311 - a seeded simulation, not cryptography
        self._turn = 0  # round-robin: the next Ready pod's turn
        self._pick = {
            "least-outstanding": self._least_outstanding,
            "random": self._random,
            "round-robin": self._round_robin,
        }[config.dispatch]

    # ---- requests --------------------------------------------------------------------

    def _least_outstanding(self, now: float) -> ServingPod:
        return pick(self.ready, self.active, now, "the fleet")

    def _random(self, now: float) -> ServingPod:
        ready = self.ready
        if ready:
            return ready[int(self._rng.random() * len(ready))]
        return first_to_be_ready(self.active, "the fleet")

    def _round_robin(self, now: float) -> ServingPod:
        ready = self.ready
        if ready:
            pod = ready[self._turn % len(ready)]
            self._turn += 1
            return pod
        return first_to_be_ready(self.active, "the fleet")

    def assign(self, now: float, prompt_tokens: float, output_tokens: float) -> tuple[float, float, float]:
        """Route and schedule one request arriving at ``now``; returns the times it is first
        scheduled (stops waiting, under the waiting model), gets its first token and ends."""
        if now >= self._next_event:
            self.advance(now)
        pod = self._pick(now)
        # FIFO over the pod's slots: the request takes the slot that frees first.
        slot_free = heapq.heappop(pod.slots)
        start = max(now, pod.free_at, pod.ready_at, slot_free)
        prefill = prompt_tokens / self._p
        pod.prefill_s += prefill
        first = start + prefill
        if self._shared:
            # Prefill busy fraction (exponential average), which slows decoding on this pod.
            dt = start - pod.pf_t
            if dt > 0:
                pod.pf_load *= math.exp(-dt / self._tau)
                pod.pf_t = start
            pod.pf_load += prefill / self._tau
            share = min(0.9, pod.pf_load)
            end = first + max(0.0, output_tokens - 1) / (self._r * (1.0 - share))
        else:
            end = first + max(0.0, output_tokens - 1) / self._r
        heapq.heappush(pod.slots, end)
        heapq.heappush(pod.ends, end)
        # slot: waits until it holds a slot (FIFO over slots); prefill: until its prefill starts.
        scheduled = start if self._waits_for_prefill else max(now, pod.ready_at, slot_free)
        if scheduled > now:
            pod.starts.append(scheduled)
        pod.free_at = first
        return scheduled, first, end

    # ---- what the sources would see --------------------------------------------------

    def view(self, now: float) -> FleetView:
        """Advance to ``now`` and return what Kubernetes and Prometheus would show of the fleet."""
        self.advance(now)
        waiting = running = 0
        for pod in self.ready + self.draining:
            out = pod.outstanding(now)
            w = pod.waiting(now)
            waiting += w
            running += out - w
        return fleet_view(self, self.config.gpus_free, now, waiting, running)

    def endpoints(self, now: float) -> list[tuple[int, float]]:
        """Each Ready pod's (waiting, KV cache usage) at ``now``: what a router's picker reads."""
        kv = self.config.kv_cache_usage
        out = []
        for pod in self.ready:
            waiting = pod.waiting(now)
            out.append((waiting, kv(pod.outstanding(now) - waiting)))
        return out

    def next_change(self) -> float:
        """The first instant after the last ``endpoints(now)`` at which what it returns can change:
        a request is first scheduled or ends on a Ready pod, a pod becomes Ready or goes (inf: never)."""
        nxt = self._next_event
        for pod in self.ready:
            if pod.starts and pod.starts[0] < nxt:
                nxt = pod.starts[0]
            if pod.ends and pod.ends[0] < nxt:
                nxt = pod.ends[0]
        return nxt

    def ready_loads(self, now: float) -> list[int]:
        """Outstanding requests per Ready pod (for tests and max/avg queries)."""
        return [p.outstanding(now) for p in self.ready]


class StepCluster(PodLifecycle[StepPod]):
    """The fleet under one policy in the ``step`` physics: the pod lifecycle, and on every pod a vLLM
    V1 engine (``scaler.replay.fleet.stepped``) whose events go to ``sink``. Requests must come in arrival
    order; each pod's engine is run up to an instant before anything reads it at that instant."""

    def __init__(self, config: ClusterConfig, initial_ready: int, sink: Sink, now: float = 0.0) -> None:
        self.config = config
        profile = PROFILES[config.profile]
        super().__init__(
            lambda index, t: StepPod(index, t, profile, sink),
            config.gpus_free,
            config.gpus_per_replica,
            config.cold_start_s,
            initial_ready,
            now,
        )
        self._rng = random.Random(config.dispatch_seed)  # noqa: S311 - a seeded simulation, not cryptography
        self._turn = 0
        self._least = config.dispatch == "least-outstanding"
        self._dispatch = config.dispatch

    def _pick(self, now: float) -> StepPod:
        ready = self.ready
        if not ready:
            return first_to_be_ready(self.active, "the fleet")
        if self._dispatch == "random":
            return ready[int(self._rng.random() * len(ready))]
        if self._dispatch == "round-robin":
            pod = ready[self._turn % len(ready)]
            self._turn += 1
            return pod
        best = ready[0]
        best_load = best.outstanding(now)
        for pod in ready[1:]:
            load = pod.outstanding(now)
            if load < best_load:
                best, best_load = pod, load
        return best

    def send(self, now: float, request: int, prompt_tokens: float, output_tokens: float) -> None:
        """Request ``request`` arrives at ``now``: to a Ready pod by the dispatch (the engines run up to
        ``now`` first where the dispatch reads them), or, with none Ready, to the first to be."""
        if now >= self._next_event:
            self.advance(now)
        if self._least:  # the count each holds: only an engine whose decode run ended can have changed
            for pod in self.ready:
                if pod.engine.steady_until < now:
                    pod.engine.advance(now)
        pod = self._pick(now)
        pod.add(Request(request, now, int(prompt_tokens), int(output_tokens)), now)

    def run_engines(self, now: float) -> None:
        """Run every serving pod's engine up to ``now``."""
        for pod in self.ready:
            pod.engine.advance(now)
        for pod in self.active:
            if pod.state is PodState.STARTING and pod.engine.busy:
                pod.engine.advance(now)

    def view(self, now: float) -> FleetView:
        """Advance to ``now`` and return what Kubernetes and Prometheus would show of the fleet."""
        self.advance(now)
        self.run_engines(now)
        waiting = running = 0
        for pod in self.ready + self.draining:
            waiting += pod.waiting(now)
            running += pod.running(now)
        return fleet_view(self, self.config.gpus_free, now, waiting, running)

    def endpoints(self, now: float) -> list[tuple[int, float]]:
        """Each Ready pod's (waiting, KV cache usage) at ``now``: what a router's picker reads."""
        self.run_engines(now)
        return [(pod.waiting(now), pod.kv_usage(now)) for pod in self.ready]

    def next_change(self) -> float:
        """The first instant at which ``endpoints`` can change: a busy Ready pod's next step, a pod
        becoming Ready or going (inf: never)."""
        nxt = self._next_event
        for pod in self.ready:
            engine = pod.engine
            if engine.busy and engine.clock < nxt:
                nxt = engine.clock
        return nxt

    def ready_loads(self, now: float) -> list[int]:
        """Outstanding requests per Ready pod (for tests and max/avg queries)."""
        self.run_engines(now)
        return [p.outstanding(now) for p in self.ready]

    def finish(self) -> None:
        """Run every engine to its last request's end (the replay is over; nothing more arrives)."""
        for pod in self.pods:
            if pod.drained is None and pod.engine.busy:
                pod.engine.drain()
