"""The HorizontalPodAutoscaler KEDA creates for a ScaledObject: everything the scaler knows of it. Pure.

* **Its metric**: KEDA hands the HPA this scaler's answer as one external metric,
  ``METRIC_NAME`` (prefixed ``s<i>-`` by KEDA), the name the gRPC service serves.
* **Reading one**: ``hpa_from_json`` turns an autoscaling/v2 HorizontalPodAutoscaler into
  the ``HpaStatus`` the landing monitor and the policy read; ``Hpa.status`` reports a
  simulated one (the replay's, the demo's) the same way.
* **Its tolerance**: ``DEFAULT_TOLERANCE`` (written here only), the test on a usage ratio
  (``within_tolerance``), the tolerance a read HPA applies (``tolerances``), and the
  smallest step up that lands (``landing_step_up``). The policy, the
  landing monitor, the decision series and the model below all ask these.
* **Its rules** (``Behavior``, ``Hpa``): the replay and the demo turn metrics into replicas
  with them.

Each rule follows Kubernetes' documentation ("Horizontal Pod Autoscaling",
https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/), and the
AverageValue arithmetic KEDA relies on ("ScaledObject specification",
https://keda.sh/docs/latest/reference/scaledobject-spec/); docs/replay.md cites each one.

1. **AverageValue**, per metric: ``ceil(value / target)`` replicas, unless the usage ratio
   ``value / (target * status_replicas)`` is within the tolerance (0.1) of 1.0
   (``within_tolerance``), in which case the metric proposes the current
   ``status.replicas`` (which counts Pending pods). A ``Value`` metric proposes
   ``ceil(status_replicas * value / target)``.
2. **Several metrics**: the largest proposal wins (``desired``).
3. **Stabilization**: every recommendation is recorded; a scale-down takes the highest
   recommendation of the last ``scaleDown.stabilizationWindowSeconds`` (300 s by
   default), a scale-up the lowest of the last ``scaleUp.stabilizationWindowSeconds``
   (0 by default: none).
4. **Rate limits** (policies): a scale-up may reach at most, by default, the larger of
   double and +4 pods of the replica count at the start of the last 15 s; a scale-down
   by default may remove 100% per 15 s. ``selectPolicy: Max`` (default) picks the
   policy that allows the most change, ``Min`` the least, ``Disabled`` none.
5. **Bounds**: the result is clamped to ``[minReplicas, maxReplicas]``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from scaler.errors import InputError
from scaler.kubejson import as_mapping
from scaler.model import HpaStatus
from scaler.quantity import parse_quantity

METRIC_NAME = "llm-inference-replicas"  # the external metric this scaler serves (KEDA prefixes s<i>-)
DEFAULT_TOLERANCE = 0.1  # kube-controller-manager --horizontal-pod-autoscaler-tolerance, the default
# Rule 2 as the user meets it, one sentence for every place that warns of it (dry-run, doctor, convert).
SEVERAL_TRIGGERS = (
    "the HPA takes the largest of its triggers' metrics, so while another trigger asks for more,"
    " the GPU check cannot hold a scale-up"
)
DEFAULT_SCALE_DOWN_WINDOW_S = 300.0


# ---- the tolerance -------------------------------------------------------------------------
#
# The HPA leaves the replicas alone while its usage ratio (metric / (target * replicas)) is
# within the tolerance of 1: 0.1 cluster-wide (--horizontal-pod-autoscaler-tolerance), or
# per HPA and direction where the cluster has KEP-4951 (Kubernetes 1.33 alpha, 1.35 beta)
# and KEDA passes it through (2.18+): spec.behavior.scaleUp.tolerance / scaleDown.tolerance.
# With an AverageValue target of 1 per replica the ratio is target / current. *Example*: at
# 10 replicas and the default, 11 (ratio 1.1) and 9 (0.9) do not land; 12 and 8 do.


def within_tolerance(ratio: float, up: float = DEFAULT_TOLERANCE, down: float = DEFAULT_TOLERANCE) -> bool:
    """The HPA's tolerance test on a usage ratio: ``1 - down <= ratio <= 1 + up``.

    The comparison Kubernetes makes since 1.33 (per-direction tolerances), in the same
    float arithmetic, so a ratio of exactly 1.1 is within 0.1. Before 1.33 it tested
    ``|1 - ratio| <= tolerance``, which in float arithmetic puts exactly 1.1 just outside;
    that edge is the only difference. The policy, the landing monitor, the decision series
    and the model below all use this one test.
    """
    return 1.0 - down <= ratio <= 1.0 + up


def tolerances(hpa: HpaStatus | None) -> tuple[float, float]:
    """(scale-up, scale-down) tolerance the HPA applies: its behavior's, else the default 0.1."""
    if hpa is None:
        return DEFAULT_TOLERANCE, DEFAULT_TOLERANCE
    up, down = hpa.scale_up_tolerance, hpa.scale_down_tolerance
    return (DEFAULT_TOLERANCE if up is None else up), (DEFAULT_TOLERANCE if down is None else down)


