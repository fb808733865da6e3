"""Scenarios that walk ``now`` through time, Knative style: no sleeping, no wall clock."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from scaler.config import engine_for, parse_metadata
from scaler.decider.engine import Engine, Observation
from scaler.model import ClampKind, Decision, Signal
from tests.fleet_model import FleetModel

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
STEP = timedelta(seconds=15)
LLAMA = {
    "minReplicas": "2",
    "maxReplicas": "40",
    "promptTokensPerSecondPerReplica": "5000",
    "generationTokensPerSecondPerReplica": "432",
    "coldStartSeconds": "180",
    "targetQueuePerReplica": "10",
}


def obs(
    now: datetime,
    waiting: float = 0.0,
    current: int = 2,
    schedulable: int | None = 8,
    **extra: object,
) -> Observation:
    """An observation with only the queue and the replicas (no rates)."""
    return Observation(
        now=now,
        queue_waiting=waiting,
        current_replicas=current,
        ready_replicas=current,
        gpu_schedulable_replicas=schedulable,
        **extra,  # type: ignore[arg-type]
    )


def walk(
    engine: Engine, fleet: FleetModel, start: datetime, rates: list[float], ready: int, **extra: Any
) -> list[Decision]:
    """Decide at each rate (one refresh apart) with ``ready`` replicas; returns the decisions."""
    out = []
    for i, rate in enumerate(rates):
        out.append(engine.decide(fleet.observe(start + i * STEP, rate, ready, **extra)))
    return out


# ---- the acceptance checks of the foundation issue -------------------------------------


def test_idle_deployment_gets_min_replicas() -> None:
    """An idle deployment settles at minReplicas, bound by the floor, and the reason says so."""
    engine = engine_for(LLAMA)
    d = walk(engine, FleetModel(), T0, [0.0] * 40, 4)[-1]
    assert d.replicas == 2
    assert d.binding is Signal.FLOOR
    assert "2 replicas" in d.reason


def test_400_waiting_raise_the_target_but_not_above_max() -> None:
    """400 waiting requests at two refreshes push the queue proposal past maxReplicas, which clamps it."""
    engine = engine_for({**LLAMA, "maxReplicas": "16"})
    engine.decide(obs(T0, waiting=400, current=4, schedulable=100))
    d = engine.decide(obs(T0 + STEP, waiting=400, current=4, schedulable=100))
    assert d.replicas == 16
    assert d.binding is Signal.QUEUE
    assert [c.kind for c in d.clamps] == [ClampKind.MAX]


def test_ten_minutes_before_a_prewarm_window_with_900s_cold_start() -> None:
    """With a 900 s cold start, ten minutes before a window the pre-warm replicas are asked for."""
    md = {
        **LLAMA,
        "coldStartSeconds": "900",
        "prewarmStart": "0 9 * * 1-5",
        "prewarmEnd": "0 12 * * 1-5",
        "prewarmReplicas": "8",
        "timezone": "Asia/Shanghai",
    }
    engine = engine_for(md)
    now = datetime(2026, 12, 1, 8, 50, tzinfo=ZoneInfo("Asia/Shanghai"))
    d = engine.decide(obs(now))
    assert d.replicas >= 8
    assert d.binding is Signal.PREWARM


def test_no_schedulable_gpu_holds_heavy_load_at_current_replicas() -> None:
    """With no schedulable GPU, heavy load holds at current replicas and reports what is held back."""
    engine = engine_for(LLAMA)
    fleet = FleetModel()
    d = walk(engine, fleet, T0, [30.0] * 6, 5, gpu_schedulable_replicas=0)[-1]
    assert d.replicas == 5
    assert d.limited_by is ClampKind.GPU_INVENTORY
    gpu = next(c for c in d.clamps if c.kind is ClampKind.GPU_INVENTORY)
    assert gpu.after == 5
    assert gpu.before > 5
    assert "GPU inventory" in d.reason
    assert d.gpu_held_back == gpu.before - 5


def test_prewarm_window_walk_with_lead() -> None:
    """Walking through a window, pre-warm starts one cold start early and ends when it closes."""
    md = {**LLAMA, "prewarmStart": "0 9 * * *", "prewarmEnd": "0 10 * * *", "prewarmReplicas": "6"}
    engine = engine_for({**md, "timezone": "Europe/Berlin"})
    start = datetime(2026, 12, 1, 8, 50, tzinfo=ZoneInfo("Europe/Berlin"))
    targets = {}
    for minute in range(0, 80):
        now = start + timedelta(minutes=minute)
        targets[now.strftime("%H:%M")] = engine.decide(obs(now)).replicas
    assert targets["08:56"] == 2
    assert targets["08:57"] == 6  # 180 s cold start before 09:00
    assert targets["09:59"] == 6
    assert targets["10:00"] == 2


# ---- issue 20: demand, resources, backlog, margin, restart ------------------------------


def test_a_saturated_fleet_asks_for_more_than_its_served_rates_imply() -> None:
    """Every slot busy and the queue growing: the target follows arrivals, not what 4 replicas serve."""
    engine = engine_for(LLAMA)
    fleet = FleetModel()  # 24 slots of 13.6 s each: 1.77 requests/s per replica
    walk(engine, fleet, T0, [5.0] * 40, 4)  # calm: 5/s on 4 replicas
    decisions = walk(engine, fleet, T0 + 40 * STEP, [12.0] * 12, 4)  # 12/s arrive, 7.1/s served
    served_need = fleet.capacity(4) / fleet.capacity(1)  # what the served rate shows: 4 replicas
    last = decisions[-1]
    assert last.observation.queue_waiting is not None
    assert last.observation.queue_waiting > 100
    assert last.forecast.arrivals_per_s == pytest.approx(12.0, rel=0.05)
    assert last.replicas >= 12.0 / fleet.capacity(1)  # at least the offered work: 6.8 replicas
    assert last.replicas > served_need + 2


def test_the_target_never_falls_while_the_queue_grows_and_new_replicas_are_not_ready() -> None:
    """As starting replicas come, the target does not drop while hundreds still wait."""
    engine = engine_for(LLAMA)
    fleet = FleetModel()
    walk(engine, fleet, T0, [5.0] * 40, 4)
    targets = []
    t = T0 + 40 * STEP
    for i in range(24):  # 14/s arrive; 4 Ready, then 2 more become Ready every minute
        ready = min(4 + 2 * (i // 4), 12)
        d = engine.decide(fleet.observe(t + i * STEP, 14.0, ready, current=12, starting_replicas=12 - ready))
        if fleet.waiting > 50:
            targets.append(d.replicas)
    assert len(targets) > 4
    assert all(b >= a for a, b in itertools.pairwise(targets)), targets


def test_a_one_poll_spike_buys_nothing_while_a_sustained_one_does() -> None:
    """315 waiting at one poll, gone at the next: no replica (the target does not change at all, let
    alone twice). Arrivals 2x for a cold start: replicas."""
    engine = engine_for(LLAMA)
    fleet = FleetModel()
    quiet = walk(engine, fleet, T0, [5.0] * 40, 4)[-1].replicas
    t = T0 + 40 * STEP
    spike = engine.decide(fleet.observe(t, 5.0, 4, queue_waiting=315))
    after = engine.decide(fleet.observe(t + STEP, 5.0, 4))
    assert Signal.QUEUE not in spike.proposals  # the backlog is the load signal's, in its one proposal
    assert spike.replicas == quiet
    assert after.replicas == quiet
    sustained = walk(engine, fleet, t + 2 * STEP, [10.0] * 12, 4)
    assert sustained[-1].replicas > quiet + 1


def test_decode_bound_traffic_is_sized_by_its_slots_and_says_so() -> None:
    """Reasoning-style requests (1,300 prompt, 1,500 generated tokens): slots bind, named in the decision."""
    engine = engine_for(LLAMA)
    fleet = FleetModel(prompt=1300.0, output=1500.0)  # 84 s in service: 0.29 requests/s per replica
    d = walk(engine, fleet, T0, [2.0] * 40, 10)[-1]
    assert d.binding is Signal.LOAD
    assert d.signal_reasons[Signal.LOAD].startswith("slots binds"), d.signal_reasons[Signal.LOAD]
    assert d.replicas >= 2.0 * fleet.in_service_s / fleet.slots  # 7 replicas of slots at least


def test_prefill_bound_traffic_is_sized_by_its_prefill_and_says_so() -> None:
    """Long prompts, short answers: prefill binds, named in the decision."""
    engine = engine_for({**LLAMA, "ttftObjectiveSeconds": "8"})
    fleet = FleetModel(prompt=15000.0, output=100.0)  # 3 s of prefill each
    d = walk(engine, fleet, T0, [1.0] * 40, 6)[-1]
    assert d.binding is Signal.LOAD
    assert d.signal_reasons[Signal.LOAD].startswith("prefill binds"), d.signal_reasons[Signal.LOAD]
    assert d.replicas >= 3  # 1/s x 3 s = 3 replicas of prefill


def test_the_margin_widens_after_misses_and_narrows_after_calm() -> None:
    """Arrivals that jump 40% above the plan now and then widen the margin; an hour of calm narrows it."""
    engine = engine_for(LLAMA)
    fleet = FleetModel()
    t = T0
    calm = walk(engine, fleet, t, [5.0] * 60, 8)[-1]
    t += 60 * STEP
    jumpy_rates = ([7.0] * 4 + [5.0] * 12) * 8
    jumpy = walk(engine, fleet, t, jumpy_rates, 8)[-1]
    t += len(jumpy_rates) * STEP
    later = walk(engine, fleet, t, [5.0] * 300, 8)[-1]
    calm_m, jumpy_m, later_m = (d.forecast.concurrency_margin or 0.0 for d in (calm, jumpy, later))
    assert calm_m < 0.1
    assert jumpy_m > 0.25
    assert later_m < 0.1
    assert jumpy.proposals[Signal.LOAD] > later.proposals[Signal.LOAD]


def test_a_restart_rebuilt_from_history_decides_within_one_replica() -> None:
    """An engine warmed from the last hour's observations decides as the one that lived through it."""
    lived, rebuilt = engine_for(LLAMA), engine_for(LLAMA)
    fleet = FleetModel()
    history = []
    for i in range(240):  # a noisy morning ramp, every 15 s
        rate = 2 + 8 * min(1.0, i / 180) + (1.5 if i % 7 == 0 else 0.0)
        history.append(fleet.observe(T0 + i * STEP, rate, 10))
    for o in history[:-1]:
        lived.decide(o)
    rebuilt.warm(history[:-1])
    a, b = lived.decide(history[-1]), rebuilt.decide(history[-1])
    assert abs(a.replicas - b.replicas) <= 1
    assert b.forecast.concurrency == pytest.approx(a.forecast.concurrency, rel=0.02)
    cold = engine_for(LLAMA).decide(history[-1])
    assert cold.forecast.concurrency_margin in (None, 0.0)


