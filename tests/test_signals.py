"""Each signal's formula, as a table, and the one ordered table the engine walks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from scaler.config import engine_for, parse_metadata
from scaler.decider import queueing
from scaler.decider.demand import Demand
from scaler.decider.engine import Engine
from scaler.decider.forecast import Forecast
from scaler.decider.signals import floor, gpu, last_known, load, queue, table
from scaler.decider.signals.context import SignalInputs
from scaler.decider.signals.table import SIGNALS
from scaler.decider.stages import ALL
from scaler.decider.units import ceil_replicas
from scaler.model import Capacity, Decision, Observation, Proposal, Signal

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
LEAD_S = 180.0


@pytest.mark.parametrize(
    ("value", "expected"), [(0.0, 0), (0.2, 1), (1.0, 1), (1.0000000001, 1), (2.01, 3), (7.999, 8)]
)
def test_ceil_replicas(value: float, expected: int) -> None:
    """Replica counts round up, but float noise just above a whole number does not add one."""
    assert ceil_replicas(value) == expected


def demand(arrivals: float, prompt: float = 1200.0, in_service: float = 12.0) -> Demand:
    """Offered demand of ``arrivals`` requests/s of ``prompt`` tokens, each in service ``in_service`` s."""
    return Demand(0.0, arrivals, arrivals, prompt, in_service, arrivals * prompt, arrivals * in_service)


CAPACITY = Capacity(5000.0, 24.0, "configured", "measured")


@pytest.mark.parametrize(
    ("waiting", "served", "ready", "expected"),
    [
        (540, 4.8, 6, 10),  # the docstring's example: all 540 left after the lead, 0.8/s per replica
        (2, 4.0, 6, 0),  # cleared by the Ready replicas long before a new one could serve
        (0, 0.0, 2, 0),
        (200, 1.6, 2, 4),  # 200 + (1.6 - 1.6) x 180 = 200 left: (1.6 + 1.11) / 0.8
    ],
    ids=["example", "drains-in-time", "empty", "stuck"],
)
def test_queue_drains_the_backlog_within_one_more_lead(
    waiting: float, served: float, ready: int, expected: int
) -> None:
    """The backlog left when a new replica could serve, plus what is served, over what a replica completes."""
    capacity = Capacity(None, 9.6, "unknown", "measured")  # 9.6 slots / 12 s = 0.8 requests/s
    obs = Observation(now=NOW, queue_waiting=waiting, ready_replicas=ready)
    proposal = queue.propose(obs, demand(served), capacity, LEAD_S, 10.0, None)
    assert proposal.signal is Signal.QUEUE
    assert proposal.replicas == expected, proposal.reason


def test_queue_without_a_service_rate_counts_what_persisted_per_target() -> None:
    """No capacity and no saturation to measure one: what waited twice over targetQueuePerReplica."""
    unknown = Capacity(None, None)
    no_rate = Demand(315.0, None, None, None, None, None, None)
    spike = queue.propose(Observation(now=NOW, queue_waiting=315), no_rate, unknown, LEAD_S, 10.0, 0.0)
    assert spike.replicas == 0
    sustained = queue.propose(Observation(now=NOW, queue_waiting=315), no_rate, unknown, LEAD_S, 10.0, 300.0)
    assert sustained.replicas == 30


def test_queue_abstains_when_unknown_and_says_why() -> None:
    """With the queue unknown the queue signal abstains and gives the reason."""
    obs = Observation(now=NOW, missing={"queue_waiting": "prometheus: connection refused"})
    proposal = queue.propose(obs, demand(1.0), CAPACITY, LEAD_S, 10.0, None)
    assert proposal.replicas is None
    assert "connection refused" in proposal.reason


def flat(value: float, errors: tuple[float, ...] = ()) -> Forecast:
    """A forecast that stays at ``value``, with the given past errors."""
    return Forecast(
        level=value, trend=0.0, planned=value, held_s=0.0, margin=max(errors, default=0.0), errors=errors
    )


def test_decode_bound_traffic_is_sized_by_its_slots() -> None:
    """Long decodes: 180 sequences in service on 24 slots each bind; prefill (0.24 s each) does not."""
    policy = parse_metadata({"maxReplicas": "40"}).spec
    d = demand(15.0, in_service=12.0)
    need = load.need(policy, CAPACITY, d, flat(18000.0), flat(180.0), "")
    assert need is not None
    assert need.binding is not None
    assert need.binding.resource == "slots"
    assert need.replicas >= 8  # 180 / 24 = 7.5 replicas of slots, and room for waits
    assert "slots binds" in load.propose(need, "").reason


def test_prefill_bound_traffic_is_sized_by_its_prefill() -> None:
    """Long prompts, short answers: 12 s of prefill per second of arrivals binds; slots do not."""
    policy = parse_metadata({"maxReplicas": "40", "ttftObjectiveSeconds": "8"}).spec
    d = demand(0.8, prompt=15000.0, in_service=20.0)
    need = load.need(policy, CAPACITY, d, flat(12000.0), flat(16.0), "")
    assert need is not None
    assert need.binding is not None
    assert need.binding.resource == "prefill"
    assert need.replicas >= 3  # 12,000 / 5,000 = 2.4 replicas of prefill


def test_past_errors_buy_room_for_them() -> None:
    """The same forecast with past misses of +30% asks for more than with none."""
    policy = parse_metadata({"maxReplicas": "40"}).spec
    d = demand(15.0)
    calm = load.need(policy, CAPACITY, d, flat(18000.0), flat(180.0), "")
    jumpy = load.need(policy, CAPACITY, d, flat(18000.0, (0.3,) * 10), flat(180.0, (0.3,) * 10), "")
    assert calm is not None
    assert jumpy is not None
    assert jumpy.replicas > calm.replicas
    assert jumpy.late <= 0.005


def test_load_abstains_without_capacity_and_says_why() -> None:
    """Neither prefill rate nor slots known: the load signal abstains and names what it lacks."""
    policy = parse_metadata({}).spec
    need = load.need(policy, Capacity(None, None), demand(5.0), flat(6000.0), flat(60.0), "")
    proposal = load.propose(need, "no demand")
    assert proposal.replicas is None
    assert "capacity unknown" in proposal.reason


def test_floor_is_min_replicas() -> None:
    """The floor signal proposes minReplicas."""
    assert floor.propose_floor(parse_metadata({"minReplicas": "3"}).spec).replicas == 3


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
    policy = parse_metadata({"maxPendingReplicas": str(max_pending)}).spec
    obs = Observation(
        now=NOW, current_replicas=current, pending_replicas=pending, gpu_schedulable_replicas=schedulable
    )
    assert gpu.capacity(obs, policy).replicas == expected


def test_gpu_capacity_unknown_without_inventory_or_current() -> None:
    """GPU capacity is unknown without the inventory or the current replica count."""
    policy = parse_metadata({}).spec
    assert gpu.capacity(Observation(now=NOW, current_replicas=3), policy).replicas is None
    unknown = gpu.capacity(
        Observation(now=NOW, gpu_schedulable_replicas=3, missing={"current_replicas": "api down"}), policy
    )
    assert unknown.replicas is None
    assert "api down" in unknown.reason


# The tie-break order: floor, then prewarm, queue, load, last_known (scaler.decider.signals.table).
ORDER = [Signal.FLOOR, Signal.PREWARM, Signal.QUEUE, Signal.LOAD, Signal.LAST_KNOWN]
ALWAYS_OPEN = {"prewarmStart": "0 0 * * *", "prewarmEnd": "59 23 * * *"}  # open at NOW (12:00 UTC)


def queue_of_forty(engine: Engine) -> Decision:
    """Two refreshes with 40 requests waiting: the queue signal asks for 40 / 10 = 4 replicas."""
    engine.decide(Observation(now=NOW, queue_waiting=40, current_replicas=2, ready_replicas=2))
    return engine.decide(Observation(now=NOW + timedelta(seconds=15), queue_waiting=40, current_replicas=2))


def test_the_engine_walks_one_ordered_table_of_signals(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each Engine.decide asks every signal of the table once, in order, and decides on their answers only."""
    assert [signal for signal, _ in SIGNALS] == list(Signal) == ORDER
    asked: list[Proposal] = []

    def spy(
        signal: Signal, propose: Callable[[SignalInputs], Proposal]
    ) -> Callable[[SignalInputs], Proposal]:
        """``propose``, recording each answer."""

        def recorded(inputs: SignalInputs) -> Proposal:
            """The signal's own answer, recorded."""
            proposal = propose(inputs)
            assert proposal.signal is signal, f"{signal} proposed under {proposal.signal}"
            asked.append(proposal)
            return proposal

        return recorded

    monkeypatch.setattr(table, "SIGNALS", tuple((signal, spy(signal, p)) for signal, p in SIGNALS))
    engine = engine_for(
        {"minReplicas": "2", "targetQueuePerReplica": "10", **ALWAYS_OPEN, "prewarmReplicas": "3"}
    )
    decision = queue_of_forty(engine)
    assert [p.signal for p in asked] == ORDER * 2, "every signal once per decision, in table order"
    answers = asked[len(ORDER) :]
    assert list(decision.signal_reasons.items()) == [(p.signal, p.reason) for p in answers]
    assert decision.proposals == {p.signal: p.replicas for p in answers if p.replicas is not None}
    assert decision.proposals[Signal.FLOOR] == 2
    assert decision.proposals[Signal.PREWARM] == 3
    assert decision.proposals[Signal.QUEUE] == 4
    assert decision.binding is Signal.QUEUE