def within_hpa_tolerance(
    target: int, current: int | None, tolerance: tuple[float, float] = (DEFAULT_TOLERANCE, DEFAULT_TOLERANCE)
) -> bool:
    """True when the HPA would ignore this change: ``target / current`` is within its tolerance."""
    if not current or target == current:
        return False
    return within_tolerance(target / current, *tolerance)


def landing_step_up(current: int, tolerance: float = DEFAULT_TOLERANCE) -> int:
    """The smallest replica count above ``current`` that the HPA acts on.

    *Example*: from 10 with the default 0.1, 11 is within (11/10 = 1.1) and 12 is not: 12.
    From 9, 10 is already outside (1.11): one replica lands.
    """
    target = current + 1
    while within_hpa_tolerance(target, current, (tolerance, tolerance)):
        target += 1
    return target


def quantity(value: Any) -> float | None:
    """A resource.Quantity as the HPA's tolerance is written ("0", "50m", 0.05), as a number; None if
    unreadable. A string or a whole number is read as the API reads it (``scaler.quantity``); a
    float (YAML's ``0.05``) is taken as it is."""
    if isinstance(value, float):
        return value if value >= 0 else None
    amount = parse_quantity(value)
    return None if amount is None else float(amount)


# ---- reading one from the API --------------------------------------------------------------


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def hpa_from_json(obj: Mapping[str, Any]) -> HpaStatus:
    """An autoscaling/v2 HorizontalPodAutoscaler, as the landing monitor and the policy read it."""
    meta, spec, status = (
        as_mapping(obj.get("metadata")),
        as_mapping(obj.get("spec")),
        as_mapping(obj.get("status")),
    )
    external: list[str] = []
    others = 0
    for raw in spec.get("metrics") or []:
        metric = as_mapping(raw)
        name = str(as_mapping(as_mapping(metric.get("external")).get("metric")).get("name", ""))
        if metric.get("type") == "External" and name.endswith(METRIC_NAME):
            external.append(name)
        else:
            others += 1
    conditions = tuple(
        (
            str(as_mapping(c).get("type", "")),
            str(as_mapping(c).get("status", "")),
            str(as_mapping(c).get("reason", "")),
        )
        for c in status.get("conditions") or []
    )
    behavior = as_mapping(spec.get("behavior"))
    return HpaStatus(
        name=str(meta.get("name", "")),
        namespace=str(meta.get("namespace", "")),
        lists_metric=bool(external),
        other_metrics=others,
        min_replicas=_int(spec.get("minReplicas")),
        max_replicas=_int(spec.get("maxReplicas")),
        current_replicas=_int(status.get("currentReplicas")),
        desired_replicas=_int(status.get("desiredReplicas")),
        conditions=conditions,
        scale_up_tolerance=quantity(as_mapping(behavior.get("scaleUp")).get("tolerance")),
        scale_down_tolerance=quantity(as_mapping(behavior.get("scaleDown")).get("tolerance")),
    )


# ---- its rules, simulated ------------------------------------------------------------------

