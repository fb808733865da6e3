"""Capacity calibration: scenarios that step ``now`` through a toy fleet, and properties.

The toy fleet is the truth the calibration must find: each request carries 1,000 prompt
and 200 generated tokens, and one replica serves 9,000 prompt plus 1,800 generated tokens
per second at its limit (added as GPU time: 5 requests/s). Served rates are capped at
what the Ready replicas serve, a queue builds beyond it, and the share of first tokens
over the objective rises steeply past 90% of capacity.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.calibration import CapacityCalibration, share_over_objective
from scaler.config import parse_metadata
from scaler.engine import Engine, HistoryPoint
from scaler.model import Capacity, Observation, Signal

T0 = datetime(2026, 12, 7, 0, 0, tzinfo=UTC)
PROMPT, GENERATED = 1000.0, 200.0  # tokens per request
TRUE_PROMPT, TRUE_GENERATION = 9000.0, 1800.0  # one replica at its limit, added as GPU time
REQUESTS_PER_REPLICA = 1.0 / (PROMPT / TRUE_PROMPT + GENERATED / TRUE_GENERATION)  # 4.5 requests/s


@dataclass
class ToyFleet:
    """Ready replicas serving a request rate: capped throughput, a queue, a TTFT tail."""

    ready: int
    waiting: float = 0.0
    spec: int | None = None  # the Deployment's replicas (Ready ones plus those still starting)

    def observe(self, now: datetime, requests_per_s: float, step_s: float = 15.0) -> Observation:
        """One refresh at ``requests_per_s``: the queue advances by ``step_s`` of excess demand."""
        capacity = self.ready * REQUESTS_PER_REPLICA
        served = min(requests_per_s, capacity)
        self.waiting = max(0.0, self.waiting + (requests_per_s - capacity) * step_s)
        load = requests_per_s / capacity  # demand over capacity
        over = 1.0 if self.waiting > self.ready else min(1.0, 0.005 * math.exp((load - 0.9) / 0.02))
        return Observation(
            now=now,
            queue_waiting=self.waiting,
            requests_running=served * 10,
            prompt_tokens_per_s=served * PROMPT,
            generation_tokens_per_s=served * GENERATED,
            current_replicas=max(self.ready, self.spec or 0),
            ready_replicas=self.ready,
            starting_replicas=max(0, (self.spec or 0) - self.ready),
            gpu_schedulable_replicas=20,
            ttft_over_objective=over,
        )


def saturated_and_calm(minute: float) -> float:
    """Requests/s for 4 replicas: 10 calm minutes at 60% of capacity, then 5 saturated at 130%."""
    return (1.3 if minute % 15 >= 10 else 0.6) * 4 * REQUESTS_PER_REPLICA


@pytest.mark.parametrize("factor", [0.5, 2.0], ids=["half-the-truth", "twice-the-truth"])
def test_configured_capacities_converge_to_the_truth_within_an_hour(factor: float) -> None:
    """Capacities configured at half or twice the truth end within 15% of it after an hour."""
    engine = Engine.from_metadata(
        {
            "promptTokensPerSecondPerReplica": str(TRUE_PROMPT * factor),
            "generationTokensPerSecondPerReplica": str(TRUE_GENERATION * factor),
        }
    )
    fleet = ToyFleet(ready=4)
    decision = None
    for step in range(4 * 60):  # one hour of 15 s refreshes
        now = T0 + timedelta(seconds=15 * step)
        decision = engine.decide(fleet.observe(now, saturated_and_calm(step / 4)))
    assert decision is not None
    assert decision.capacity is not None
    capacity = decision.capacity
    assert capacity.source == "calibrated"
    assert capacity.prompt_tokens_per_s == pytest.approx(TRUE_PROMPT, rel=0.15)
    assert capacity.generation_tokens_per_s == pytest.approx(TRUE_GENERATION, rel=0.15)
    assert capacity.overloads > 0
    assert "calibrated over" in decision.signal_reasons[Signal.TOKENS]


def test_without_capacities_the_token_signal_turns_on_and_follows_a_ramp() -> None:
    """No capacity configured: the first saturated minute measures it, then tokens lead a ramp."""
    engine = Engine.from_metadata({"minReplicas": "2", "maxReplicas": "40", "coldStartSeconds": "180"})
    fleet = ToyFleet(ready=2)
    ordered: list[tuple[datetime, int]] = []  # replicas become Ready one cold start after the order
    decisions = []
    for step in range(4 * 45):
        now = T0 + timedelta(seconds=15 * step)
        minute = step / 4
        rate = 15.0 + max(0.0, minute - 10) * 1.0  # 15 requests/s (saturating 2 replicas), then a ramp
        decision = engine.decide(fleet.observe(now, rate))
        decisions.append((minute, rate, decision))
        ordered.append((now, decision.replicas))
        ready_now = [r for t, r in ordered if t <= now - timedelta(seconds=180)]
        fleet.spec = decision.replicas
        fleet.ready = min(decision.replicas, max(2, ready_now[-1]) if ready_now else 2)
    first_on = next(m for m, _, d in decisions if d.capacity is not None and d.capacity.known)
    assert first_on < 5  # measured within minutes of the first saturated minute
    late = [(m, r, d) for m, r, d in decisions if m >= 30]
    assert all(d.proposals.get(Signal.TOKENS) is not None for _, _, d in late)
    for minute, rate, decision in late:
        need_then = math.ceil((rate + 3 * 1.0) / REQUESTS_PER_REPLICA)  # three minutes later
        assert decision.replicas >= need_then, f"minute {minute}: {decision.replicas} < {need_then}"
    targets = [d.replicas for _, _, d in late]
    assert targets[-1] > targets[0]  # it follows the ramp up


def _observation(
    t: float, ready: int | None, waiting: float | None, prompt: float | None, over: float | None
) -> Observation:
    return Observation(
        now=T0 + timedelta(seconds=t),
        queue_waiting=waiting,
        prompt_tokens_per_s=prompt,
        generation_tokens_per_s=None if prompt is None else prompt / 5,
        current_replicas=ready,
        ready_replicas=ready,
        ttft_over_objective=over,
    )


READY = st.integers(1, 12)
RATE = st.floats(0, 200_000)
OVER = st.one_of(st.none(), st.floats(0, 1))
STEPS = st.lists(st.tuples(READY, st.floats(0, 500), RATE, OVER), min_size=1, max_size=60)
POLICIES = st.sampled_from(
    [
        {"promptTokensPerSecondPerReplica": "9000", "generationTokensPerSecondPerReplica": "1800"},
        {"promptTokensPerSecondPerReplica": "9000"},
        {},
    ]
)


def _demand(capacity: Capacity) -> float:
    """Replicas the calibrated capacity asks for a fixed load (a large one: 90,000 prompt tokens/s)."""
    if not capacity.known:
        return math.inf
    return capacity.busy(90_000.0, 18_000.0) / capacity.usable_fraction


def _steady_run(calibration: CapacityCalibration, t: float, ready: int, prompt: float, over: float) -> float:
    """Five refreshes with the same Ready replicas: the rate window is steady afterwards."""
    for _ in range(5):
        t += 15.0
        calibration.observe(_observation(t, ready, 0.0, prompt, over))
    return t


@settings(max_examples=300, deadline=None)
@given(
    metadata=POLICIES,
    steps=STEPS,
    ready=READY,
    per_replica=st.floats(100, 20_000),
    over=st.floats(0, 1),
    missing=st.sampled_from(["ready", "waiting", "rates"]),
)
def test_calibration_never_moves_on_missing_inputs(
    metadata: dict[str, str],
    steps: list[tuple[int, float, float, float | None]],
    ready: int,
    per_replica: float,
    over: float,
    missing: str,
) -> None:
    """Whatever was learned, a refresh with Ready replicas, queue or a rate unknown changes nothing.

    The refresh before the gap is steady (same Ready replicas for a rate window), so the
    same refresh with its inputs complete would have moved the calibration.
    """
    calibration = CapacityCalibration(parse_metadata(metadata))
    t = 0.0
    for r, waiting, prompt, o in steps:
        t += 15.0
        calibration.observe(_observation(t, r, waiting, prompt, o))
    t = _steady_run(calibration, t, ready, per_replica * ready, over)
    before = calibration.capacity()
    gap = _observation(
        t + 15.0,
        None if missing == "ready" else ready,
        None if missing == "waiting" else 0.0,
        None if missing == "rates" else per_replica * ready,
        over,
    )
    calibration.observe(gap)
    assert calibration.capacity() == before


@settings(max_examples=300, deadline=None)
@given(
    metadata=POLICIES,
    prefix=STEPS,
    ready=st.integers(2, 12),
    per_replica=st.floats(100, 20_000),
    growth=st.lists(
        st.tuples(st.floats(0.001, 0.1), st.floats(0.5, 3), st.floats(0, 0.005)), min_size=2, max_size=30
    ),
)
def test_calibration_never_lowers_the_target_while_the_queue_grows(
    metadata: dict[str, str],
    prefix: list[tuple[int, float, float, float | None]],
    ready: int,
    per_replica: float,
    growth: list[tuple[float, float, float]],
) -> None:
    """While the queue grows, what the calibrated capacity asks for a given load never falls.

    The queue grows slowly enough to stay under one request per Ready replica (beyond that
    the refresh counts as saturated, not as evidence), the Ready replicas are steady and
    the TTFT is within the objective: refreshes that would otherwise raise the usable load.
    """
    calibration = CapacityCalibration(parse_metadata(metadata))
    t = 0.0
    for r, waiting, prompt, o in prefix:
        t += 15.0
        calibration.observe(_observation(t, r, waiting, prompt, o))
    t = _steady_run(calibration, t, ready, per_replica * ready, 0.0)
    waiting = 0.01
    previous = _demand(calibration.capacity())
    for step, load, over in growth:
        t += 15.0
        waiting = min(waiting + step, ready - 0.5)
        calibration.observe(_observation(t, ready, waiting, load * per_replica * ready, over))
        now = _demand(calibration.capacity())
        if math.isfinite(previous):
            assert now >= previous * (1 - 1e-12)
        previous = now


@pytest.mark.parametrize(
    ("objective", "p95", "p99", "expected"),
    [
        (2.0, 0.9, 1.5, 0.05 * math.exp(-math.log(5) * 1.1 / 0.6)),  # the docstring's example, 0.26%
        (1.5, 0.9, 1.5, 0.01),  # at the p99: 1%
        (0.9, 0.9, 1.5, 0.05),  # at the p95: 5%
        (0.5, 2.0, 2.1, 1.0),  # far below both: everything, clamped
        (2.0, 1.0, 1.0, 0.0),  # degenerate quantiles above the objective...
        (1.0, 1.0, 1.0, 0.05),  # ...and at it
    ],
    ids=["example", "at-p99", "at-p95", "clamped", "flat-above", "flat-at"],
)
def test_share_over_objective_from_quantiles(
    objective: float, p95: float, p99: float, expected: float
) -> None:
    """Without histogram buckets, an exponential tail through (p95, 5%) and (p99, 1%)."""
    assert share_over_objective(objective, p95, p99) == pytest.approx(expected)


def test_the_usable_load_rises_slowly_with_room_and_falls_fast_on_misses() -> None:
    """At the plan, a refresh with no request over the objective raises u far less than a miss lowers it.

    One informative refresh each (the first after the Ready replicas have been steady for a
    rate window): ``ln u`` moves by ``ln 2 / 15 min * 15 s`` up, and nine times that down for
    a refresh with 5% over the objective (budget 0.5%: an error of -9).
    """
    rate = math.log(2.0) / 900.0 * 15.0
    for over, expected in ((0.0, rate), (0.05, -9 * rate)):
        calibration = CapacityCalibration(parse_metadata({"promptTokensPerSecondPerReplica": "1000"}))
        for step in range(5):  # 4 Ready replicas carrying 0.78 of a replica's prior capacity each
            calibration.observe(_observation(15.0 * step, 4, 0.0, 4 * 0.78 * 1000, over))
        capacity = calibration.capacity()
        assert capacity.samples == 1  # only the refresh at 60 s: the window had filled
        assert math.log(capacity.usable_fraction / 0.8) == pytest.approx(expected)


def _point(obs: Observation) -> HistoryPoint:
    """What Prometheus keeps of a refresh: the rates, the queue, the pods, the TTFT."""
    return HistoryPoint(
        obs.timestamp,
        obs.prompt_tokens_per_s,
        obs.generation_tokens_per_s,
        queue_waiting=obs.queue_waiting,
        ready_replicas=obs.ready_replicas,
        ttft_over_objective=obs.ttft_over_objective,
        requests_per_s=obs.requests_per_s,
    )


def test_a_restart_warmed_from_history_decides_within_one_replica_of_the_old_process() -> None:
    """Two hours of calibration on capacities twice too high; a new process warmed from the
    last hour of history holds the calibrated capacity and decides within one replica.

    A process that is not warmed, given the same next observation, trusts the prior and
    asks for fewer replicas than the fleet needs: the warm-up is what closes the gap.
    """
    metadata = {
        "promptTokensPerSecondPerReplica": str(TRUE_PROMPT * 2),
        "generationTokensPerSecondPerReplica": str(TRUE_GENERATION * 2),
        "minReplicas": "1",
    }
    old = Engine.from_metadata(metadata)
    fleet = ToyFleet(ready=4)
    history: list[HistoryPoint] = []
    for step in range(8 * 60):  # two hours
        now = T0 + timedelta(seconds=15 * step)
        obs = fleet.observe(now, saturated_and_calm(step / 4))
        old.decide(obs)
        history.append(_point(obs))
    restarted, cold = Engine.from_metadata(metadata), Engine.from_metadata(metadata)
    restarted.warm(history[-4 * 60 :])  # Prometheus' last hour
    fleet.waiting = 0.0  # a calm minute: the token signal, not the queue, sets the target
    probe = fleet.observe(T0 + timedelta(seconds=15 * 8 * 60), 0.6 * 4 * REQUESTS_PER_REPLICA)
    want, got, naive = old.decide(probe), restarted.decide(probe), cold.decide(probe)
    assert got.capacity is not None
    assert got.capacity.source == "calibrated"
    assert want.capacity is not None
    assert got.capacity.prompt_tokens_per_s == pytest.approx(want.capacity.prompt_tokens_per_s, rel=0.15)
    assert abs(got.replicas - want.replicas) <= 1
    assert naive.replicas < want.replicas - 1  # without the history it would be off by more


def test_kv_cache_usage_measures_the_capacity_without_saturation() -> None:
    """Calm traffic only, capacities configured at half the truth: the KV cache's usage says
    how full each replica is, and the capacity ends within 15% of the truth in an hour."""
    engine = Engine.from_metadata(
        {
            "promptTokensPerSecondPerReplica": str(TRUE_PROMPT / 2),
            "generationTokensPerSecondPerReplica": str(TRUE_GENERATION / 2),
        }
    )
    fleet = ToyFleet(ready=4)
    rate = 0.55 * 4 * REQUESTS_PER_REPLICA
    decision = None
    for step in range(4 * 60):
        obs = fleet.observe(T0 + timedelta(seconds=15 * step), rate)
        decision = engine.decide(dataclasses.replace(obs, kv_cache_usage=0.55, ttft_over_objective=0.0))
    assert decision is not None
    assert decision.capacity is not None
    assert decision.capacity.overloads == 0  # never saturated
    assert decision.capacity.prompt_tokens_per_s == pytest.approx(TRUE_PROMPT, rel=0.15)
