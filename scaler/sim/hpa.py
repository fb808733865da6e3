"""The HorizontalPodAutoscaler's controller, simulated: metrics in, replicas out, sync by sync. Pure.

The replay and the demo turn this scaler's metric into replicas with it, as the HPA KEDA creates
does; the facts it applies (the tolerance, the ``Behavior`` a ScaledObject writes, how a read HPA
is reported) are ``scaler.hpa``'s.

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

from scaler.hpa import (
    DEFAULT_TOLERANCE,
    Behavior,
    Metric,
    MetricType,
    within_tolerance,
)
from scaler.model import HpaStatus


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
