"""The policies a replay compares. Each sets the Deployment's replica count at control ticks.

* ``KedaPolicy``: a ScaledObject as KEDA and the HPA run it. An ``external`` trigger is
  this scaler, driven through ``Engine.decide`` with an ``Observation`` built from the
  simulated series every ``refresh_s``, as the server's refresh loop does; at every
  ``hpa_sync_s`` the HPA model (``scaler.sim.hpa.Hpa``) reads each trigger, as KEDA's metrics
  server calls its source on each HPA request (a ``useCachedMetrics`` trigger: the value of KEDA's
  last poll, every ``pollingInterval``), and turns the metrics into replicas. It keeps the
  capacity each decision recorded (``Decision.capacity``, what a replica holds as configured or
  measured) and the scale it sized the fleet at (``forecast.capacity_scale``), so a replay can hold
  the scaler's estimates against the cluster model's truth (``capacity_at``, ``scale_at``). This
  scaler's call fails when its latest decision is stale past ``maxStalenessSeconds`` (in
  ``outages``, the spans of a history without samples, its Prometheus inputs are missing): KEDA's
  calls, failure count and fallback are ``keda`` (``scaler.replay.keda.KedaCalls``), per
  ``keda_version``.
* ``ClairvoyantPolicy``: knows the future demand as a per-minute schedule of replicas
  and orders each replica exactly one cold start before its minute, without an HPA.

Each records, in ``held_log``, what its demand, its floor and its pre-warm windows asked
(``scaler.replay.held``), so that the GPU-hours they held can be told apart.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol, TypeVar

from scaler.config import parse_metadata
from scaler.decider.engine import Engine
from scaler.decider.signals.prewarm import window_state
from scaler.hpa import Metric
from scaler.inputs import Input, InputSource, Reading
from scaler.model import Capacity, Decision, HpaStatus, Observation, Signal
from scaler.readings import Readings
from scaler.replay.held import HeldLog
from scaler.replay.keda import (
    HPA_PATH,
    KEDA_VERSION,
    LOOP_PATH,
    CronTrigger,
    ExternalTrigger,
    KedaCalls,
    KedaVersion,
    PodSeries,
    PrometheusTrigger,
    ScaledObjectModel,
    aggregate,
    fallback_replicas,
)
from scaler.sim.hpa import Hpa, desired, metric_proposal

ModelledTrigger = ExternalTrigger | PrometheusTrigger | CronTrigger
T = TypeVar("T")  # an entry of a per-decision list (KedaPolicy._last_at)

# What a router is read as; a ScaledObject that names no router reads none of it.
ROUTER_READS = frozenset(
    {
        Input.ROUTER_QUEUE_WAITING,
        Input.ROUTER_SATURATION,
        Reading.ROUTER_STALE_ENDPOINTS,
        Reading.ROUTER_INFLIGHT,
    }
)
# The signals of this scaler that read demand; the floor and the pre-warm windows are the user's.
DEMAND_SIGNALS = (Signal.QUEUE, Signal.LOAD, Signal.LAST_KNOWN)
HPA_SYNC_S = 15.0  # kube-controller-manager --horizontal-pod-autoscaler-sync-period default
# RunResult.extra: this scaler's GetMetrics calls from the HPA's syncs and from KEDA's scale loop,
# those that failed, and the seconds KEDA's fallback was active (KedaPolicy.keda_figures).
HPA_CALLS_KEY = "keda_hpa_calls"
LOOP_CALLS_KEY = "keda_loop_calls"
FAILED_CALLS_KEY = "keda_failed_calls"
FALLBACK_KEY = "keda_fallback_s"
# Why this scaler's Prometheus inputs are missing inside an outage (``KedaPolicy``'s ``outages``).
OUTAGE = "no sample in the history here (a scrape outage): Prometheus returned nothing"
KUBERNETES_INPUTS = frozenset(i for i in Input if i.spec.source is InputSource.KUBERNETES)
Outage = tuple[float, float]  # (start, length) in seconds of the trace, as Measured.gaps holds them


def in_outage(outages: Sequence[Outage], t: float) -> bool:
    """Whether ``t`` (seconds of the trace) falls inside one of ``outages``, sorted by start."""
    index = bisect.bisect_right(outages, (t, math.inf)) - 1
    return index >= 0 and t < outages[index][0] + outages[index][1]


def scraped_nothing(readings: Readings) -> Readings:
    """What the live source reads in a scrape outage: the Kubernetes inputs, none of Prometheus'
    (each input of the engine's series missing, ``OUTAGE`` the reason)."""
    kept = {k: v for k, v in readings.values.items() if k in KUBERNETES_INPUTS}
    return Readings(kept, {}, {str(i): OUTAGE for i in Input if i not in KUBERNETES_INPUTS})


class Decides(Protocol):
    """What a ScaledObject's external trigger runs: this scaler's ``Engine``, or the reference policy
    (``scaler.replay.reference``)."""

    def decide(self, observation: Observation) -> Decision:
        """The decision for one refresh."""


class TickInputs:
    """Everything a policy may read at one control tick: the simulated Deployment, and what
    Kubernetes and Prometheus would show of it and its pods (``pods``, ``readings``, as the live
    source reads them).

    ``spec_replicas`` and ``status_replicas`` are the Deployment's own fields, which the HPA reads
    at every sync. ``pods`` and ``readings`` are built by ``observe`` the first time a policy reads
    either, at most once per tick: a policy that never observes (the clairvoyant) or does not
    observe at this tick (this scaler between refreshes, KEDA between polls) costs the replay no
    series. The replay's state does not move until the policy returns, so what ``observe`` builds
    is the same whenever in the tick it is called; after the tick (``end``) it would not be, so a
    policy that keeps a tick reads its series during it.
    """

    __slots__ = ("_observe", "_seen", "now", "now_s", "spec_replicas", "status_replicas")

    def __init__(
        self,
        now_s: float,
        now: datetime,
        spec_replicas: int,
        status_replicas: int,  # pods counted by the Deployment, Pending included
        observe: Callable[[], tuple[PodSeries, Readings]],
    ) -> None:
        self.now_s = now_s
        self.now = now
        self.spec_replicas = spec_replicas
        self.status_replicas = status_replicas
        self._observe = observe
        self._seen: tuple[PodSeries, Readings] | None = None

    @classmethod
    def seen(
        cls,
        now_s: float,
        now: datetime,
        spec_replicas: int,
        status_replicas: int,
        pods: PodSeries,
        readings: Readings,
    ) -> TickInputs:
        """A tick whose series are already built."""
        return cls(now_s, now, spec_replicas, status_replicas, lambda: (pods, readings))

    def end(self) -> None:
        """The tick is over: its series, if not read yet, can no longer be built as they were."""
        self._observe = _ended

    def _observed(self) -> tuple[PodSeries, Readings]:
        if self._seen is None:
            self._seen = self._observe()
        return self._seen

    @property
    def pods(self) -> PodSeries:
        """Per-pod values, as a prometheus trigger's query returns them."""
        return self._observed()[0]

    @property
    def readings(self) -> Readings:
        """The inputs and histograms, as the live source reads them."""
        return self._observed()[1]


def _ended() -> tuple[PodSeries, Readings]:
    raise RuntimeError("a tick's series are read after its tick: read them during it (TickInputs)")


class KedaPolicy:
    """A ScaledObject as KEDA and the HPA run it: this scaler's engine, other triggers, the HPA."""

    def __init__(
        self,
        name: str,
        scaledobject: ScaledObjectModel,
        refresh_s: float = 15.0,
        hpa_sync_s: float = HPA_SYNC_S,
        keda_version: KedaVersion = KEDA_VERSION,
        outages: Sequence[Outage] = (),
    ) -> None:
        self.name = name
        self.so = scaledobject
        self.min_replicas = scaledobject.min_replicas
        self.max_replicas = scaledobject.max_replicas
        self.hpa = Hpa(scaledobject.min_replicas, scaledobject.max_replicas, scaledobject.behavior)
        external = scaledobject.external
        # This scaler's trigger: its metadata parsed, and the engine deciding under it.
        self.target_policy = parse_metadata(external.metadata) if external else None
        self.engine: Decides | None = Engine(self.target_policy.spec) if self.target_policy else None
        self.refresh_s = refresh_s
        self.hpa_sync_s = hpa_sync_s
        # Ticks may start before the trace's second 0 (the warm-up): the first one acts.
        self._next_refresh = -math.inf
        self._next_poll = -math.inf
        self._next_sync = -math.inf
        # What the HPA read at its last sync, with the triggers it came from, and the decision
        # this scaler's metric was then; the scale loop's last poll, for useCachedMetrics triggers.
        self._cached: list[Metric] = []
        self._cached_from: list[ModelledTrigger] = []
        self._polled: Decision | None = None
        self._poll: dict[int, tuple[Metric, ModelledTrigger, Decision | None]] = {}
        self._from_poll = {
            i for i, t in enumerate(scaledobject.scaledobject.triggers) if t.use_cached_metrics
        }
        # KEDA's calls of this scaler and its fallback; the spans in which this scaler's Prometheus
        # held nothing (its inputs missing), sorted; when this scaler's target was first seen.
        self.keda = KedaCalls.of(scaledobject, keda_version)
        self.outages = sorted(outages)
        self._watched_since: float | None = None
        self._poll_failed = False
        self.held_log = HeldLog()
        self._asked: tuple[int, int, int] | None = None
        self.latest: Decision | None = None
        self.decisions = 0
        # Per decision, in time order: its tick (seconds of the trace), the capacity it recorded and
        # the scale it sized the fleet at (None: not sized).
        self.decided_at: list[float] = []
        self.capacities: list[Capacity | None] = []
        self.scales: list[float | None] = []
        # A cron trigger found outside its window stays outside until the window next opens.
        self._closed_until: dict[int, datetime] = {}

    def observation(self, tick: TickInputs) -> Observation:
        """The Observation the live source would build from this tick's simulated series."""
        assert self.target_policy is not None  # only this scaler's trigger observes
        readings = tick.readings
        if self.outages and in_outage(self.outages, tick.now_s):
            readings = scraped_nothing(readings)
        return self._routed(readings).observation(
            tick.now, self.target_policy, hpa=self._hpa_status(tick), hpa_read=True
        )

    def _routed(self, readings: Readings) -> Readings:
        """The router's reads as the live source reads them (``scaler.sources.live``): only for a
        ScaledObject that names the router the replayed cluster has; a ScaledObject that names one
        the cluster lacks finds its queue missing, one that names none reads none."""
        assert self.target_policy is not None
        router = self.target_policy.router
        if router == "llm-d" and Input.ROUTER_QUEUE_WAITING in readings.values:
            return readings
        values = {k: v for k, v in readings.values.items() if k not in ROUTER_READS}
        histograms = {k: v for k, v in readings.histograms.items() if k != Reading.ROUTER_TTFT}
        missing = dict(readings.missing)
        if router != "none":
            missing[Input.ROUTER_QUEUE_WAITING] = f"the replayed cluster has no {router} router"
        return Readings(values, histograms, missing)

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

    def _metrics(self, tick: TickInputs) -> dict[int, tuple[Metric, ModelledTrigger, Decision | None]]:
        """Each trigger's metric now, by its index: what a call to its source returns (this scaler's
        latest decision, a query's value, a cron window's replicas), with the decision it came from."""
        metrics: dict[int, tuple[Metric, ModelledTrigger, Decision | None]] = {}
        for index, trigger in enumerate(self.so.triggers):
            if isinstance(trigger, ExternalTrigger):
                if self.latest is None:
                    continue
                metric: Metric = (float(self.latest.replicas), 1.0, "AverageValue")
            elif isinstance(trigger, PrometheusTrigger):
                value = aggregate(tick.pods.values(trigger.series, trigger.per_pod), trigger.aggregation)
                metric = (value, trigger.threshold, trigger.metric_type)
            elif isinstance(trigger, CronTrigger):
                active = self._cron_active(index, trigger, tick.now)
                metric = (float(trigger.window.replicas if active else 1), 1.0, "AverageValue")
            else:
                continue
            metrics[index] = (metric, trigger, self.latest)
        return metrics

    def _failing(self, tick: TickInputs) -> bool:
        """Whether this scaler's ``GetMetrics`` fails now: its latest decision's inputs older than
        ``maxStalenessSeconds`` (``Decision.stale``, as ``scaler.outputs.keda_service`` answers
        UNAVAILABLE), counted from the first refresh while they never were complete."""
        if self.latest is None or self.target_policy is None or self._watched_since is None:
            return False
        limit = self.target_policy.max_staleness_seconds
        return self.latest.stale(tick.now.timestamp(), self._watched_since, limit)

    def _read_at_sync(self, tick: TickInputs) -> None:
        """What the HPA reads at a sync: KEDA's metrics server calls each trigger's source then
        (``GetScaledObjectMetrics``, every KEDA version), except a trigger with
        ``useCachedMetrics``, answered from the scale loop's last poll."""
        fresh = self._metrics(tick) if len(self._from_poll) < len(self.so.triggers) else {}
        read = ((self._poll if i in self._from_poll else fresh).get(i) for i in range(len(self.so.triggers)))
        got = [r for r in read if r is not None]
        self._cached = [metric for metric, _, _ in got]
        self._cached_from = [trigger for _, trigger, _ in got]
        self._polled = next((d for _, t, d in got if isinstance(t, ExternalTrigger)), None)

    def _answered(self, tick: TickInputs) -> bool:
        """This scaler's call on the HPA's path, its failure counted (``KedaCalls``): answered, its
        metric kept; failed past ``failureThreshold``, the metric replaced by the fallback's replicas
        (KEDA's ``doFallback``: the target times the replicas, so the HPA asks that many); failed
        otherwise, the metric left out. The HPA then scales on the other triggers, unless none is left
        or they would scale down (the HPA's rule for invalid metrics): False, it holds its replicas and
        sets ScalingActive False. A ``useCachedMetrics`` trigger fails as the loop's last poll did."""
        index = next((i for i, t in enumerate(self._cached_from) if isinstance(t, ExternalTrigger)), None)
        if index is None:
            return True
        cached = any(isinstance(self.so.triggers[i], ExternalTrigger) for i in self._from_poll)
        failed = self._poll_failed if cached else self._failing(tick)
        serves = self.keda.call(tick.now_s, HPA_PATH, failed)
        if not failed:
            self.keda.scaling_active = True
            return True
        fallback = self.so.fallback
        if serves and fallback is not None:
            replicas = fallback_replicas(fallback, tick.spec_replicas)
            self._cached[index] = (float(replicas), 1.0, "AverageValue")
            self._polled = None  # the fallback's replicas are read as a metric, not this scaler's
            self.keda.scaling_active = True
            return True
        del self._cached[index], self._cached_from[index]
        self._polled = None
        valid = bool(self._cached)
        if valid and desired(self._cached, tick.status_replicas, self.so.behavior)[0] >= tick.spec_replicas:
            self.keda.scaling_active = True
            return True
        self.keda.scaling_active = False
        return False

    def keda_figures(self) -> dict[str, float]:
        """KEDA's calls of this scaler and its fallback, for ``RunResult.extra`` (``KEDA_KEYS``);
        none for a ScaledObject without this scaler's trigger."""
        if self.engine is None:
            return {}
        calls, failed = self.keda.calls, self.keda.failed
        return {
            HPA_CALLS_KEY: float(calls[HPA_PATH]),
            LOOP_CALLS_KEY: float(calls[LOOP_PATH]),
            FAILED_CALLS_KEY: float(failed[HPA_PATH] + failed[LOOP_PATH]),
            FALLBACK_KEY: self.keda.fallback_active_s(),
        }

    def capacity_at(self, t: float) -> Capacity | None:
        """The capacity the last decision at or before ``t`` (seconds of the trace) recorded: what one
        replica holds as the scaler saw it then. None before the first decision, or where the
        decision had none."""
        return self._last_at(self.capacities, t)

    def scale_at(self, t: float) -> float | None:
        """The capacity scale the last decision at or before ``t`` sized the fleet at
        (``scaler.decider.calibration``). None before the first decision, or where it sized nothing."""
        return self._last_at(self.scales, t)

    def _last_at(self, per_decision: list[T], t: float) -> T | None:
        """The entry of ``per_decision`` (one per decision, in ``decided_at``'s order) of the last
        decision at or before ``t``; None before the first."""
        index = bisect.bisect_right(self.decided_at, t)
        return per_decision[index - 1] if index else None

    def asks(self, status_replicas: int) -> tuple[int, int, int]:
        """What the cached metrics' demand, floor and pre-warm windows ask (``scaler.replay.held``):
        the demand is the HPA's proposal over the demand metrics alone, without tolerance (this
        scaler's metric counted at what its demand signals asked); the floor ``minReplicaCount``
        or the trigger's ``minReplicas``; the windows an open cron trigger's ``desiredReplicas``
        or this scaler's pre-warm proposal. Each within ``maxReplicaCount``."""
        demand, floor, prewarm = 1, self.min_replicas, 0
        for (value, target, kind), trigger in zip(self._cached, self._cached_from, strict=True):
            if isinstance(trigger, CronTrigger):
                prewarm = max(prewarm, round(value))  # 1 outside the window: no more than the demand's
            elif isinstance(trigger, ExternalTrigger) and self._polled is not None:
                decided = self._polled
                asked = decided.proposals
                wanted = max((asked[s] for s in DEMAND_SIGNALS if s in asked), default=1)
                demand = max(demand, min(decided.replicas, wanted))
                floor = max(floor, asked.get(Signal.FLOOR, 1))
                prewarm = max(prewarm, min(decided.replicas, asked.get(Signal.PREWARM, 0)))
            else:
                demand = max(demand, metric_proposal(value, target, status_replicas, 0.0, kind))
        cap = self.max_replicas
        return min(demand, cap), min(floor, cap), min(prewarm, cap)

    def tick(self, tick: TickInputs) -> int | None:
        """The new spec.replicas, or None to leave it."""
        t = tick.now_s
        if self.engine is not None and t >= self._next_refresh:
            if self._watched_since is None:
                self._watched_since = tick.now.timestamp()
            self.latest = self.engine.decide(self.observation(tick))
            self.decisions += 1
            self.decided_at.append(t)
            self.capacities.append(self.latest.capacity)
            self.scales.append(self.latest.forecast.capacity_scale)
            self._next_refresh = t + self.refresh_s
        if t >= self._next_poll:  # KEDA's scale loop: only useCachedMetrics triggers read what it polled
            if self._from_poll:
                self._poll = self._metrics(tick)
            if self.latest is not None and self.keda.polls():
                self._poll_failed = self._failing(tick)
                self.keda.call(t, LOOP_PATH, self._poll_failed)
            self._next_poll = t + self.so.polling_interval_s
        if t >= self._next_sync:
            self._next_sync = t + self.hpa_sync_s
            self._read_at_sync(tick)
            if not self._answered(tick):
                return None  # the metric errors, without fallback: the HPA holds its replicas
            step = self.hpa.step(t, tick.spec_replicas, tick.status_replicas, self._cached)
            asked = self.asks(tick.status_replicas)
            if asked != self._asked:
                self._asked = asked
                self.held_log.record(t, *asked)
            return step.replicas
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
        demand: Sequence[int] | None = None,
    ) -> None:
        self.name = name
        self.schedule = list(schedule)
        self.bucket_s = bucket_s
        self.lead_s = lead_s
        self.min_replicas = min_replicas
        self.max_replicas = max(self.schedule, default=min_replicas)
        # Per bucket, what the demand alone needs (the schedule less its floor's lift): recorded in
        # ``held_log`` against the floor at each tick; None records nothing.
        self.demand = None if demand is None else list(demand)
        self.held_log = HeldLog()
        self._asked: int | None = None
        # Per window of buckets (first, last), the target and the demand asked: a tick reads them again.
        self._windows: dict[tuple[int, int], tuple[int, int | None]] = {}

    def need_at(self, t: float) -> int:
        """Replicas that must be Ready at ``t`` (the bucket's need; past the end, the last)."""
        if not self.schedule:
            return self.min_replicas
        index = min(max(0, int(t // self.bucket_s)), len(self.schedule) - 1)
        return max(self.min_replicas, self.schedule[index])

    def target(self, t: float) -> int:
        """Keep what is needed until a replica ordered now would be Ready, and order for then."""
        return self._of_window(t)[0]

    def _of_window(self, t: float) -> tuple[int, int | None]:
        """Over the buckets from ``t`` to one lead later: the most replicas needed, and the most the
        demand alone asks (None without ``demand``)."""
        key = (int(t // self.bucket_s), int((t + self.lead_s) // self.bucket_s))
        found = self._windows.get(key)
        if found is None:
            window = range(key[0], key[1] + 1)
            need = max(self.need_at(b * self.bucket_s) for b in window)
            asked = None
            if self.demand:
                last = len(self.demand) - 1
                asked = max(self.demand[min(max(0, b), last)] for b in window)
            found = self._windows[key] = (need, asked)
        return found

    def tick(self, tick: TickInputs) -> int | None:
        """The replicas the schedule needs from now until a replica ordered now would be Ready."""
        t = tick.now_s
        need, asked = self._of_window(t)
        if asked is not None and asked != self._asked:
            self._asked = asked
            self.held_log.record(t, asked, self.min_replicas, 0)
        return need
