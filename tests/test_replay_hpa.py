"""The HPA model's rules, as tables: AverageValue with tolerance, max over metrics,
stabilization, rate limits, bounds, and behavior parsing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scaler.config import parse_metadata
from scaler.decider.combine import combine
from scaler.decider.landing import IN_FLIGHT_S, LandingMonitor
from scaler.hpa import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    Behavior,
    BehaviorError,
    Metric,
    ScalingPolicy,
    hpa_from_json,
    within_tolerance,
)
from scaler.model import HpaStatus, Observation, Proposal, Signal
from scaler.sim.hpa import Hpa, metric_proposal
from tests import k8s_double as k8s


@pytest.mark.parametrize(
    ("value", "target", "status", "expected", "why"),
    [
        (400, 10, 4, 40, "ceil(400 / 10)"),
        (41, 10, 3, 5, "ratio 41 / 30 = 1.37: ceil(4.1)"),
        (41, 10, 4, 4, "ratio 41 / 40 = 1.025 is within tolerance: keep 4"),
        (10.5, 1, 10, 10, "ratio 1.05 is within the 10% tolerance: keep status.replicas"),
        (10.9, 1, 10, 10, "ratio 1.09 is still within tolerance"),
        (11.2, 1, 10, 12, "ratio 1.12 leaves the tolerance: ceil(11.2)"),
        (9, 1, 10, 10, "ratio 0.9: within tolerance, no scale-down"),
        (8.9, 1, 10, 9, "ratio 0.89: scale down to ceil(8.9)"),
        (0, 50, 3, 0, "no waiting requests ask for zero (the floor clamps later)"),
        (3, 1, 0, 3, "no pods yet: no ratio, plain ceil"),
    ],
    ids=[
        "plain-ceil",
        "ratio-1.37-scales-up",
        "ratio-1.025-holds",
        "ratio-1.05-holds",
        "ratio-1.09-holds",
        "ratio-1.12-scales-up",
        "ratio-0.9-holds",
        "ratio-0.89-scales-down",
        "zero-waiting",
        "no-pods-yet",
    ],
)
def test_average_value_with_tolerance(
    value: float, target: float, status: int, expected: int, why: str
) -> None:
    """AverageValue asks for ceil(value / target), but a ratio within 10% keeps status.replicas."""
    assert metric_proposal(value, target, status) == expected, why


def test_value_metric_type_scales_current_replicas() -> None:
    """A Value metric scales the current replicas by value over target."""
    # KEDA's docs: Value with 3 replicas, metric 20 over threshold 5 -> 3 * 20 / 5 = 12.
    assert metric_proposal(20, 5, 3, metric_type="Value") == 12


def avg(value: float, target: float = 1.0) -> Metric:
    """An AverageValue metric triple (value, target, type) for Hpa.step."""
    return (value, target, "AverageValue")


def test_max_over_metrics() -> None:
    """With several metrics the HPA takes the largest proposal."""
    hpa = Hpa(2, 16)
    step = hpa.step(0, 4, 4, [avg(120, 50), avg(3), avg(7)])  # ceil(2.4)=3, 3 (tolerance? no: 0.75), 7
    assert step.proposals == (3, 3, 7)
    assert step.desired == 7
    assert step.replicas == 7


@pytest.mark.parametrize(
    ("current", "desired", "expected"),
    [
        (
            2,
            20,
            6,
        ),  # max(2 * 2, 2 + 4) = 6
        (3, 20, 7),  # max(6, 7)
        (4, 20, 8),  # max(8, 8)
        (10, 40, 20),  # doubling wins over +4
        (10, 12, 12),  # within the limit
    ],
)
def test_default_scale_up_limit(current: int, desired: int, expected: int) -> None:
    """By default a scale-up is limited to the larger of doubling and four more pods."""
    hpa = Hpa(1, 100)
    assert hpa.step(0, current, current, [avg(desired)]).replicas == expected


def test_scale_up_limit_counts_the_last_period() -> None:
    """The scale-up limit counts from the replicas at the start of the last 15 s period."""
    hpa = Hpa(1, 100)
    assert hpa.step(0, 2, 2, [avg(50)]).replicas == 6
    # 10 s later the period (15 s) started at 2 replicas: still at most 6.
    assert hpa.step(10, 6, 6, [avg(50)]).replicas == 6
    # 16 s after the first step the window no longer holds it: from 6, max(12, 10) = 12.
    assert hpa.step(16, 6, 6, [avg(50)]).replicas == 12


def test_scale_down_stabilization_keeps_the_highest_recent_recommendation() -> None:
    """Scale-down stabilization keeps the highest recommendation of the last 300 s."""
    hpa = Hpa(1, 100)
    assert hpa.step(0, 10, 10, [avg(10)]).replicas == 10
    # Demand falls to 3: the last 300 s recommended 10, so 10 stays.
    assert hpa.step(15, 10, 10, [avg(3)]).replicas == 10
    assert hpa.step(299, 10, 10, [avg(3)]).replicas == 10
    # At 300 s the recommendation of t=0 has left the window: down to 3.
    step = hpa.step(300, 10, 10, [avg(3)])
    assert step.replicas == 3


def test_scale_down_window_from_behavior() -> None:
    """A stabilizationWindowSeconds of 0 in behavior lets the scale-down happen at once."""
    behavior = Behavior.from_spec({"scaleDown": {"stabilizationWindowSeconds": 0}})
    hpa = Hpa(2, 16, behavior)
    hpa.step(0, 10, 10, [avg(10)])
    assert hpa.step(15, 10, 10, [avg(3)]).replicas == 3


def test_scale_down_policy_and_min_clamp() -> None:
    """A Pods scale-down policy removes at most its value per period and names the limit."""
    behavior = Behavior.from_spec(
        {
            "scaleDown": {
                "stabilizationWindowSeconds": 0,
                "policies": [{"type": "Pods", "value": 2, "periodSeconds": 60}],
            }
        }
    )
    hpa = Hpa(2, 16, behavior)
    step = hpa.step(0, 10, 10, [avg(1)])
    assert step.replicas == 8
    assert step.limited_by == "scale_down_limit"
    assert hpa.step(30, 8, 8, [avg(1)]).replicas == 8  # 2 already removed in this minute
    assert hpa.step(61, 8, 8, [avg(1)]).replicas == 6


@pytest.mark.parametrize(
    ("direction", "select", "current", "desired", "expected"),
    [
        ("scaleDown", "Max", 10, 1, 5),  # Percent 50 removes 5, Pods 1 removes 1: the most change
        ("scaleDown", "Min", 10, 1, 9),  # the least change
        ("scaleDown", "Max", 5, 1, 2),  # 5 * (1 - 0.5) = 2.5, truncated as Kubernetes does: 2, not 3
        ("scaleUp", "Max", 4, 40, 6),  # Percent 50 adds ceil(2), Pods 1 adds 1: the most change
        ("scaleUp", "Min", 4, 40, 5),
        ("scaleUp", "Max", 3, 40, 5),  # 3 * 1.5 = 4.5, rounded up: 5
    ],
    ids=["down-max", "down-min", "down-percent-truncates", "up-max", "up-min", "up-percent-rounds-up"],
)
def test_select_policy_and_percent_rounding_per_direction(
    direction: str, select: str, current: int, desired: float, expected: int
) -> None:
    """Max picks the policy allowing the most change and Min the least, each direction its own way."""
    rules = {
        "stabilizationWindowSeconds": 0,
        "selectPolicy": select,
        "policies": [
            {"type": "Percent", "value": 50, "periodSeconds": 60},
            {"type": "Pods", "value": 1, "periodSeconds": 60},
        ],
    }
    hpa = Hpa(1, 100, Behavior.from_spec({direction: rules}))
    assert hpa.step(0, current, current, [avg(desired)]).replicas == expected


@pytest.mark.parametrize(
    ("current", "desired", "expected", "limit"),
    [(10, 40, 16, "max"), (3, 0, 2, "min"), (5, 1, 2, "min")],
)
def test_bounds(current: int, desired: float, expected: int, limit: str) -> None:
    """The result is clamped to min and max replicas, naming which bound applied."""
    hpa = Hpa(2, 16, Behavior.from_spec({"scaleDown": {"stabilizationWindowSeconds": 0}}))
    step = hpa.step(0, current, current, [avg(desired)])
    assert (step.replicas, step.limited_by) == (expected, limit)


def test_disabled_scale_down() -> None:
    """selectPolicy Disabled on scaleDown keeps the replicas from going down."""
    hpa = Hpa(
        1,
        16,
        Behavior.from_spec({"scaleDown": {"selectPolicy": "Disabled", "stabilizationWindowSeconds": 0}}),
    )
    assert hpa.step(0, 8, 8, [avg(1)]).replicas == 8


def test_status_replicas_with_pending_pods_hold_a_repeated_scale_up() -> None:
    """Tolerance compares against status.replicas, Pending pods included, so the scale-up holds."""
    # 8 pods exist (3 Pending): a metric of 8.5 is within tolerance of status.replicas.
    hpa = Hpa(1, 16)
    assert hpa.step(0, 8, 8, [avg(8.5)]).replicas == 8


def test_behavior_defaults_and_parsing() -> None:
    """Behavior defaults to Kubernetes' policies, parses a spec, and refuses unknown values."""
    assert Behavior.from_spec(None) == Behavior()
    assert Behavior().scale_up == DEFAULT_SCALE_UP
    assert DEFAULT_SCALE_UP.policies == (ScalingPolicy("Percent", 100, 15), ScalingPolicy("Pods", 4, 15))
    assert DEFAULT_SCALE_DOWN.stabilization_window_s == 300
    parsed = Behavior.from_spec(
        {"scaleUp": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}}
    )
    assert parsed.scale_up.policies == (ScalingPolicy("Pods", 1, 60),)
    assert parsed.scale_down == DEFAULT_SCALE_DOWN
    with pytest.raises(BehaviorError, match="type must be Pods or Percent"):
        Behavior.from_spec({"scaleUp": {"policies": [{"type": "Replicas", "value": 1, "periodSeconds": 60}]}})
    with pytest.raises(BehaviorError, match="selectPolicy"):
        Behavior.from_spec({"scaleDown": {"selectPolicy": "Fastest"}})