@pytest.mark.parametrize(
    ("metadata", "binding"),
    [
        ({"minReplicas": "4", **ALWAYS_OPEN, "prewarmReplicas": "4"}, Signal.FLOOR),
        ({"minReplicas": "2", **ALWAYS_OPEN, "prewarmReplicas": "4"}, Signal.PREWARM),
        ({"minReplicas": "2", **ALWAYS_OPEN, "prewarmReplicas": "3"}, Signal.QUEUE),
    ],
    ids=["floor-prewarm-queue", "prewarm-queue", "queue"],
)
def test_equal_proposals_go_to_the_earliest_signal_of_the_table(
    metadata: dict[str, str], binding: Signal
) -> None:
    """When signals ask for the same replicas, the Engine's decision binds the earliest in the table."""
    engine = engine_for({"targetQueuePerReplica": "10", **metadata})
    decision = queue_of_forty(engine)
    assert decision.proposals[Signal.QUEUE] == 4
    assert decision.replicas == 4
    assert decision.binding is binding


def test_a_fleet_that_does_not_pool_is_sized_as_a_queue_per_replica() -> None:
    """The same demand needs more replicas where each replica is its own queue (a random dispatch)
    than where one pooled queue serves it: 60 Erlangs of 12 s holds on 24 slots a replica."""
    from scaler.config import parse_metadata
    from scaler.decider.capacity import CapacityModel  # noqa: F401 - the record's producer, for the reader
    from scaler.decider.demand import Demand
    from scaler.decider.forecast import Forecaster
    from scaler.decider.signals.load import need
    from scaler.model import Capacity

    policy = parse_metadata({"maxReplicas": "40"}).spec
    demand = Demand(0.0, 5.0, 5.0, 1000.0, 12.0, 5000.0, 60.0)
    forecast = Forecaster()
    forecast.update(0.0, 60.0, 180.0)
    concurrency = forecast.forecast(0.995)
    sizes = {}
    for pooled in (True, False):
        capacity = Capacity(20000.0, 24.0, "configured", "measured", 0, 10, None, None, pooled=pooled)
        found = need(policy, capacity, demand, None, concurrency, "")
        assert found is not None
        sizes[pooled] = found.replicas
    assert sizes[False] > sizes[True]