# ---- a scaler started against a fleet that serves (issue 35) ----------------------------


def test_a_scaler_started_against_a_serving_fleet_holds_it_until_its_demand_has_warmed_up() -> None:
    """Six replicas serve when the scaler starts: its first rates are not yet a demand, so the six
    stand (last_known) for two rate windows, and only then does the demand size the fleet down."""
    engine = engine_for(LLAMA)
    decisions = walk(engine, FleetModel(), T0, [1.0] * 12, 6)  # 0 .. 165 s; 1 request/s needs the floor
    warming = decisions[:8]  # 0 .. 105 s: within two rate windows of 60 s
    assert [d.replicas for d in warming] == [6] * 8
    assert all(d.binding is Signal.LAST_KNOWN for d in warming)
    assert "holding the 6 replicas standing when this target was first watched" in warming[0].reason
    assert decisions[-1].replicas < 6  # warmed up: the demand sizes it
    assert decisions[-1].binding is not Signal.LAST_KNOWN


def test_the_warm_up_hold_never_holds_a_scale_up_back() -> None:
    """The standing replicas are a floor while warming up, not a cap: demand above them raises the
    target at once."""
    engine = engine_for(LLAMA)
    decisions = walk(engine, FleetModel(), T0, [20.0] * 4, 2)  # 20 requests/s on the floor's 2
    assert decisions[-1].replicas > 2
    assert decisions[-1].binding is not Signal.LAST_KNOWN


