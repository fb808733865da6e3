"""Each signal's formula, as a table."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from scaler.calibration import CapacityCalibration
from scaler.config import TargetPolicy, parse_metadata
from scaler.forecast import Forecast
from scaler.model import Capacity, Observation, Signal
from scaler.signals import ceil_replicas, floor, gpu, hold, last_known, queue, tokens
from scaler.signals.tokens import TokenDemand

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


LEAD_S = 180.0  # coldStartSeconds unset and nothing measured: the default lead


def _capacity(policy: TargetPolicy) -> Capacity:
    """The capacity a new engine starts from: the configured prior, not yet calibrated."""
    return CapacityCalibration(policy).capacity()


@pytest.mark.parametrize(
    ("value", "expected"), [(0.0, 0), (0.2, 1), (1.0, 1), (1.0000000001, 1), (2.01, 3), (7.999, 8)]
)
def test_ceil_replicas(value: float, expected: int) -> None:
    """Replica counts round up, but float noise just above a whole number does not add one."""
    assert ceil_replicas(value) == expected


@pytest.mark.parametrize(
    ("waiting", "per_replica", "expected"),
    [(0, 10, 0), (1, 10, 1), (10, 10, 1), (11, 10, 2), (400, 10, 40), (400, 50, 8), (3, 0.5, 6)],
)
def test_queue_table(waiting: float, per_replica: float, expected: int) -> None:
    """The queue signal asks for the waiting requests divided by the per-replica target, rounded up."""
    proposal = queue.propose(waiting, per_replica)
    assert proposal.signal is Signal.QUEUE
    assert proposal.replicas == expected


def test_queue_abstains_when_unknown_and_says_why() -> None:
    """With the queue unknown the queue signal abstains and gives the reason."""
    proposal = queue.propose(None, 10, "prometheus: connection refused")
    assert proposal.replicas is None
    assert "connection refused" in proposal.reason


def _flat(value: float) -> Forecast:
    """A forecast that stays at ``value``: no trend, no margin."""
    return Forecast(level=value, trend=0.0, margin=0.0, peak=0.0, last_value=value)


@pytest.mark.parametrize(
    ("prompt", "generation", "metadata", "expected"),
    [
        # GPU time adds: 4500/9000 + 900/1800 = 1.0 replica busy, / 0.5 utilisation = 2
        (
            4500,
            900,
            {
                "promptTokensPerSecondPerReplica": "9000",
                "generationTokensPerSecondPerReplica": "1800",
                "targetUtilization": "0.5",
            },
            2,
        ),
        # not independent maxima: each alone is half a replica, together one
        (
            4500,
            900,
            {
                "promptTokensPerSecondPerReplica": "9000",
                "generationTokensPerSecondPerReplica": "1800",
                "targetUtilization": "1",
            },
            1,
        ),
        (9001, 0, {"promptTokensPerSecondPerReplica": "9000", "targetUtilization": "1"}, 2),
        (0, 18000, {"generationTokensPerSecondPerReplica": "1800", "targetUtilization": "0.8"}, 13),
        (0, 0, {"promptTokensPerSecondPerReplica": "9000"}, 0),
    ],
    ids=["both-at-half", "both-at-full", "prompt-only", "generation-only", "idle"],
)
def test_token_table(prompt: float, generation: float, metadata: dict[str, str], expected: int) -> None:
    """Prompt and generation GPU time add up, divided by the target utilisation."""
    policy = parse_metadata(metadata)
    capacity = _capacity(policy)
    demand = tokens.demand(_flat(prompt), _flat(generation), capacity, LEAD_S)
    assert tokens.propose(demand, capacity, LEAD_S, "").replicas == expected


def test_tokens_read_the_forecast_one_cold_start_ahead() -> None:
    """The token signal sizes for the forecast one cold start ahead, not for now."""
    policy = parse_metadata(
        {"promptTokensPerSecondPerReplica": "1000", "targetUtilization": "1", "coldStartSeconds": "300"}
    )
    rising = Forecast(level=1000, trend=10.0, margin=0.0, peak=0.0, last_value=1000)  # +10 tok/s each second
    capacity = _capacity(policy)
    assert policy.cold_start_seconds == 300
    demand = tokens.demand(rising, None, capacity, policy.cold_start_seconds)
    assert demand is not None
    assert demand.now == pytest.approx(1.0)
    assert demand.horizon == pytest.approx(4.0)  # 1000 + 10 * 300 = 4000 tok/s
    assert tokens.propose(demand, capacity, policy.cold_start_seconds, "").replicas == 4


def test_tokens_off_without_capacity_and_unknown_without_rates() -> None:
    """Tokens abstain without a per-replica capacity, or without token rates."""
    off = tokens.propose(None, _capacity(parse_metadata({})), 180, "")
    assert off.replicas is None
    assert "promptTokensPerSecondPerReplica" in off.reason
    policy = parse_metadata({"promptTokensPerSecondPerReplica": "1000"})
    capacity = _capacity(policy)
    assert tokens.demand(None, None, capacity, 180) is None
    assert tokens.propose(None, capacity, 180, "prometheus down").replicas is None


@pytest.mark.parametrize(
    ("now_busy", "horizon_busy", "utilisation", "expected"),
    [(4.0, 1.0, 1.0, 4), (1.0, 4.0, 1.0, 4), (3.0, 3.0, 0.5, 6), (0.0, 0.0, 0.8, 0)],
)
def test_hold_keeps_the_largest_need_within_one_cold_start(
    now_busy: float, horizon_busy: float, utilisation: float, expected: int
) -> None:
    """The hold keeps the larger of now's and the horizon's need, at the target utilisation."""
    policy = parse_metadata(
        {"promptTokensPerSecondPerReplica": "1000", "targetUtilization": str(utilisation)}
    )
    demand = TokenDemand(
        now=now_busy,
        horizon=horizon_busy,
        peak_within_horizon=max(now_busy, horizon_busy),
        usable_fraction=policy.target_utilization,
    )
    assert hold.propose_hold(demand, LEAD_S, None, None).replicas == expected


def test_floor_is_min_replicas() -> None:
    """The floor signal proposes minReplicas."""
    assert floor.propose_floor(parse_metadata({"minReplicas": "3"})).replicas == 3


def test_last_known_holds_only_when_something_is_missing() -> None:
    """The last decision is held only when an input is missing, and names that input."""
    assert last_known.propose_last_known(5, []).replicas is None
    assert last_known.propose_last_known(None, ["queue_waiting"]).replicas is None
    held = last_known.propose_last_known(5, ["queue_waiting"])
    assert held.replicas == 5
    assert "queue_waiting" in held.reason


@pytest.mark.parametrize(
    ("current", "pending", "schedulable", "max_pending", "expected"),
    [
        (4, 0, 0, 0, 4),  # full: only what exists
        (4, 0, 3, 0, 7),
        (4, 0, 0, 2, 6),  # a node autoscaler may add nodes for two Pending pods
        (5, 2, 0, 0, 3),  # two Pending pods that fit nowhere are not capacity
        (5, 2, 2, 0, 5),  # Pending pods not yet bound: their room is in the inventory
        (0, 0, 1, 0, 1),
    ],
)
def test_gpu_capacity_table(
    current: int, pending: int, schedulable: int, max_pending: int, expected: int
) -> None:
    """GPU capacity is the replicas not Pending, plus the schedulable room and maxPendingReplicas."""
    policy = parse_metadata({"maxPendingReplicas": str(max_pending)})
    obs = Observation(
        now=NOW, current_replicas=current, pending_replicas=pending, gpu_schedulable_replicas=schedulable
    )
    assert gpu.capacity(obs, policy).replicas == expected


def test_gpu_capacity_unknown_without_inventory_or_current() -> None:
    """GPU capacity is unknown without the inventory or the current replica count."""
    policy = parse_metadata({})
    assert gpu.capacity(Observation(now=NOW, current_replicas=3), policy).replicas is None
    unknown = gpu.capacity(
        Observation(now=NOW, gpu_schedulable_replicas=3, missing={"current_replicas": "api down"}), policy
    )
    assert unknown.replicas is None
    assert "api down" in unknown.reason


@pytest.mark.parametrize(
    ("waiting", "previous", "expected"),
    [
        (315, (15.0, 0.0), 0),  # seen at one refresh only: a spike buys nothing
        (300, (15.0, 300.0), 30),  # at two refreshes in a row: 300 / 10
        (400, (15.0, 300.0), 30),  # growing: what persisted, 300
        (700, (15.0, 810.0), 0),  # draining 7.3/s: gone in 96 s, before a replica could be Ready
        (800, (15.0, 810.0), 68),  # draining 0.67/s: 680 left after the 180 s cold start
        (300, None, 30),  # no previous refresh: counted as it is
        (0, (15.0, 500.0), 0),
    ],
    ids=["spike", "sustained", "growing", "drains-in-time", "drains-slowly", "first-refresh", "empty"],
)
def test_queue_counts_the_backlog_as_work(
    waiting: float, previous: tuple[float, float] | None, expected: int
) -> None:
    """Only a backlog that persists, and what of it a cold start would not see drained, buys replicas."""
    proposal = queue.propose(waiting, 10, previous=previous, horizon_s=180)
    assert proposal.replicas == expected


def test_the_engine_walks_one_ordered_table_of_signals() -> None:
    """The table lists every Signal once, in tie-break order, each proposing under its own name."""
    from datetime import UTC, datetime

    from scaler.model import Observation, Signal
    from scaler.signals.context import SignalInputs
    from scaler.signals.table import SIGNALS, propose_all

    assert [signal for signal, _ in SIGNALS] == list(Signal)
    policy = parse_metadata({"minReplicas": "2"})
    inputs = SignalInputs(
        policy=policy,
        observation=Observation(now=datetime(2026, 12, 1, tzinfo=UTC), queue_waiting=40),
        horizon_s=180,
        capacity=_capacity(policy),
        token_demand=None,
        token_unknown="no data",
        previous_queue=(15.0, 40.0),
        learning=None,
        earned=None,
        last_demand=None,
        missing=(),
    )
    proposals = propose_all(inputs)
    assert [p.signal for p in proposals] == list(Signal)
    assert proposals[0].replicas == 2  # floor
    assert proposals[2].replicas == 4  # queue: 40 waiting at two refreshes, 10 per replica
