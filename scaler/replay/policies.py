"""The policies a replay compares. Each sets the Deployment's replica count at control ticks.

* ``KedaPolicy``: a ScaledObject as KEDA and the HPA run it. An ``external`` trigger is
  this scaler, driven through ``Engine.decide`` with an ``Observation`` built from the
  simulated series every ``refresh_s``, as the server's refresh loop does; KEDA reads
  every trigger each ``pollingInterval`` and the HPA model (``hpa.Hpa``) turns the
  metrics into replicas every ``hpa_sync_s``.
* ``ClairvoyantPolicy``: knows the future demand as a per-minute schedule of replicas
  and orders each replica exactly one cold start before its minute, without an HPA.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from scaler.coldstart import NONE as NO_COLD_START
from scaler.coldstart import ColdStart
from scaler.engine import Engine
from scaler.histogram import router_ttft_inputs, ttft_inputs
from scaler.hpa import Hpa, MetricType
from scaler.model import Decision, HpaStatus, Observation
from scaler.replay.keda import (
    CronTrigger,
    ExternalTrigger,
    PodSeries,
    PrometheusTrigger,
    ScaledObjectModel,
    aggregate,
)
from scaler.signals.prewarm import window_state

HPA_SYNC_S = 15.0  # kube-controller-manager --horizontal-pod-autoscaler-sync-period default


@dataclass(frozen=True, slots=True)
class TickInputs:
    """Everything a policy may read at one control tick."""

    now_s: float
    now: datetime
    spec_replicas: int
    status_replicas: int  # pods counted by the Deployment, Pending included
    ready: int
    pending: int
    starting: int
    gpu_schedulable_replicas: int
    waiting: int
    running: int
    prompt_tokens_per_s: float | None
    generation_tokens_per_s: float | None
    pods: PodSeries
    ttft_buckets: Mapping[float, float] | None = None  # the last minute's TTFT histogram (cumulative rates)
    ttft_sum_per_s: float | None = None  # the rate of that histogram's _sum (seconds per second)
    kv_cache_usage: float | None = None  # the serving pods' mean KV cache usage (cluster model)
    cold_start: ColdStart = NO_COLD_START  # measured from the pods that became Ready, as live
    router_queue: int | None = None  # requests held in the router (None: the cluster has none)
    router_saturation: float | None = None  # the router's pool saturation (llm-d flow control)
    router_ttft_buckets: Mapping[float, float] | None = None  # the router's TTFT histogram, queue included


class KedaPolicy:
    """A ScaledObject as KEDA and the HPA run it: this scaler's engine, other triggers, the HPA."""

    def __init__(
        self,
        name: str,
        scaledobject: ScaledObjectModel,
        refresh_s: float = 15.0,
        hpa_sync_s: float = HPA_SYNC_S,
    ) -> None:
        self.name = name
        self.so = scaledobject
        self.min_replicas = scaledobject.min_replicas
        self.max_replicas = scaledobject.max_replicas
        self.hpa = Hpa(scaledobject.min_replicas, scaledobject.max_replicas, scaledobject.behavior)
        external = scaledobject.external
        self.engine = Engine.from_metadata(external.metadata) if external else None
        self.objective_s = self.engine.policy.ttft_objective_seconds if self.engine else 2.0
        self.refresh_s = refresh_s
        self.hpa_sync_s = hpa_sync_s
        # Ticks may start before the trace's second 0 (the warm-up): the first one acts.
        self._next_refresh = -math.inf
        self._next_poll = -math.inf
        self._next_sync = -math.inf
        self._cached: list[tuple[float, float, MetricType]] = []
        self.latest: Decision | None = None
        self.decisions = 0
        # A cron trigger found outside its window stays outside until the window next opens.
        self._closed_until: dict[int, datetime] = {}

    def observation(self, tick: TickInputs) -> Observation:
        """The Observation the live source would build from this tick's simulated series."""
        missing = {}
        if tick.prompt_tokens_per_s is None:
            missing = {
                "prompt_tokens_per_s": "no rate() window yet",
                "generation_tokens_per_s": "no rate() window yet",
            }
        ttft = ttft_inputs(self.objective_s, tick.ttft_buckets, tick.ttft_sum_per_s)
        for name, value in ttft.items():
            if value is None:
                missing[name] = "no requests in the rate window" if tick.ttft_buckets else "no TTFT histogram"
        routed, saturation = self._router(tick, ttft, missing)
        return Observation(
            now=tick.now,
            queue_waiting=float(tick.waiting),
            requests_running=float(tick.running),
            prompt_tokens_per_s=tick.prompt_tokens_per_s,
            generation_tokens_per_s=tick.generation_tokens_per_s,
            current_replicas=tick.status_replicas,
            ready_replicas=tick.ready,
            gpu_schedulable_replicas=tick.gpu_schedulable_replicas,
            pending_replicas=tick.pending,
            starting_replicas=tick.starting,
            ttft_p95_seconds=ttft["ttft_p95_seconds"],
            ttft_p99_seconds=ttft["ttft_p99_seconds"],
            ttft_over_objective=ttft["ttft_over_objective"],
            ttft_mean_seconds=ttft["ttft_mean_seconds"],
            requests_per_s=ttft["requests_per_s"],
            kv_cache_usage=tick.kv_cache_usage,
            router_queue_waiting=routed,
            router_saturation=saturation,
            cold_start_seconds=tick.cold_start.lead_p90_s,
            cold_start_pending_seconds=tick.cold_start.pending_p90_s,
            cold_start_samples=tick.cold_start.samples,
            deployment_replicas=tick.spec_replicas,
            hpa=self._hpa_status(tick),
            hpa_read=True,
            missing=missing,
        )

    def _router(
        self, tick: TickInputs, ttft: dict[str, float | None], missing: dict[str, str]
    ) -> tuple[float | None, float | None]:
        """The router's queue and saturation, and its TTFT in ``ttft``, as the live source reads a
        router the metadata names (``scaler.sources.live``); absent where none is replayed."""
        router = self.engine.policy.router if self.engine else "none"
        if router == "none":
            return None, None
        if router != "llm-d" or tick.router_queue is None:
            missing["router_queue_waiting"] = f"the replayed cluster has no {router} router"
            return None, None
        for name, value in router_ttft_inputs(self.objective_s, tick.router_ttft_buckets).items():
            ttft[name] = value
            missing.pop(name, None)
        return float(tick.router_queue), tick.router_saturation

    def _hpa_status(self, tick: TickInputs) -> HpaStatus:
        """The replayed HPA as the landing monitor reads a real one."""
        externals = sum(isinstance(t, ExternalTrigger) for t in self.so.triggers)
        return self.hpa.status(
            f"keda-hpa-{self.name}",
            "replay",
            tick.status_replicas,
            lists_metric=externals > 0,
            other_metrics=len(self.so.triggers) - externals,
        )

    def _cron_active(self, index: int, trigger: CronTrigger, now: datetime) -> bool:
        closed_until = self._closed_until.get(index)
        if closed_until is not None and now < closed_until:
            return False
        state = window_state(trigger.window, now, 0.0)
        if not state.active:
            self._closed_until[index] = state.next_start
        return state.active

    def _metrics(self, tick: TickInputs) -> list[tuple[float, float, MetricType]]:
        metrics: list[tuple[float, float, MetricType]] = []
        for index, trigger in enumerate(self.so.triggers):
            if isinstance(trigger, ExternalTrigger):
                if self.latest is not None:
                    metrics.append((float(self.latest.replicas), 1.0, "AverageValue"))
            elif isinstance(trigger, PrometheusTrigger):
                value = aggregate(tick.pods.values(trigger.series, trigger.per_pod), trigger.aggregation)
                metrics.append((value, trigger.threshold, trigger.metric_type))
            elif isinstance(trigger, CronTrigger):
                active = self._cron_active(index, trigger, tick.now)
                metrics.append((float(trigger.window.replicas if active else 1), 1.0, "AverageValue"))
        return metrics

    def tick(self, tick: TickInputs) -> int | None:
        """The new spec.replicas, or None to leave it."""
        t = tick.now_s
        if self.engine is not None and t >= self._next_refresh:
            self.latest = self.engine.decide(self.observation(tick))
            self.decisions += 1
            self._next_refresh = t + self.refresh_s
        if t >= self._next_poll:
            self._cached = self._metrics(tick)
            self._next_poll = t + self.so.polling_interval_s
        if t >= self._next_sync:
            self._next_sync = t + self.hpa_sync_s
            return self.hpa.step(t, tick.spec_replicas, tick.status_replicas, self._cached).replicas
        return None