def test_a_restart_warmed_from_history_has_watched_its_warm_up() -> None:
    """A restart that warms from ten minutes of history (``Engine.warm``) decides as a running
    process does: nothing held for the replicas standing when it started."""
    fleet = FleetModel()
    history = [fleet.observe(T0 - 40 * STEP + i * STEP, 1.0, 6) for i in range(40)]
    engine = engine_for(LLAMA)
    engine.warm(history)
    d = engine.decide(fleet.observe(T0, 1.0, 6))
    assert d.replicas < 6
    assert Signal.LAST_KNOWN not in d.proposals


# ---- faults, GPUs and the HPA -----------------------------------------------------------


def test_missing_data_holds_the_last_demand_then_recovers() -> None:
    """While Prometheus is gone the last demand is held, with the error noted; idle again, it falls."""
    engine = engine_for(LLAMA)
    fleet = FleetModel()
    held_at = walk(engine, fleet, T0, [8.0] * 20, 6)[-1].replicas
    assert held_at >= 5
    t = T0 + 20 * STEP
    for i in range(40):  # Prometheus gone for 10 minutes
        gone = Observation(
            now=t + i * STEP,
            current_replicas=6,
            gpu_schedulable_replicas=10,
            missing={"queue_waiting": "prometheus: connection refused"},
        )
        d = engine.decide(gone)
        assert d.replicas >= held_at
    assert d.binding is Signal.LAST_KNOWN
    assert "connection refused" in " ".join(d.notes)
    d = walk(engine, fleet, t + 40 * STEP, [0.0] * 80, 6)[-1]  # back, and idle
    assert d.replicas == 2