@pytest.mark.parametrize(
    ("ratio", "within"),
    [(1.1, True), (0.9, True), (1.1000001, False), (0.8999999, False), (1.0, True)],
    ids=["exactly-plus-10%", "exactly-minus-10%", "just-above", "just-below", "equal"],
)
def test_the_tolerance_band_includes_its_edges(ratio: float, within: bool) -> None:
    """Kubernetes' 1.33+ comparison: 1 - down <= ratio <= 1 + up, edges included."""
    assert within_tolerance(ratio) is within


T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
TOLERANCES = {
    "unset": None,
    "scale-up-0": {"scaleUp": {"tolerance": 0}},
    "scale-down-50m": {"scaleDown": {"tolerance": "50m"}},
    "up-0.2-down-0": {"scaleUp": {"tolerance": 0.2}, "scaleDown": {"tolerance": "0"}},
}


def policy_target(want: int, current: int, hpa: HpaStatus) -> int:
    """The policy alone: one proposal of ``want`` replicas at ``current`` under ``hpa``, room for all."""
    observation = Observation(
        now=T0, current_replicas=current, ready_replicas=current, gpu_schedulable_replicas=100, hpa=hpa
    )
    proposals = [Proposal(Signal.FLOOR, 1, "floor"), Proposal(Signal.QUEUE, want, "queue")]
    return combine(proposals, observation, parse_metadata({"maxReplicas": "100"}).spec).replicas