class ClairvoyantPolicy:
    """Replicas from a known per-bucket schedule, ordered one cold start ahead."""

    def __init__(
        self,
        name: str,
        schedule: Sequence[int],
        bucket_s: float,
        lead_s: float,
        min_replicas: int,
    ) -> None:
        self.name = name
        self.schedule = list(schedule)
        self.bucket_s = bucket_s
        self.lead_s = lead_s
        self.min_replicas = min_replicas
        self.max_replicas = max(self.schedule, default=min_replicas)

    def need_at(self, t: float) -> int:
        """Replicas that must be Ready at ``t`` (the bucket's need; past the end, the last)."""
        if not self.schedule:
            return self.min_replicas
        index = min(max(0, int(t // self.bucket_s)), len(self.schedule) - 1)
        return max(self.min_replicas, self.schedule[index])

    def target(self, t: float) -> int:
        """Keep what is needed until a replica ordered now would be Ready, and order for then."""
        first = int(t // self.bucket_s)
        last = int((t + self.lead_s) // self.bucket_s)
        return max(self.need_at(b * self.bucket_s) for b in range(first, last + 1))

    def tick(self, tick: TickInputs) -> int | None:
        """The replicas the schedule needs from now until a replica ordered now would be Ready."""
        return self.target(tick.now_s)