def test_starting_replicas_do_not_stack_scale_ups() -> None:
    """The backlog counts Ready replicas only until the lead: 5 or 10 Ready, one answer per backlog."""
    engine = engine_for({**LLAMA, "promptTokensPerSecondPerReplica": "1e9"})
    engine.decide(obs(T0, waiting=100, current=10, schedulable=10, starting_replicas=5))
    a = engine.decide(obs(T0 + STEP, waiting=100, current=10, schedulable=10, starting_replicas=5))
    b = engine.decide(obs(T0 + 2 * STEP, waiting=100, current=10, schedulable=10))
    assert a.replicas == b.replicas == 10


def test_stuck_pending_pods_are_released_beyond_max_pending() -> None:
    """Without GPUs, Pending pods beyond maxPendingReplicas are released; allowed ones are kept."""
    engine = engine_for(LLAMA)
    d = engine.decide(obs(T0, waiting=300, current=8, schedulable=0, pending_replicas=3))
    assert d.replicas == 5
    assert d.limited_by is ClampKind.GPU_INVENTORY
    allowed = engine_for({**LLAMA, "maxPendingReplicas": "3"})
    assert allowed.decide(obs(T0, waiting=300, current=8, schedulable=0, pending_replicas=3)).replicas == 8


def test_floor_wins_over_gpu_capacity_and_says_so() -> None:
    """minReplicas wins over missing GPU capacity, and the reason mentions Pending pods."""
    engine = engine_for({**LLAMA, "minReplicas": "4"})
    d = engine.decide(obs(T0, current=2, schedulable=0))
    assert d.replicas == 4
    assert d.limited_by is ClampKind.FLOOR_OVER_GPU
    assert "Pending" in d.reason


def test_unknown_inventory_fails_open_by_default_and_closed_on_request() -> None:
    """An unknown GPU inventory skips the GPU check by default and holds current with fail-closed."""
    for engine in (engine_for(LLAMA), engine_for({**LLAMA, "gpuCheckFailure": "closed"})):
        engine.decide(obs(T0, waiting=300, current=4, schedulable=None))
    open_, closed = engine_for(LLAMA), engine_for({**LLAMA, "gpuCheckFailure": "closed"})
    for engine in (open_, closed):
        engine.decide(obs(T0, waiting=300, current=4, schedulable=None))
    heavy = obs(T0 + STEP, waiting=300, current=4, schedulable=None)
    d_open, d_closed = open_.decide(heavy), closed.decide(heavy)
    assert d_open.replicas == 30
    assert any("GPU check not applied" in n for n in d_open.notes)
    assert d_closed.replicas == 4
    assert d_closed.limited_by is ClampKind.GPU_UNKNOWN_HOLD


