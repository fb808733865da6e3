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
``tolerance``           within the HPA's tolerance of the current replicas (``scaler.hpa``)
``stabilization``       the HPA reports a stabilization window holding the change
``rate_limit``          the HPA reports a scale-up or scale-down limit (its ``behavior`` policies)
``in_flight``           younger than ``IN_FLIGHT_S`` (a refresh and an HPA sync)
``unexplained``         none of the above
======================  ========================================================================

*Example*: after a 90 s outage of the scaler, KEDA 2.7 rewrote the HPA to a CPU target; the
scaler asks for 3, the Deployment stays at 4: ``gap = -1``, reason ``metric_missing``, and
the alert fires once the gap has lasted longer than one cold start.
"""

from __future__ import annotations

import math

from scaler.hpa import tolerances, within_hpa_tolerance
from scaler.model import Landing, Observation

# A refresh (15 s), an HPA sync (15 s: the HPA's query reaches GetMetrics through KEDA's metrics
# server whatever pollingInterval is, under every KEDA version, docs/keda.md), and a margin.
IN_FLIGHT_S = 45.0
# Reasons the HPA's own rules do not explain: a gap with one of these that lasts longer than
# one cold start is the LLMScalerDecisionNotLanded alert (manifests/monitoring/), and leaves the
# target inert (``inert``, scaler.inert's not_landed).
ALERTING = frozenset({"hpa_unknown", "no_hpa", "metric_missing", "fallback", "max", "min", "unexplained"})


def inert(landing: Landing | None, lead_s: float | None) -> bool:
    """Whether a gap leaves the target inert: a reason the HPA's rules do not explain (``ALERTING``)
    that has lasted longer than one cold start (``lead_s``), the LLMScalerDecisionNotLanded rule."""
    return (
        landing is not None and lead_s is not None and landing.reason in ALERTING and landing.since_s > lead_s
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
    "in_flight": "on its way (one refresh and HPA sync)",
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