PolicyType = Literal["Pods", "Percent"]
SelectPolicy = Literal["Max", "Min", "Disabled"]
MetricType = Literal["AverageValue", "Value"]
Metric = tuple[float, float, MetricType]  # one trigger's metric as the HPA reads it: (value, target, type)


class BehaviorError(InputError):
    """An HPA ``behavior`` that cannot be read; the message names the field."""

    pass


@dataclass(frozen=True, slots=True)
class ScalingPolicy:
    """One scaling policy: at most ``value`` pods (or percent) of change per ``period_seconds``."""

    type: PolicyType
    value: int
    period_seconds: int


@dataclass(frozen=True, slots=True)
class ScalingRules:
    """One direction's rules: stabilization window, policies, selectPolicy and tolerance."""

    stabilization_window_s: float
    policies: tuple[ScalingPolicy, ...]
    select_policy: SelectPolicy = "Max"
    tolerance: float = DEFAULT_TOLERANCE


DEFAULT_SCALE_UP = ScalingRules(
    0.0, (ScalingPolicy("Percent", 100, 15), ScalingPolicy("Pods", 4, 15)), "Max", DEFAULT_TOLERANCE
)
DEFAULT_SCALE_DOWN = ScalingRules(
    DEFAULT_SCALE_DOWN_WINDOW_S, (ScalingPolicy("Percent", 100, 15),), "Max", DEFAULT_TOLERANCE
)


@dataclass(frozen=True, slots=True)
class Behavior:
    """An HPA's scale-up and scale-down rules, Kubernetes' defaults where unset."""

    scale_up: ScalingRules = DEFAULT_SCALE_UP
    scale_down: ScalingRules = DEFAULT_SCALE_DOWN

    @classmethod
    def from_spec(cls, behavior: Mapping[str, Any] | None) -> Behavior:
        """Read ``advanced.horizontalPodAutoscalerConfig.behavior``; unset fields keep the defaults."""
        if not behavior:
            return cls()
        if not isinstance(behavior, Mapping):
            raise BehaviorError("behavior must be a mapping with scaleUp and/or scaleDown")
        return cls(
            _rules(behavior.get("scaleUp"), DEFAULT_SCALE_UP, "scaleUp"),
            _rules(behavior.get("scaleDown"), DEFAULT_SCALE_DOWN, "scaleDown"),
        )


def _rules(raw: Any, default: ScalingRules, name: str) -> ScalingRules:
    if raw is None:
        return default
    if not isinstance(raw, Mapping):
        raise BehaviorError(f"{name} must be a mapping")
    window = raw.get("stabilizationWindowSeconds", default.stabilization_window_s)
    select = raw.get("selectPolicy", default.select_policy)
    if select not in ("Max", "Min", "Disabled"):
        raise BehaviorError(f"{name}.selectPolicy must be Max, Min or Disabled, got {select!r}")
    tolerance = quantity(raw.get("tolerance", default.tolerance))
    if tolerance is None:
        raise BehaviorError(
            f'{name}.tolerance must be a quantity >= 0 (0, 0.05, "50m"), got {raw["tolerance"]!r}'
        )
    policies = default.policies
    if raw.get("policies") is not None:
        parsed = []
        for index, p in enumerate(raw["policies"]):
            if not isinstance(p, Mapping) or p.get("type") not in ("Pods", "Percent"):
                raise BehaviorError(f"{name}.policies[{index}].type must be Pods or Percent")
            value, period = int(p.get("value", 0)), int(p.get("periodSeconds", 0))
            if value <= 0 or not 0 < period <= 1800:
                raise BehaviorError(
                    f"{name}.policies[{index}]: value must be > 0 and periodSeconds in (0, 1800]"
                )
            parsed.append(ScalingPolicy(p["type"], value, period))
        policies = tuple(parsed)
    if not 0 <= float(window) <= 3600:
        raise BehaviorError(f"{name}.stabilizationWindowSeconds must be in [0, 3600]")
    return ScalingRules(float(window), policies, select, float(tolerance))