def test_engine_refuses_naive_datetimes() -> None:
    """An Observation with a naive datetime raises ValueError."""
    with pytest.raises(ValueError, match="timezone-aware"):
        Observation(now=datetime(2026, 1, 1))


@pytest.mark.parametrize(
    ("current", "waiting", "target", "stepped"),
    [(10, 110, 12, True), (10, 120, 12, False), (12, 130, 14, True), (2, 30, 3, False), (10, 100, 10, False)],
)
def test_a_scale_up_the_hpa_tolerance_would_swallow_asks_for_the_smallest_step_that_lands(
    current: int, waiting: float, target: int, stepped: bool
) -> None:
    """The queue asks ceil(waiting / 10); from 10 the HPA ignores 11 (ratio 1.1), so 12 is asked for."""
    engine = engine_for({"maxReplicas": "100", "targetQueuePerReplica": "10"})
    engine.decide(obs(T0, waiting=waiting, current=current, schedulable=100))
    d = engine.decide(obs(T0 + STEP, waiting=waiting, current=current, schedulable=100))
    assert d.replicas == target, d.reason
    assert (d.limited_by is not None and d.limited_by.value == "hpa_tolerance") is stepped, d.reason


# ---- a router in front of the servers (issue 21) -----------------------------------------


def test_a_backlog_held_in_the_router_raises_the_target_within_two_refreshes() -> None:
    """With flow control the servers' queues level off at 5 a pod and the backlog grows in the
    router: counted as waiting demand it raises the target; the servers' queue alone stays flat."""
    routed, engine_only = engine_for(LLAMA), engine_for(LLAMA)
    for engine in (routed, engine_only):  # watched for ten minutes: past the warm-up's hold of the 4
        engine.warm([obs(T0 - 40 * STEP, waiting=20, current=4, schedulable=40, router_queue_waiting=0.0)])
    router_queue = [0.0] * 6 + [100.0, 250.0, 400.0]
    first = []
    for i, queued in enumerate(router_queue):
        now = T0 + i * STEP
        d = routed.decide(obs(now, waiting=20, current=4, schedulable=40, router_queue_waiting=queued))
        flat = engine_only.decide(obs(now, waiting=20, current=4, schedulable=40))
        first.append(d.replicas)
        assert flat.replicas == 2  # 20 waiting at 10 a replica, under the floor
    assert first[:6] == [2] * 6  # an empty router adds nothing
    assert first[7] > 2  # the second refresh with the router's queue growing
    assert first[-1] == 27  # min(420, 270) waiting at two refreshes, at 10 a replica


def test_a_router_queue_with_no_ready_replica_raises_the_target_at_once() -> None:
    """No Ready replica exports a queue; what the router holds is the whole backlog, counted at once."""
    engine = engine_for(LLAMA)
    engine.decide(obs(T0, waiting=0, current=2, schedulable=40, router_queue_waiting=0.0))
    d = engine.decide(
        Observation(
            now=T0 + STEP,
            current_replicas=2,
            ready_replicas=0,
            gpu_schedulable_replicas=40,
            router_queue_waiting=60.0,
            missing={"queue_waiting": "no series match labelSelector"},
        )
    )
    assert d.replicas == 6
    assert d.binding is Signal.QUEUE
    assert d.observation.queue_waiting is None  # the decision records what was observed


# ---- an inter-token latency objective (issue 21) ----------------------------------------


