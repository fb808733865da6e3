"""Properties of the combined decision, for any inputs hypothesis can find."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.config import engine_for
from scaler.model import ClampKind, Observation

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

policies = st.fixed_dictionaries(
    {
        "minReplicas": st.integers(1, 10),
        "extra": st.integers(0, 30),
        "targetQueuePerReplica": st.sampled_from(["0.5", "1", "5", "10", "50"]),
        "tokens": st.booleans(),
        "maxPendingReplicas": st.integers(0, 3),
        "gpuCheck": st.booleans(),
        "gpuCheckFailure": st.sampled_from(["open", "closed"]),
        "prewarm": st.integers(0, 40),
    }
)

observations = st.fixed_dictionaries(
    {
        "queue_waiting": st.none() | st.floats(0, 1e5),
        "prompt_tokens_per_s": st.none() | st.floats(0, 1e7),
        "generation_tokens_per_s": st.none() | st.floats(0, 1e6),
        "requests_running": st.none() | st.floats(0, 1e4),
        "current_replicas": st.none() | st.integers(0, 60),
        "pending_replicas": st.integers(0, 10),
        "gpu_schedulable_replicas": st.none() | st.integers(0, 60),
    }
)


def metadata(p: dict[str, object]) -> dict[str, str]:
    """ScaledObject metadata for a drawn policy, keeping maxPendingReplicas and pre-warm in range."""
    md = {
        "minReplicas": str(p["minReplicas"]),
        "maxReplicas": str(int(p["minReplicas"]) + int(p["extra"])),  # type: ignore[call-overload]
        "targetQueuePerReplica": str(p["targetQueuePerReplica"]),
        "maxPendingReplicas": str(min(int(p["maxPendingReplicas"]), int(p["minReplicas"]) + int(p["extra"]))),  # type: ignore[call-overload]
        "gpuCheck": str(p["gpuCheck"]).lower(),
        "gpuCheckFailure": str(p["gpuCheckFailure"]),
    }
    if p["tokens"]:
        md["promptTokensPerSecondPerReplica"] = "9000"
        md["generationTokensPerSecondPerReplica"] = "1800"
    prewarm = int(p["prewarm"])  # type: ignore[call-overload]
    if 0 < prewarm <= int(md["maxReplicas"]):
        md.update({"prewarmStart": "0 11 * * *", "prewarmEnd": "0 13 * * *", "prewarmReplicas": str(prewarm)})
    return md


def observation(o: dict[str, object], now: datetime = NOW) -> Observation:
    """An Observation from drawn fields, with pending replicas capped at the current replicas."""
    current = o["current_replicas"]
    pending = min(int(o["pending_replicas"]), int(current)) if current is not None else 0  # type: ignore[call-overload]
    return Observation(now=now, **{**o, "pending_replicas": pending})  # type: ignore[arg-type]


@settings(max_examples=400, deadline=None)
@given(policies, observations)
def test_target_within_bounds_never_zero(p: dict[str, object], o: dict[str, object]) -> None:
    """The target is at least 1, within min/max replicas, and its binding signal is a proposal."""
    engine = engine_for(metadata(p))
    d = engine.decide(observation(o))
    assert d.replicas >= 1
    assert engine.spec.min_replicas <= d.replicas <= engine.spec.max_replicas
    assert d.binding.value in d.proposals


@settings(max_examples=400, deadline=None)
@given(policies, observations)
def test_never_above_gpu_capacity_unless_the_floor_forces_it(
    p: dict[str, object], o: dict[str, object]
) -> None:
    """With the GPU check on, the target exceeds GPU capacity only when the floor forces it."""
    engine = engine_for(metadata(p))
    obs = observation(o)
    d = engine.decide(obs)
    policy = engine.spec
    if not policy.gpu_check or obs.gpu_schedulable_replicas is None or obs.current_replicas is None:
        return
    capacity = (
        obs.current_replicas
        - obs.pending_replicas
        + obs.gpu_schedulable_replicas
        + policy.max_pending_replicas
    )
    if d.replicas > capacity:
        assert d.replicas == policy.min_replicas
        assert any(c.kind is ClampKind.FLOOR_OVER_GPU for c in d.clamps)
    raw = max(d.proposals.values())
    if min(raw, policy.max_replicas) > capacity:
        assert any(c.kind is ClampKind.GPU_INVENTORY for c in d.clamps), d.reason


@settings(max_examples=300, deadline=None)
@given(policies, observations, st.floats(0, 1e4), st.floats(0, 1e4))
def test_monotone_in_queue_depth(p: dict[str, object], o: dict[str, object], a: float, b: float) -> None:
    """A deeper queue never gives fewer replicas, all else equal."""
    low, high = sorted((a, b))
    md = metadata(p)
    d_low = engine_for(md).decide(observation({**o, "queue_waiting": low}))
    d_high = engine_for(md).decide(observation({**o, "queue_waiting": high}))
    assert d_low.replicas <= d_high.replicas


@settings(max_examples=200, deadline=None)
@given(policies, st.lists(observations, min_size=1, max_size=12))
def test_equal_inputs_in_equal_order_give_equal_decisions(
    p: dict[str, object], sequence: list[dict[str, object]]
) -> None:
    """Two engines fed the same observations in the same order make the same decisions."""
    md = metadata(p)
    first, second = engine_for(md), engine_for(md)
    for i, o in enumerate(sequence):
        obs = observation(o, NOW + timedelta(seconds=15 * i))
        assert first.decide(obs) == second.decide(obs)


@settings(max_examples=200, deadline=None)
@given(
    policies,
    observations,
    st.sampled_from(["queue_waiting", "prompt_tokens_per_s", "generation_tokens_per_s", "requests_running"]),
)
def test_a_missing_input_never_lowers_the_target(
    p: dict[str, object], o: dict[str, object], field: str
) -> None:
    """Losing one demand input never lowers the target below the decision made with it."""
    md = metadata(p)
    engine = engine_for(md)
    complete = {
        **o,
        "queue_waiting": o["queue_waiting"] or 0.0,
        "prompt_tokens_per_s": o["prompt_tokens_per_s"] or 0.0,
        "generation_tokens_per_s": o["generation_tokens_per_s"] or 0.0,
        "requests_running": o["requests_running"] or 0.0,
    }
    before = engine.decide(observation(complete))
    after = engine.decide(observation({**complete, field: None}, NOW + timedelta(seconds=15)))
    # same capacity inputs, one demand input gone: the target may only rise (pre-warm), never fall
    assert after.replicas >= before.replicas
