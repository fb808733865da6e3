"""Did the decision land? What the Deployment runs against what the scaler asked, and why. Pure.

The scaler decides a target; KEDA serves it to the HPA it created for the ScaledObject, and
the HPA sets the Deployment's ``spec.replicas``. Each refresh compares the target decided at
the previous refresh (the one the HPA has had time to read) with the Deployment's replicas:

    gap = previous target - spec.replicas

A gap for one HPA sync is a decision on its way; a gap that lasts has a cause the scaler
can read from the API, the first of these that applies:

======================  ========================================================================
``hpa_unknown``         the HPAs cannot be read (a ClusterRole without ``horizontalpodautoscalers``,
                        or their watch failing); only KEDA's fallback is checked
``no_hpa``              no HPA for the ScaledObject (KEDA names it ``keda-hpa-<name>``)
``metric_missing``      the HPA no longer lists this scaler's external metric: KEDA (before 2.20)
                        rewrote it while the scaler was unreachable (KEDA issue #7729)
``fallback``            the ScaledObject's ``Fallback`` condition is True: KEDA serves its
                        fallback replicas instead of the scaler's
``other_trigger``       the HPA has other metrics and wants more than the scaler (max over triggers)
``max`` / ``min``       the target is beyond the HPA's ``maxReplicas`` / ``minReplicas``
``tolerance``           within the HPA's tolerance of the current replicas (below)
``stabilization``       the HPA reports a stabilization window holding the change
``rate_limit``          the HPA reports a scale-up or scale-down limit (its ``behavior`` policies)
``in_flight``           younger than ``IN_FLIGHT_S`` (a KEDA poll and an HPA sync)
``unexplained``         none of the above
======================  ========================================================================

*Example*: after a 90 s outage of the scaler, KEDA 2.7 rewrote the HPA to a CPU target; the
scaler asks for 3, the Deployment stays at 4: ``gap = -1``, reason ``metric_missing``, and
the alert fires once the gap has lasted longer than one cold start.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from scaler.model import HpaStatus, Landing, Observation

METRIC_NAME = "llm-inference-replicas"  # the external metric this scaler serves (KEDA prefixes s<i>-)
IN_FLIGHT_S = 45.0  # a KEDA poll (15 s), an HPA sync (15 s), and a refresh of margin
TOLERANCE = 0.1  # kube-controller-manager --horizontal-pod-autoscaler-tolerance, the default
# Reasons the HPA's own rules do not explain: a gap with one of these that lasts longer than
# one cold start is the LLMScalerDecisionNotLanded alert (manifests/monitoring/).
ALERTING = frozenset({"hpa_unknown", "no_hpa", "metric_missing", "fallback", "max", "min", "unexplained"})


def _obj(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ---- the HPA's tolerance -------------------------------------------------------------------
#
# The HPA leaves the replicas alone while its usage ratio (metric / (target * replicas)) is
# within the tolerance of 1: 0.1 cluster-wide (--horizontal-pod-autoscaler-tolerance), or
# per HPA and direction where the cluster has KEP-4951 (Kubernetes 1.33 alpha, 1.35 beta)
# and KEDA passes it through (2.18+): spec.behavior.scaleUp.tolerance / scaleDown.tolerance.
# With an AverageValue target of 1 per replica the ratio is target / current. *Example*: at
# 10 replicas and the default, 11 (ratio 1.1) and 9 (0.9) do not land; 12 and 8 do.


def within_tolerance(ratio: float, up: float = TOLERANCE, down: float = TOLERANCE) -> bool:
    """The HPA's tolerance test on a usage ratio: ``1 - down <= ratio <= 1 + up``.

    The comparison Kubernetes makes since 1.33 (per-direction tolerances), in the same
    float arithmetic, so a ratio of exactly 1.1 is within 0.1. Before 1.33 it tested
    ``|1 - ratio| <= tolerance``, which in float arithmetic puts exactly 1.1 just outside;
    that edge is the only difference. The policy, the decision trace and the HPA model
    (``scaler.hpa``) all use this one test.
    """
    return 1.0 - down <= ratio <= 1.0 + up


def tolerances(hpa: HpaStatus | None) -> tuple[float, float]:
    """(scale-up, scale-down) tolerance the HPA applies: its behavior's, else the default 0.1."""
    if hpa is None:
        return TOLERANCE, TOLERANCE
    up, down = hpa.scale_up_tolerance, hpa.scale_down_tolerance
    return (TOLERANCE if up is None else up), (TOLERANCE if down is None else down)


def within_hpa_tolerance(
    target: int, current: int | None, tolerance: tuple[float, float] = (TOLERANCE, TOLERANCE)
) -> bool:
    """True when the HPA would ignore this change: ``target / current`` is within its tolerance."""
    if not current or target == current:
        return False
    return within_tolerance(target / current, *tolerance)


def landing_step_up(current: int, tolerance: float = TOLERANCE) -> int:
    """The smallest replica count above ``current`` that the HPA acts on.

    *Example*: from 10 with the default 0.1, 11 is within (11/10 = 1.1) and 12 is not: 12.
    From 9, 10 is already outside (1.11): one replica lands.
    """
    target = current + 1
    while within_hpa_tolerance(target, current, (tolerance, tolerance)):
        target += 1
    return target


def landing_step_down(current: int, tolerance: float = TOLERANCE) -> int:
    """The largest replica count below ``current`` that the HPA acts on (outside its tolerance).

    *Example*: from 13, 12 is within 10% (12/13 = 0.92) and 11 is not (0.85): the smallest
    step down that lands is to 11.
    """
    target = current - 1
    while target > 1 and within_hpa_tolerance(target, current, (tolerance, tolerance)):
        target -= 1
    return max(1, target)