def test_an_itl_objective_the_batch_would_miss_raises_the_target() -> None:
    """Decode-bound traffic whose inter-token latency grows with the batch: with an objective the
    full batch would miss, the slots a replica may hold shrink and the target rises; without one
    it does not move for the latency."""

    def walk_itl(engine: Engine) -> Decision:
        fleet = FleetModel(output=800.0)
        decision = None
        for i in range(480):
            rate = 1.2 + 0.6 * math.sin(i / 15)
            load = fleet.observe(T0 + i * STEP, rate, 12)
            share = load.kv_cache_usage or 0.0
            mean = 0.020 + 0.060 * share
            decision = engine.decide(replace(load, itl_mean_seconds=mean, itl_tail_seconds=1.5 * mean))
        assert decision is not None
        return decision

    free = walk_itl(engine_for(LLAMA))
    held = walk_itl(engine_for({**LLAMA, "itlObjectiveSeconds": "0.06"}))
    assert held.capacity is not None
    assert held.capacity.itl_slots is not None
    assert held.capacity.itl_slots < held.capacity.slots  # type: ignore[operator]
    assert held.replicas > free.replicas


def test_the_safety_net_drains_what_the_fleet_is_seen_to_serve_whatever_the_capacities_say() -> None:
    """Capacities configured 4x too high (20,000 prompt tokens/s and 1,728 generated tokens/s a
    replica) while 2 Ready replicas serve 2 requests/s between them and 400 stay waiting: the model
    says 2 replicas clear it, the fleet says otherwise. From the second refresh that sees it, the
    load signal's one proposal is at least what the observed 1 request/s a replica drains within one
    more cold start, ceil((2 + 400 / 180) / 1) = 5, and says it is the safety net."""
    metadata = {
        **LLAMA,
        "promptTokensPerSecondPerReplica": "20000",
        "generationTokensPerSecondPerReplica": "1728",
    }
    engine = engine_for(metadata)

    def refresh(i: int) -> Observation:
        return Observation(
            now=T0 + i * STEP,
            queue_waiting=400.0,
            requests_running=48.0,
            prompt_tokens_per_s=2400.0,
            generation_tokens_per_s=400.0,
            requests_per_s=2.0,
            ttft_mean_seconds=60.0,
            current_replicas=2,
            ready_replicas=2,
            gpu_schedulable_replicas=40,
        )

    decisions = [engine.decide(refresh(i)) for i in range(3)]
    assert decisions[0].replicas < 5  # one refresh is not yet an alarm
    second = decisions[1]
    assert second.binding is Signal.LOAD
    assert "safety net" in second.signal_reasons[Signal.LOAD]
    assert second.replicas == math.ceil((2.0 + 400.0 / 180.0) / 1.0) == 5
    # Without the net the same fleet is judged to clear its queue: nothing more is asked.
    from scaler.decider.stages import ALL

    trusting = Engine(parse_metadata(metadata).spec, stages=ALL.without("backlog_net"))
    unarmed = [trusting.decide(refresh(i)) for i in range(3)]
    assert unarmed[-1].replicas < second.replicas


def test_the_fleet_comes_down_only_as_far_as_every_answer_of_the_last_cold_start_agrees() -> None:
    """An answer sized a refresh ago holds the target for one cold start (180 s), and the decision
    says so; once the cold start has passed, the target is what is sized now. Without the stage
    (the ablation's decider) the latest answer is asked at once."""
    from scaler.decider.stages import ALL

    def after_a_larger_answer(engine: Engine) -> tuple[int, list[Decision]]:
        fleet = FleetModel()
        sized = walk(engine, fleet, T0, [5.0] * 40, 4)[-1].replicas
        t = T0 + 39 * STEP
        # The load signal sized two more a refresh ago (a forecast error since checked, say).
        engine.load = replace(engine.load, sized=(*engine.load.sized[:-1], (t.timestamp(), sized + 2)))
        return sized, walk(engine, fleet, t + STEP, [5.0] * 13, sized + 2)

    sized, held = after_a_larger_answer(engine_for(LLAMA))
    assert [d.replicas for d in held[:12]] == [sized + 2] * 12
    assert f"(sized now: {sized})" in held[0].signal_reasons[Signal.LOAD]
    assert held[-1].replicas == sized  # 195 s on: the answer held is more than a cold start old
    spec = parse_metadata(LLAMA).spec
    sized, latest = after_a_larger_answer(Engine(spec, stages=ALL.without("hold_answer")))
    assert [d.replicas for d in latest] == [sized] * 13