def test_a_smaller_answer_is_asked_only_once_every_answer_of_the_last_lead_agrees() -> None:
    """The load signal asks the most it sized within one lead: a one-refresh dip asks nothing less,
    a smaller answer that lasts a lead is asked once the lead has passed, a larger one at once."""
    state = load.LoadState()
    asked = []
    answers = ((0.0, 7), (15.0, 6), (30.0, 7), (45.0, 6), (60.0, 6), (210.0, 6), (225.0, 6), (240.0, 9))
    for t, sized in answers:
        state, replicas, ago = state.held(t, sized, LEAD_S)
        asked.append((replicas, ago))
    assert asked == [(7, 0.0), (7, 15.0), (7, 0.0), (7, 15.0), (7, 30.0), (7, 180.0), (6, 0.0), (9, 0.0)]
    assert state.hint == 9  # the search starts from what was sized, not from what was held
    state, replicas, ago = state.held(255.0, 7, LEAD_S)
    assert (replicas, ago, state.hint) == (9, 15.0, 7)


def test_the_batch_line_example() -> None:
    """The Batch docstring's example: 60 s in service, 0.5 s to the first token, 35 ms a token on the
    line 26 ms + 0.62 ms a sequence: 1,700 tokens decoded, a slot held 44.7 s + 1.05 s a sequence."""
    capacity = replace(CAPACITY, itl_base_s=0.026, itl_per_sequence_s=0.00062)
    now = Observation(now=NOW, ttft_mean_seconds=0.5, itl_mean_seconds=0.035)
    batch = load._batch(capacity, now, 60.0)
    assert batch is not None
    assert (batch.base_s, batch.per_sequence_s) == pytest.approx((44.7, 1.054), abs=0.001)