def metric_proposal(
    value: float,
    target: float,
    status_replicas: int,
    tolerance: float = DEFAULT_TOLERANCE,
    metric_type: MetricType = "AverageValue",
) -> int:
    """The replica count one metric asks for."""
    if target <= 0:
        raise ValueError("a metric target must be > 0")
    if status_replicas > 0 and within_tolerance(value / (target * status_replicas), tolerance, tolerance):
        return status_replicas
    if metric_type == "Value":
        return math.ceil(status_replicas * value / target - 1e-9)
    return math.ceil(value / target - 1e-9)


def desired(
    metrics: Sequence[Metric], status_replicas: int, behavior: Behavior
) -> tuple[int, tuple[int, ...]]:
    """Rules 1 and 2: each metric's proposal under its direction's tolerance, and the largest.

    Metrics are (value, target, type) triples, one per trigger; with separate tolerances
    (KEP-4951) the direction the ratio points picks the tolerance.
    """
    up_tol, down_tol = behavior.scale_up.tolerance, behavior.scale_down.tolerance
    proposals = []
    for value, target, kind in metrics:
        ratio_up = status_replicas == 0 or value > target * status_replicas
        proposals.append(
            metric_proposal(value, target, status_replicas, up_tol if ratio_up else down_tol, kind)
        )
    return max(proposals), tuple(proposals)


# HpaStep.limited_by -> the condition a real HPA reports for it (status.conditions)
_CONDITIONS: Mapping[str, tuple[str, str, str]] = {
    "scale_up_limit": ("ScalingLimited", "True", "ScaleUpLimit"),
    "scale_down_limit": ("ScalingLimited", "True", "ScaleDownLimit"),
    "max": ("ScalingLimited", "True", "TooManyReplicas"),
    "min": ("ScalingLimited", "True", "TooFewReplicas"),
}


@dataclass(frozen=True, slots=True)
class HpaStep:
    """One HPA sync's result: the new replicas, what the metrics asked, and what limited it."""

    replicas: int  # the new spec.replicas
    desired: int  # max over metrics, before stabilization and limits
    proposals: tuple[int, ...]
    limited_by: str  # "", "stabilization", "scale_up_limit", "scale_down_limit", "min", "max"


