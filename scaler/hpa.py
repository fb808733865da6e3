"""The HorizontalPodAutoscaler KEDA creates for a ScaledObject: the facts the scaler knows of it. Pure.

* **Its metric**: KEDA hands the HPA this scaler's answer as one external metric,
  ``METRIC_NAME`` (prefixed ``s<i>-`` by KEDA), the name the gRPC service serves.
* **Reading one**: ``hpa_from_json`` turns an autoscaling/v2 HorizontalPodAutoscaler into
  the ``HpaStatus`` the landing monitor and the policy read; the simulated one
  (``scaler.sim.hpa.Hpa.status``) reports the same way.
* **Its tolerance**: ``DEFAULT_TOLERANCE`` (written here only), the test on a usage ratio
  (``within_tolerance``), the tolerance a read HPA applies (``tolerances``), and the
  smallest step up that lands (``landing_step_up``). The policy, the landing monitor, the
  decision series and the simulated controller all ask these.
* **Its rules as written** (``Behavior``: the ScaledObject's
  ``advanced.horizontalPodAutoscalerConfig.behavior`` parsed, with Kubernetes' defaults). How a
  controller applies them, sync by sync, is the simulator's (``scaler.sim.hpa``: the replay
  and the demo turn metrics into replicas with it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
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