def landing_reason(target: int, current: int, hpa: HpaStatus) -> str:
    """The landing monitor's reason for ``target`` not landing at ``current``, past in-flight."""
    monitor = LandingMonitor()
    monitor.remember(target)
    landing = None
    for seconds in (0.0, IN_FLIGHT_S + 15):
        seen = Observation(
            now=T0 + timedelta(seconds=seconds),
            current_replicas=current,
            deployment_replicas=current,
            hpa=hpa,
            hpa_read=True,
        )
        landing = monitor.observe(seen)
    assert landing is not None
    return landing.reason


@pytest.mark.parametrize("behavior", TOLERANCES.values(), ids=TOLERANCES.keys())
def test_the_landing_monitor_the_policy_and_the_hpa_model_agree_on_the_tolerance(
    behavior: dict[str, Any] | None,
) -> None:
    """Read from one HPA spec, the monitor, the policy and the model see one tolerance for every step."""
    raw = k8s.hpa("llama", "inference", min_replicas=1, max_replicas=100)
    if behavior is not None:
        raw["spec"]["behavior"] = behavior
    read = hpa_from_json(raw)  # what the landing monitor and the policy read from the cluster
    applied = Behavior.from_spec(behavior)  # what the HPA model applies for the same spec
    for current in range(1, 41):
        # The model: this scaler's metric alone, from a fresh HPA (no window, no limit yet).
        holds = {
            target: Hpa(1, 100, applied).step(0, current, current, [avg(target)]).desired == current
            for target in range(1, 61)
        }
        first_move_up = next(t for t in range(current + 1, 61) if not holds[t])
        for target in range(1, 61):
            swallowed = holds[target] and target != current
            reason = landing_reason(target, current, read)
            assert (reason == "tolerance") == swallowed, (current, target, reason)
            # The policy steps a swallowed scale-up to the model's first move and holds a scale-down.
            expected = (first_move_up if target > current else current) if swallowed else target
            assert policy_target(target, current, read) == expected, (current, target)
