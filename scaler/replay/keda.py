"""ScaledObjects as KEDA reads them, for the replay: triggers become metrics for the HPA model.

Supported triggers:

* ``external`` / ``external-push``: this scaler. Its ``metadata`` builds an ``Engine``;
  the metric is the latest decision with a target of 1 (AverageValue).
* ``prometheus``: ``query`` and ``threshold`` (and ``metricType``, AverageValue by
  default). The query text is mapped to a simulated series by keyword (``SERIES``)
  and its outer aggregation (``sum``, ``avg``, ``max``, ``min``).
* ``cron``: ``timezone``, ``start``, ``end``, ``desiredReplicas``: inside the window the
  metric is ``desiredReplicas``, outside it 1, with a target of 1 (KEDA's cron scaler).

KEDA's ``cooldownPeriod`` only governs scaling to and from zero (read and reported).
``pollingInterval`` paces KEDA's scale loop, which the HPA's reads do not wait for: only a
trigger's ``useCachedMetrics`` makes the HPA read the loop's last poll
(``scaler.replay.policies.KedaPolicy``).

``fallback`` applies when this scaler's ``GetMetrics`` fails: it answers UNAVAILABLE when its
decision's inputs are older than ``maxStalenessSeconds`` (``Decision.stale``), which a replay of
a history with a scrape outage longer than that reaches (``scaler replay --prometheus``: the
history's gaps, in which this scaler's Prometheus held nothing). ``KedaCalls`` counts the calls
each path makes and KEDA's failure count (``pkg/fallback/fallback.go``), per KEDA version
(``KEDA_VERSIONS``):

* up to 2.20: the HPA's path calls at every sync and the scale loop every ``pollingInterval``;
  a failure on either counts;
* 2.21 (kedacore/keda PR #8031): the scale loop stops calling while the HPA's ScalingActive
  is True, for an object with minReplicaCount above 0, no idleReplicaCount, no
  ``useCachedMetrics`` and no ``scalingModifiers``; it polls again while ScalingActive is False
  (the HPA could not get this scaler's metric).

Past ``fallback.failureThreshold`` failures the HPA reads the fallback's replicas as this scaler's
metric (``fallback_replicas``, by ``fallback.behavior``); without ``fallback`` the metric errors and
the HPA holds its replicas. A prometheus or cron trigger's source never fails in a replay.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from scaler.config import PrewarmWindow
from scaler.decider.spec import Window
from scaler.hpa import Behavior, MetricType
from scaler.inputs import Input
from scaler.inventory.scaledobject import Fallback, ScaledObject, ScaledObjectError, scaledobject_from_json
from scaler.inventory.scaledobject import Trigger as ScaledObjectTrigger
from scaler.manifest import ManifestError, first_scaledobject

# The simulated series a trigger's query can stand for: the router's queue, three inputs, GPU utilisation.
Series = Literal[
    "router_queue", Input.QUEUE_WAITING, Input.REQUESTS_RUNNING, "gpu_utilization", Input.KV_CACHE_USAGE
]
Aggregation = Literal["sum", "avg", "max", "min"]
# The KEDA versions whose scale loop the replay models: "2.20" is every release up to 2.20 (the loop
# calls the scaler every pollingInterval), "2.21" the release of kedacore/keda PR #8031 (the loop
# stops calling it while the HPA's ScalingActive is True, for objects that allow it).
KedaVersion = Literal["2.20", "2.21"]
KEDA_VERSIONS: tuple[KedaVersion, ...] = get_args(KedaVersion)
KEDA_VERSION: KedaVersion = "2.21"  # the default: KEDA's current release
# The two paths that call this scaler's GetMetrics (pkg/scaling/scale_handler.go).
CallPath = Literal["hpa", "loop"]
HPA_PATH: CallPath = "hpa"  # the HPA's sync, through KEDA's metrics server (GetScaledObjectMetrics)
LOOP_PATH: CallPath = "loop"  # KEDA's scale loop, every pollingInterval

# Query text -> simulated series, by the first keyword found (case-insensitive).
SERIES: tuple[tuple[Series, tuple[str, ...], str], ...] = (
    (
        "router_queue",
        ("flow_control_queue_size",),
        "requests waiting in the router: llm-d's flow-control queue (cluster key router), 0 without one",
    ),
    (
        Input.QUEUE_WAITING,
        ("num_requests_waiting", "queue_size", "waiting"),
        "requests waiting in a pod's queue",
    ),
    (
        Input.REQUESTS_RUNNING,
        ("num_requests_running", "running"),
        "requests being prefilled or decoded in a pod",
    ),
    (
        "gpu_utilization",
        ("dcgm_fi_dev_gpu_util", "gpu_util", "utilization", "utilisation"),
        "percent of a GPU's time in use: 100 * (prompt rate / prefill capacity + generation rate"
        " / decode capacity), per replica",
    ),
    (
        Input.KV_CACHE_USAGE,
        ("gpu_cache_usage", "kv_cache_usage_perc", "cache_usage"),
        "a pod's KV cache usage: the fraction of its batch slots in use, times the cluster model's"
        " kv_cache_usage_full_batch",
    ),
)
_PER_POD = re.compile(r"avg\s*by\s*\(\s*pod\s*\)", re.I)
_AGGREGATION = re.compile(r"^\s*(sum|avg|max|min)\s*(by\s*\([^)]*\)\s*|without\s*\([^)]*\)\s*)?\(", re.I)


@dataclass(frozen=True)
class PrometheusTrigger:
    """A ``prometheus`` trigger as a simulated series, its aggregation and threshold."""

    name: str
    query: str
    threshold: float
    series: Series
    aggregation: Aggregation
    metric_type: MetricType = "AverageValue"
    per_pod: bool = False  # an inner ``avg by (pod)``: one value per pod, not per GPU


@dataclass(frozen=True)
class CronTrigger:
    """A ``cron`` trigger, as a pre-warm window of ``desiredReplicas``."""

    name: str
    window: Window


@dataclass(frozen=True)
class ExternalTrigger:
    """This scaler's ``external`` trigger and its metadata."""

    name: str
    metadata: Mapping[str, str]