def quantity(value: Any) -> float | None:
    """A resource.Quantity as the HPA's tolerance is written ("0", 0.05, "50m"); None if unreadable."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if value >= 0 else None
    if isinstance(value, str):
        text = value.strip()
        scale = 1e-3 if text.endswith("m") else 1.0
        try:
            number = float(text[:-1] if scale != 1.0 else text) * scale
        except ValueError:
            return None
        return number if number >= 0 and math.isfinite(number) else None
    return None


def hpa_from_json(obj: Mapping[str, Any]) -> HpaStatus:
    """An autoscaling/v2 HorizontalPodAutoscaler, as the landing monitor reads it."""
    meta, spec, status = _obj(obj.get("metadata")), _obj(obj.get("spec")), _obj(obj.get("status"))
    external: list[str] = []
    others = 0
    for raw in spec.get("metrics") or []:
        metric = _obj(raw)
        name = str(_obj(_obj(metric.get("external")).get("metric")).get("name", ""))
        if metric.get("type") == "External" and name.endswith(METRIC_NAME):
            external.append(name)
        else:
            others += 1
    conditions = tuple(
        (str(_obj(c).get("type", "")), str(_obj(c).get("status", "")), str(_obj(c).get("reason", "")))
        for c in status.get("conditions") or []
    )
    behavior = _obj(spec.get("behavior"))
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
        scale_up_tolerance=quantity(_obj(behavior.get("scaleUp")).get("tolerance")),
        scale_down_tolerance=quantity(_obj(behavior.get("scaleDown")).get("tolerance")),
    )


def _reason(target: int, landed: int, obs: Observation) -> str:  # noqa: PLR0911 - one return per cause, in order
    hpa = obs.hpa
    if hpa is None and not obs.hpa_read:
        return "fallback" if obs.scaledobject_fallback else "hpa_unknown"
    if hpa is None:
        return "no_hpa"
    if not hpa.lists_metric:
        return "metric_missing"
    if obs.scaledobject_fallback:
        return "fallback"
    if hpa.other_metrics and hpa.desired_replicas is not None and hpa.desired_replicas > target:
        return "other_trigger"
    if hpa.max_replicas is not None and target > hpa.max_replicas and landed >= hpa.max_replicas:
        return "max"
    if hpa.min_replicas is not None and target < hpa.min_replicas and landed <= hpa.min_replicas:
        return "min"
    if within_hpa_tolerance(target, landed, tolerances(hpa)):
        return "tolerance"
    reasons = {reason for kind, state, reason in hpa.conditions if state == "True" or kind == "AbleToScale"}
    if reasons & {"ScaleDownStabilized", "ScaleUpStabilized"}:
        return "stabilization"
    if reasons & {"ScaleUpLimit", "ScaleDownLimit"}:
        return "rate_limit"
    return "unexplained"


WHY = {
    "hpa_unknown": "the HPAs cannot be read (the ClusterRole needs get, list and watch on"
    " horizontalpodautoscalers), so the scaler cannot say why",
    "no_hpa": "no HPA found for the ScaledObject",
    "metric_missing": "the HPA no longer lists this scaler's external metric (KEDA before 2.20 rewrites it"
    " while the scaler is unreachable, KEDA issue #7729; delete the HPA and KEDA recreates it)",
    "fallback": "KEDA's fallback is active: it serves its fallback replicas, not the scaler's target",
    "other_trigger": "another trigger of the ScaledObject asks for more (the HPA takes the largest)",
    "max": "the HPA's maxReplicas holds it",
    "min": "the HPA's minReplicas holds it",
    "tolerance": "within the HPA's tolerance of the current replicas",
    "stabilization": "the HPA's stabilization window holds it",
    "rate_limit": "the HPA's scaling policy limits the step",
    "in_flight": "on its way (one KEDA poll and HPA sync)",
    "unexplained": "none of the HPA's rules the scaler can read explains it",
}


class LandingMonitor:
    """Per-target: the previous target, and since when the Deployment has been stuck short of it.

    The clock starts when the Deployment first differs from the target and restarts
    whenever ``spec.replicas`` moves toward the target, so a long ramp that the HPA follows
    one sync behind is always in flight, and only a Deployment that stopped following ages.
    """

    def __init__(self) -> None:
        self._previous: int | None = None
        self._since: float | None = None
        self._landed: int | None = None  # spec.replicas at the previous refresh

    def remember(self, target: int) -> None:
        """The target just decided: what the next refresh expects to have landed."""
        self._previous = target

    def observe(self, obs: Observation) -> Landing | None:
        """Compare the previous decision's target with what the Deployment runs now."""
        previous = self._previous
        landed, before = obs.deployment_replicas, self._landed
        self._landed = landed
        if previous is None or landed is None:
            self._since = None
            return None
        t = obs.timestamp
        gap = previous - landed
        if gap == 0:
            self._since = None
            return Landing(landed, obs.ready_replicas, previous, 0, "landed", 0.0, "the target landed")
        moved_toward = before is not None and landed != before and (landed > before) == (previous > before)
        if self._since is None or moved_toward:
            self._since = t
        age = t - self._since
        reason = _reason(previous, landed, obs)
        if reason not in ("no_hpa", "metric_missing", "fallback", "other_trigger") and age < IN_FLIGHT_S:
            reason = "in_flight"
        explanation = (
            f"Deployment at {landed}, target {previous} for {age:.0f}s: {WHY[reason]}"
            if math.isfinite(age)
            else WHY[reason]
        )
        return Landing(landed, obs.ready_replicas, previous, gap, reason, age, explanation)