@pytest.mark.parametrize(
    ("pooled", "batch", "replicas", "expected"),
    [
        # Erlang: 2 Erlangs on 3 servers held 1 s: 4/9 of arrivals wait, a wait's tail decays at 1/s.
        (True, None, 1, 4 / 9),
        # Each of 2 replicas its own 3 servers with half of 4 Erlangs: the same as one alone.
        (False, None, 2, 4 / 9),
        # 4 Erlangs pooled over 6 servers: C(6, 4) = 0.285, decaying at 2/s.
        (True, None, 2, queueing.erlang_c(6, 4.0) / 2.0),
        # The batch's chain: P(wait) over its decay, batch_wait's pair.
        (True, load.Batch(1.0, 0.05), 1, None),
    ],
)
def test_the_mean_wait_is_the_chance_of_waiting_over_the_tails_decay(
    pooled: bool, batch: load.Batch | None, replicas: int, expected: float | None
) -> None:
    """``Resource.mean_wait``: ``P(wait) / decay``, what the measured mean queue time bounds a cut by
    (``scaler.decider.calibration``)."""
    offered = 2.0 * replicas  # 2 Erlangs a replica
    resource = load.Resource("slots", 3.0, offered, offered, 1.0, 1.0, None, pooled, batch)
    if expected is None:
        assert batch is not None
        waits, decay = queueing.batch_wait(*batch.chain(3.0, replicas, offered / 1.0, pooled))
        expected = waits / decay
    assert resource.mean_wait(replicas, 100) == pytest.approx(expected)
    assert resource.mean_wait(replicas, 100) > 0.0
    assert load.Resource("slots", 3.0, 3.0, 3.0, 1.0, 1.0).mean_wait(1, 100) == float("inf")  # no room


def test_a_batch_that_slows_as_it_grows_is_sized_for_its_longer_holds() -> None:
    """2 requests/s each 60 s in service (120 sequences) on 60 slots a replica, decoding at 35 ms a
    token on the line 26 ms + 0.62 ms a sequence. Erlang's model holds every fleet to the 60 s of
    today and asks 3; with the line a smaller fleet's larger batches hold each request longer, and
    the fleet asks the fewest replicas whose chain (scaler.decider.queueing.batch_late_share) is
    within the budget. The stage removed, Erlang's answer again."""
    policy = parse_metadata({"maxReplicas": "40"}).spec
    d = demand(2.0, prompt=1200.0, in_service=60.0)
    now = Observation(now=NOW, ready_replicas=6, ttft_mean_seconds=0.5, itl_mean_seconds=0.035)
    plain = Capacity(50_000.0, 60.0, "configured", "measured")
    lined = replace(plain, itl_base_s=0.026, itl_per_sequence_s=0.00062)
    allowance = policy.ttft_objective_seconds - 1200.0 / 50_000.0
    tokens = 59.5 / 0.035
    expected = next(
        n
        for n in range(1, 40)
        if queueing.batch_late_share(n * 60, 2.0, 0.5 + tokens * 0.026, tokens * 0.00062 / n, allowance)
        <= policy.late_budget
    )
    without = load.need(policy, plain, d, flat(2400.0), flat(120.0), "", now=now)
    with_line = load.need(policy, lined, d, flat(2400.0), flat(120.0), "", now=now)
    removed = load.need(
        policy, lined, d, flat(2400.0), flat(120.0), "", now=now, stages=ALL.without("batch_slowdown")
    )
    assert without is not None
    assert with_line is not None
    assert removed is not None
    assert without.replicas == removed.replicas == 3
    assert with_line.replicas == expected > without.replicas