Trigger = PrometheusTrigger | CronTrigger | ExternalTrigger


@dataclass(frozen=True)
class ScaledObjectModel:
    """A ScaledObject as the replay runs it: the one model (``scaledobject``) and its triggers
    modelled. Bounds, polling and behavior are the model's; the floor is at least 1 (the
    replay does not scale to zero, ``notes`` says so)."""

    scaledobject: ScaledObject
    triggers: tuple[Trigger, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def name(self) -> str:
        """The ScaledObject's name."""
        return self.scaledobject.name

    @property
    def min_replicas(self) -> int:
        """minReplicaCount, at least 1: scaling to zero is not modelled."""
        return max(1, self.scaledobject.min_replica_count)

    @property
    def max_replicas(self) -> int:
        """maxReplicaCount."""
        return self.scaledobject.max_replica_count

    @property
    def polling_interval_s(self) -> float:
        """pollingInterval, in seconds."""
        return float(self.scaledobject.polling_interval_s)

    @property
    def cooldown_period_s(self) -> float:
        """cooldownPeriod, in seconds (read and reported; it only governs scaling to zero)."""
        return float(self.scaledobject.cooldown_period_s)

    @property
    def behavior(self) -> Behavior:
        """The HPA's behavior (advanced.horizontalPodAutoscalerConfig.behavior, defaults filled)."""
        return self.scaledobject.behavior

    @property
    def external(self) -> ExternalTrigger | None:
        """This scaler's trigger, if the ScaledObject has one."""
        return next((t for t in self.triggers if isinstance(t, ExternalTrigger)), None)

    @property
    def fallback(self) -> Fallback | None:
        """spec.fallback, None without one."""
        return self.scaledobject.fallback

    @property
    def loop_may_rest(self) -> bool:
        """Whether KEDA 2.21's scale loop stops calling the triggers while the HPA's ScalingActive is
        True (kedacore/keda PR #8031): minReplicaCount above 0, no idleReplicaCount, no trigger with
        useCachedMetrics and no scalingModifiers. The raw minReplicaCount, not the replay's floor."""
        so = self.scaledobject
        return (
            so.min_replica_count > 0
            and so.idle_replica_count is None
            and not any(t.use_cached_metrics for t in so.triggers)
            and not so.scaling_formula
            and not so.sets("advanced.scalingModifiers")
        )


@dataclass
class KedaCalls:
    """KEDA's calls of this scaler's ``GetMetrics`` and its fallback (``pkg/fallback/fallback.go``),
    as the replay's clock reaches them. Pure: each call is given its time and whether it failed.

    * which calls are made: every HPA sync calls (every version); the scale loop calls every
      ``pollingInterval`` under 2.20, and under 2.21 only where the object does not let it rest
      (``ScaledObjectModel.loop_may_rest``) or while the HPA's ScalingActive is False (``polls``).
      A failed call not served the fallback is an error to the HPA, which sets ScalingActive False
      (``FailedGetExternalMetric``): under 2.21 the loop then polls again, and its failures count
      towards the threshold too, until a fallback or an answer turns ScalingActive True;
    * each failed call adds one to the failure count, each answered call sets it to 0 (KEDA's
      ``NumberOfFailures``, one per metric, whichever path called);
    * a failed call whose count is then above ``fallback.failureThreshold`` is served the fallback
      (``serves``): the HPA reads ``fallback_replicas`` as the metric; without ``fallback`` the
      metric errors.

    *Example* (failureThreshold 3, HPA syncs every 15 s, no poll): failures at 0, 15, 30 and 45 s
    count 1 to 4; the sync at 45 s is the first served the fallback. Under 2.20 with a poll every
    5 s the polls at 0, 5 and 10 s count too (failures 1 to 4 by 10 s): the sync at 15 s is served it.
    """

    version: KedaVersion
    fallback: Fallback | None
    loop_may_rest: bool
    calls: dict[str, int] = field(default_factory=lambda: {HPA_PATH: 0, LOOP_PATH: 0})
    failed: dict[str, int] = field(default_factory=lambda: {HPA_PATH: 0, LOOP_PATH: 0})
    failures: int = 0  # KEDA's NumberOfFailures: failed calls since the last answered one
    scaling_active: bool = True  # the HPA's ScalingActive condition, as the replay's HPA sets it
    fallback_s: float = 0.0  # seconds the fallback was active, up to ``_since``
    _since: float | None = None  # when the fallback became active, None while it is not
    _last: float | None = None  # the last call's time

    @classmethod
    def of(cls, so: ScaledObjectModel, version: KedaVersion) -> KedaCalls:
        """The calls KEDA ``version`` makes for ``so``."""
        return cls(version, so.fallback, so.loop_may_rest)

    def polls(self) -> bool:
        """Whether the scale loop calls the scaler at this ``pollingInterval``."""
        return self.version == "2.20" or not self.loop_may_rest or not self.scaling_active

    def call(self, now_s: float, path: CallPath, failed: bool) -> bool:
        """One ``GetMetrics`` call at ``now_s`` (seconds of the replay) on ``path``: counted, and
        whether KEDA serves the fallback for it (only a failed call past the threshold)."""
        self.calls[path] += 1
        self.failures = self.failures + 1 if failed else 0
        self.failed[path] += failed
        serves = failed and self.fallback is not None and self.failures > self.fallback.failure_threshold
        if serves and self._since is None:
            self._since = now_s
        elif not serves and self._since is not None:  # KEDA's Fallback condition turns False
            self.fallback_s += now_s - self._since
            self._since = None
        self._last = now_s
        return serves

    def fallback_active_s(self) -> float:
        """Seconds the fallback was active, up to the last call."""
        open_s = 0.0 if self._since is None or self._last is None else self._last - self._since
        return self.fallback_s + open_s

    @property
    def failure_threshold(self) -> int | None:
        """fallback.failureThreshold, None without fallback."""
        return None if self.fallback is None else self.fallback.failure_threshold


def fallback_replicas(fallback: Fallback, current: int) -> int:
    """The replicas KEDA's fallback gives the HPA (``doFallback``), by ``fallback.behavior``, with
    ``current`` the scale target's replicas: ``static`` (and ``scalingModifiers``, whose formula the
    replay does not model) ``fallback.replicas``; ``currentReplicas`` the current count;
    ``currentReplicasIfHigher`` / ``IfLower`` the current count where it is higher / lower."""
    if fallback.behavior == "currentReplicas":
        return current
    if fallback.behavior == "currentReplicasIfHigher":
        return max(current, fallback.replicas)
    if fallback.behavior == "currentReplicasIfLower":
        return min(current, fallback.replicas)
    return fallback.replicas


def map_query(query: str) -> tuple[Series, Aggregation]:
    """The simulated series and aggregation a PromQL query stands for."""
    text = query.lower()
    found = [series for series, keywords, _ in SERIES if any(k in text for k in keywords)]
    if not found:
        known = "; ".join(f"{s}: {', '.join(k)}" for s, k, _ in SERIES)
        raise ScaledObjectError(f"query {query!r} names no simulated series; keywords: {known}")
    match = _AGGREGATION.match(query)
    if match is None:
        raise ScaledObjectError(
            f"query {query!r} must aggregate to one value with sum, avg, max or min"
            " (KEDA needs a single element)"
        )
    return found[0], match.group(1).lower()  # type: ignore[return-value]


def _float(raw: Mapping[str, Any], key: str, where: str) -> float:
    try:
        value = float(str(raw[key]))
    except KeyError:
        raise ScaledObjectError(f"{where}: {key} is required") from None
    except ValueError:
        raise ScaledObjectError(f"{where}: {key}={raw[key]!r} is not a number") from None
    if value <= 0:
        raise ScaledObjectError(f"{where}: {key} must be > 0")
    return value


def _trigger(index: int, trigger: ScaledObjectTrigger) -> Trigger:
    kind, meta = trigger.type, trigger.metadata
    name = trigger.name or f"{kind}-{index}"
    where = f"trigger {index} ({kind})"
    if trigger.external:
        return ExternalTrigger(name, {k: str(v) for k, v in meta.items()})
    if kind == "prometheus":
        query = str(meta.get("query") or "")
        if not query:
            raise ScaledObjectError(f"{where}: query is required")
        series, aggregation = map_query(query)
        if trigger.metric_type not in ("AverageValue", "Value"):
            raise ScaledObjectError(
                f"{where}: metricType {trigger.metric_type} is not modelled (AverageValue, Value)"
            )
        threshold = _float(meta, "threshold", where)
        per_pod = bool(_PER_POD.search(query))
        return PrometheusTrigger(
            name,
            query,
            threshold,
            series,
            aggregation,
            trigger.metric_type,  # type: ignore[arg-type]
            per_pod,
        )
    if kind == "cron":
        try:
            checked = PrewarmWindow(
                start=str(meta.get("start", "")),
                end=str(meta.get("end", "")),
                replicas=int(str(meta.get("desiredReplicas", "0"))),
                timezone=str(meta.get("timezone", "UTC")),
            )
        except ValueError as exc:
            raise ScaledObjectError(f"{where}: {exc}") from None
        return CronTrigger(name, Window(checked.start, checked.end, checked.replicas, checked.timezone))
    raise ScaledObjectError(f"{where}: trigger type {kind!r} is not modelled (external, prometheus, cron)")


def scaledobject_model(doc: Mapping[str, Any]) -> ScaledObjectModel:
    """The replay's model of a ScaledObject document: the one model, parsed strictly, and its
    triggers modelled; ScaledObjectError for what is invalid or cannot be modelled."""
    so = scaledobject_from_json(doc, name_default="scaledobject", strict=True)
    if not so.triggers:
        raise ScaledObjectError("the ScaledObject has no triggers")
    triggers = tuple(_trigger(i, t) for i, t in enumerate(so.triggers))
    notes: list[str] = []
    if so.min_replica_count < 1:
        notes.append("minReplicaCount 0: scaling to zero is not modelled, the floor is 1")
    if so.sets("advanced.scalingModifiers"):
        notes.append("scalingModifiers is not modelled: the HPA takes the max over triggers")
    return ScaledObjectModel(so, triggers, tuple(notes))


def load_scaledobject_model(path: str | Path) -> ScaledObjectModel:
    """The first ScaledObject in a (multi-document) YAML file."""
    try:
        doc = first_scaledobject(Path(path).read_text(), str(path))
    except OSError as exc:
        raise ScaledObjectError(f"cannot read {path}: {exc}") from None
    except ManifestError as exc:
        raise ScaledObjectError(str(exc)) from None
    try:
        return scaledobject_model(doc)
    except ScaledObjectError as exc:
        raise ScaledObjectError(f"{path}: {exc}") from None


@dataclass(frozen=True, slots=True)
class PodSeries:
    """Per-pod values the prometheus triggers aggregate, at one instant."""

    waiting: Sequence[int]  # per serving pod (Ready or draining)
    running: Sequence[int]
    busy_replicas: float  # fleet GPU time in use, in replicas (from 1-minute token rates)
    ready: int
    gpus_per_replica: int
    decode_slots: int
    kv_cache_usage_full_batch: float = 1.0  # the cluster model's KV cache usage with every slot busy
    router_queue: int = 0  # requests held in the router (llm-d's flow control), one sample
    kv_cache_usage: Sequence[float] | None = None  # per serving pod (0-1) where known (step physics)

    def values(self, series: Series, per_pod: bool = False) -> list[float]:
        """The samples a query on ``series`` would return: one per pod, or per GPU for utilisation."""
        if series == "router_queue":
            return [float(self.router_queue)]
        if series == Input.QUEUE_WAITING:
            return [float(v) for v in self.waiting]
        if series == Input.REQUESTS_RUNNING:
            return [float(v) for v in self.running]
        if series == Input.KV_CACHE_USAGE:
            return self.kv_usage()
        # GPU utilisation: the fleet's busy time spread evenly over the Ready pods' GPUs.
        if self.ready == 0:
            return []
        per_gpu = min(100.0, 100.0 * self.busy_replicas / self.ready)
        return [per_gpu] * (self.ready * (1 if per_pod else self.gpus_per_replica))

    def kv_usage(self) -> list[float]:
        """Each serving pod's KV cache usage: as the step physics reads it, else from its running count."""
        if self.kv_cache_usage is not None:
            return [float(v) for v in self.kv_cache_usage]
        return [min(1.0, v / self.decode_slots * self.kv_cache_usage_full_batch) for v in self.running]


def aggregate(values: Sequence[float], how: Aggregation) -> float:
    """The values combined by the query's outer aggregation (0 when there are none)."""
    if not values:
        return 0.0
    if how == "sum":
        return float(sum(values))
    if how == "avg":
        return float(sum(values)) / len(values)
    if how == "max":
        return float(max(values))
    return float(min(values))