@dataclass
class Hpa:
    """One HPA's state: past recommendations and scale events, and the last sync's result."""

    min_replicas: int
    max_replicas: int
    behavior: Behavior = field(default_factory=Behavior)
    last: HpaStep | None = None  # the last sync's result, None before the first
    _recommendations: deque[tuple[float, int]] = field(default_factory=deque)
    _up_events: deque[tuple[float, int]] = field(default_factory=deque)
    _down_events: deque[tuple[float, int]] = field(default_factory=deque)

    def _prune(self, now: float) -> None:
        keep = max(
            self.behavior.scale_up.stabilization_window_s, self.behavior.scale_down.stabilization_window_s
        )
        while self._recommendations and self._recommendations[0][0] <= now - keep:
            self._recommendations.popleft()
        longest = max(
            (
                p.period_seconds
                for r in (self.behavior.scale_up, self.behavior.scale_down)
                for p in r.policies
            ),
            default=0,
        )
        for events in (self._up_events, self._down_events):
            while events and events[0][0] <= now - longest:
                events.popleft()

    @staticmethod
    def _changed(events: deque[tuple[float, int]], now: float, period: int) -> int:
        return sum(change for t, change in events if t > now - period)

    def _period_start(self, current: int, now: float, period: int) -> int:
        """The replica count at the start of the last ``period`` seconds (the policies' base)."""
        return (
            current
            - self._changed(self._up_events, now, period)
            + self._changed(self._down_events, now, period)
        )

    def _rate_limit(self, current: int, now: float, up: bool) -> int:
        """The furthest the direction's policies let replicas go from ``current`` (rule 4)."""
        rules = self.behavior.scale_up if up else self.behavior.scale_down
        if rules.select_policy == "Disabled":
            return current
        proposals = []
        for p in rules.policies:
            start = self._period_start(current, now, p.period_seconds)
            if p.type == "Pods":
                proposals.append(start + p.value if up else start - p.value)
            elif up:
                proposals.append(math.ceil(start * (1 + p.value / 100)))
            else:
                proposals.append(int(start * (1 - p.value / 100)))
        # Max (the default) picks the policy that allows the most change: the highest count
        # up, the lowest down; Min the least.
        most, least = (max, min) if up else (min, max)
        return (least if rules.select_policy == "Min" else most)(proposals)

    def step(
        self,
        now: float,
        spec_replicas: int,
        status_replicas: int,
        metrics: Sequence[Metric],
    ) -> HpaStep:
        """One reconcile: metrics are (value, target, type) triples, one per trigger."""
        self.last = self._sync(now, spec_replicas, status_replicas, metrics)
        return self.last

    def _sync(self, now: float, spec: int, status: int, metrics: Sequence[Metric]) -> HpaStep:
        self._prune(now)
        if spec < self.min_replicas or spec > self.max_replicas:
            bounded = min(max(spec, self.min_replicas), self.max_replicas)
            self._record(now, spec, bounded)
            return HpaStep(bounded, bounded, (), "min" if bounded > spec else "max")
        if not metrics:
            return HpaStep(spec, spec, (), "")
        wanted, proposals = desired(metrics, status, self.behavior)

        # Stabilization: the recommendation is stored, then bounded by the window's extremes.
        self._recommendations.append((now, wanted))
        up_cut = now - self.behavior.scale_up.stabilization_window_s
        down_cut = now - self.behavior.scale_down.stabilization_window_s
        up_rec = min((r for t, r in self._recommendations if t > up_cut), default=wanted)
        down_rec = max((r for t, r in self._recommendations if t > down_cut), default=wanted)
        up_rec, down_rec = min(up_rec, wanted), max(down_rec, wanted)
        target = spec
        limited = ""
        target = max(target, up_rec)
        target = min(target, down_rec)
        if target != wanted:
            limited = "stabilization"

        if target > spec:
            limit = max(self._rate_limit(spec, now, up=True), spec)
            allowed = min(self.max_replicas, limit)
            if target > allowed:
                target, limited = allowed, ("max" if allowed == self.max_replicas else "scale_up_limit")
        elif target < spec:
            limit = min(self._rate_limit(spec, now, up=False), spec)
            allowed = max(self.min_replicas, limit)
            if target < allowed:
                target, limited = allowed, ("min" if allowed == self.min_replicas else "scale_down_limit")
        self._record(now, spec, target)
        return HpaStep(target, wanted, proposals, limited)

    def status(
        self,
        name: str,
        namespace: str,
        current_replicas: int,
        *,
        lists_metric: bool = True,
        other_metrics: int = 0,
    ) -> HpaStatus:
        """This HPA as the API reports it (``hpa_from_json``'s reading): bounds, behavior
        tolerances, and the last sync's result with the condition a real HPA sets for it."""
        step = self.last
        conditions: tuple[tuple[str, str, str], ...] = ()
        if step is not None and step.limited_by == "stabilization":
            direction = "Down" if step.desired < step.replicas else "Up"
            conditions = (("AbleToScale", "True", f"Scale{direction}Stabilized"),)
        elif step is not None and step.limited_by in _CONDITIONS:
            conditions = (_CONDITIONS[step.limited_by],)
        return HpaStatus(
            name=name,
            namespace=namespace,
            lists_metric=lists_metric,
            other_metrics=other_metrics,
            min_replicas=self.min_replicas,
            max_replicas=self.max_replicas,
            current_replicas=current_replicas,
            desired_replicas=None if step is None else step.replicas,
            conditions=conditions,
            scale_up_tolerance=self.behavior.scale_up.tolerance,
            scale_down_tolerance=self.behavior.scale_down.tolerance,
        )

    def _record(self, now: float, before: int, after: int) -> None:
        if after > before:
            self._up_events.append((now, after - before))
        elif after < before:
            self._down_events.append((now, before - after))
