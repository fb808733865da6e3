"""The refresh loop: one batched observation per refresh, publishing, failures, the grid and warming."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scaler.model import Decision, Observation, Signal
from scaler.targets.registry import Target, TargetKey, TargetRegistry
from scaler.targets.runtime import ALL_FIELDS, OfflineSource, Runtime, unknown_observation

START = datetime(2026, 12, 1, 12, 0, 7, tzinfo=UTC)  # 7 s past a multiple of 15 s (and of 60 s)
META = {"targetQueuePerReplica": "10", "maxReplicas": "20"}
A = TargetKey("inference", "a")
B = TargetKey("inference", "b")
C = TargetKey("batch", "c")


class Clock:
    """An injected clock: ``now`` is set by the test."""

    def __init__(self, now: datetime = START) -> None:
        self.now = now

    def __call__(self) -> datetime:
        """The time the test set."""
        return self.now


class FakeSource:
    """An ObservationSource that records every call and answers the queue depth set per target."""

    def __init__(self, waiting: Mapping[TargetKey, float] | None = None, expects: bool = True) -> None:
        self.waiting: dict[TargetKey, float] = dict(waiting or {})
        self.observed: list[tuple[list[TargetKey], datetime]] = []
        self.warmed: list[tuple[list[TargetKey], datetime, float | None]] = []
        self.fail: Exception | None = None
        self.warm_fail: Exception | None = None
        self.expects = expects

    async def observe(self, targets: Sequence[Target], now: datetime) -> Mapping[TargetKey, Observation]:
        """One batch: an observation for each target that has a queue depth set."""
        self.observed.append(([t.key for t in targets], now))
        if self.fail is not None:
            raise self.fail
        return {
            t.key: Observation(now=now, queue_waiting=self.waiting[t.key])
            for t in targets
            if t.key in self.waiting
        }

    async def warm(self, targets: Sequence[Target], now: datetime, step_s: float | None = None) -> None:
        """Record the batch warmed, or raise the scripted failure."""
        self.warmed.append(([t.key for t in targets], now, step_s))
        if self.warm_fail is not None:
            raise self.warm_fail

    def expects_data(self, target: Target) -> bool:
        """Whether the test configured the targets to have a data source."""
        return self.expects


class Log:
    """Collects the runtime's structured log calls."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    def warning(self, event: str, **fields: Any) -> None:
        """Record a warning."""
        self.events.append(("warning", event, fields))

    def error(self, event: str, **fields: Any) -> None:
        """Record an error."""
        self.events.append(("error", event, fields))


def _registry(*keys: TargetKey, polled_at: datetime = START) -> TargetRegistry:
    registry = TargetRegistry()
    for key in keys:
        registry.resolve(key, META, polled_at.timestamp())
    return registry


async def _closed_promptly(runtime: Runtime) -> bool:
    """Whether close() returns within half a second (leftover tasks end with the event loop)."""
    closing = asyncio.ensure_future(runtime.close())
    done, _ = await asyncio.wait({closing}, timeout=0.5)
    return closing in done


def _target(registry: TargetRegistry, key: TargetKey) -> Target:
    target = registry.get(key)
    assert target is not None
    return target


def _first_decision_of_a(
    source: FakeSource, timeout_s: float = 1.0, **options: Any
) -> tuple[Decision | None, Log]:
    """A new target A's first decision (None if none came within ``timeout_s``) on a runtime over
    ``source`` with no batch delay and ``options``, and what the runtime logged; closed after."""
    registry = _registry(A)
    log = Log()
    runtime = Runtime(registry, source, Clock(), batch_delay_s=0.0, log=log, **options)

    async def go() -> Decision | None:
        runtime.on_new_target(_target(registry, A))
        decision = await runtime.first_decision(_target(registry, A), timeout_s)
        await runtime.close()
        return decision

    return asyncio.run(go()), log


def test_one_refresh_decides_every_target_from_one_batched_observe_and_publishes() -> None:
    """refresh_once makes one observe call for all targets and publishes each decision to every sink."""
    registry = _registry(A, B, C)
    source = FakeSource({A: 0.0, B: 40.0, C: 95.0})
    seen: list[tuple[TargetKey, Decision]] = []
    also: list[TargetKey] = []
    runtime = Runtime(
        registry,
        source,
        Clock(),
        sinks=[lambda t, d: seen.append((t.key, d)), lambda t, d: also.append(t.key)],
    )
    asyncio.run(runtime.refresh_once())

    assert source.observed == [([A, B, C], START)]
    assert [key for key, _ in seen] == [A, B, C] == also
    decisions = dict(seen)
    for key in (A, B, C):
        assert _target(registry, key).latest is decisions[key]
        assert decisions[key].now == START
        assert decisions[key].observation.queue_waiting == source.waiting[key]
    # The queue signal at 10 per replica on a first refresh: ceil(waiting / 10), floor 1.
    assert decisions[A].replicas == 1
    assert decisions[B].replicas == 4
    assert decisions[C].replicas == 10
    assert decisions[C].binding is Signal.QUEUE
    assert runtime.refreshes == 1
    assert runtime.last_refresh_seconds >= 0.0


def test_refresh_at_an_explicit_time_observes_at_that_time() -> None:
    """refresh_once(at) evaluates the batch at ``at`` rather than the clock's time."""
    registry = _registry(A)
    source = FakeSource({A: 5.0})
    runtime = Runtime(registry, source, Clock())
    at = START - timedelta(seconds=45)
    asyncio.run(runtime.refresh_once(at))
    assert source.observed == [([A], at)]
    latest = _target(registry, A).latest
    assert latest is not None
    assert latest.now == at


def test_a_target_the_source_leaves_out_is_decided_with_every_input_unknown() -> None:
    """A target missing from the batch's answer gets an all-unknown observation saying why."""
    registry = _registry(A, B)
    source = FakeSource({A: 30.0})
    runtime = Runtime(registry, source, Clock())
    asyncio.run(runtime.refresh_once())
    latest = _target(registry, B).latest
    assert latest is not None
    assert latest.observation.queue_waiting is None
    assert latest.observation.missing == dict.fromkeys(ALL_FIELDS, "source returned nothing for this target")
    assert latest.replicas == 1  # nothing known: the floor


def test_a_refresh_with_no_targets_does_not_call_the_source() -> None:
    """With nothing registered a refresh observes nothing and still counts."""
    source = FakeSource()
    runtime = Runtime(TargetRegistry(), source, Clock())
    asyncio.run(runtime.refresh_once())
    assert source.observed == []
    assert runtime.refreshes == 1


def test_a_failing_source_keeps_the_previous_decisions() -> None:
    """When observe raises, the refresh fails and every target keeps its last published decision."""
    registry = _registry(A, B)
    source = FakeSource({A: 40.0, B: 0.0})
    published: list[TargetKey] = []
    clock = Clock()
    runtime = Runtime(registry, source, clock, sinks=[lambda t, d: published.append(t.key)])
    asyncio.run(runtime.refresh_once())
    before = {key: _target(registry, key).latest for key in (A, B)}

    source.fail = ConnectionError("prometheus is down")
    clock.now = START + timedelta(seconds=15)
    with pytest.raises(ConnectionError):
        asyncio.run(runtime.refresh_once())
    assert {key: _target(registry, key).latest for key in (A, B)} == before
    assert published == [A, B]
    assert runtime.refreshes == 1


def test_the_run_loop_survives_a_failing_source_and_logs_it() -> None:
    """run() logs each failed refresh, keeps the previous decisions and refreshes again."""
    registry = _registry(A)
    source = FakeSource({A: 40.0})
    log = Log()
    runtime = Runtime(registry, source, Clock(), refresh_interval_s=0.01, log=log)
    asyncio.run(runtime.refresh_once())
    before = _target(registry, A).latest
    source.fail = RuntimeError("boom")

    async def go() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(runtime.run(stop))
        while len(source.observed) < 4 and not task.done():
            await asyncio.sleep(0.005)
        stop.set()
        await asyncio.wait_for(task, 1.0)

    asyncio.run(go())
    assert _target(registry, A).latest is before
    failures = [e for e in log.events if e[1] == "refresh_failed"]
    assert len(failures) >= 3
    assert failures[0] == ("error", "refresh_failed", {"error": "boom", "error_type": "RuntimeError"})


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (datetime(2026, 12, 1, 12, 0, 37, 500000, tzinfo=UTC), datetime(2026, 12, 1, 12, 0, 30, tzinfo=UTC)),
        (datetime(2026, 12, 1, 12, 0, 31, tzinfo=UTC), datetime(2026, 12, 1, 12, 0, 30, tzinfo=UTC)),
        (datetime(2026, 12, 1, 12, 0, 30, 500000, tzinfo=UTC), datetime(2026, 12, 1, 12, 0, 15, tzinfo=UTC)),
        (datetime(2026, 12, 1, 12, 0, 59, 999000, tzinfo=UTC), datetime(2026, 12, 1, 12, 0, 45, tzinfo=UTC)),
    ],
    ids=["mid-interval", "just-settled", "not-yet-settled", "end-of-interval"],
)
def test_the_grid_time_is_the_latest_settled_multiple_of_the_interval(
    now: datetime, expected: datetime
) -> None:
    """With a grid, tick() is the latest multiple of the interval at least ``settle_s`` before now."""
    runtime = Runtime(TargetRegistry(), FakeSource(), Clock(now), refresh_interval_s=15.0, grid=True)
    assert runtime.tick(now) == expected


def test_without_a_grid_the_refresh_time_is_the_clock_time() -> None:
    """Without a grid tick() returns now unchanged."""
    runtime = Runtime(TargetRegistry(), FakeSource(), Clock(), refresh_interval_s=15.0)
    assert runtime.tick(START) == START


def test_a_grid_refresh_observes_at_the_grid_time_from_the_injected_clock() -> None:
    """On the grid, refresh_once observes and decides at the clock's latest settled grid time."""
    registry = _registry(A)
    source = FakeSource({A: 12.0})
    clock = Clock(datetime(2026, 12, 1, 12, 3, 44, tzinfo=UTC))
    runtime = Runtime(registry, source, clock, refresh_interval_s=60.0, grid=True, settle_s=2.0)
    asyncio.run(runtime.refresh_once())
    grid_time = datetime(2026, 12, 1, 12, 3, tzinfo=UTC)
    assert source.observed == [([A], grid_time)]
    latest = _target(registry, A).latest
    assert latest is not None
    assert latest.now == grid_time


def test_the_run_loop_refreshes_on_consecutive_grid_times() -> None:
    """run() on a grid refreshes at successive multiples of the interval, the clock read each time."""
    interval = 0.0625  # exact in binary, so grid times are exact; a short real wait between refreshes
    settle = 0.015625
    grid0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    clock = Clock(grid0 + timedelta(seconds=settle + 0.01))
    registry = _registry(A)

    class GridSource(FakeSource):
        """Moves the clock to where a real refresh for the observed grid time would run."""

        async def observe(self, targets: Sequence[Target], now: datetime) -> Mapping[TargetKey, Observation]:
            """Record, then advance the clock to just after ``now`` settled."""
            clock.now = now + timedelta(seconds=settle + 0.01)
            if len(self.observed) >= 2:
                stop.set()
            return await super().observe(targets, now)

    source = GridSource({A: 0.0})
    runtime = Runtime(registry, source, clock, refresh_interval_s=interval, grid=True, settle_s=settle)
    stop = asyncio.Event()
    asyncio.run(asyncio.wait_for(runtime.run(stop), 2.0))
    times = [now for _, now in source.observed]
    step = timedelta(seconds=interval)
    assert times == [grid0, grid0 + step, grid0 + 2 * step]


def test_new_targets_are_warmed_and_decided_in_one_batch() -> None:
    """Targets appearing together are warmed in one call at the refresh time, then decided at once."""
    registry = _registry(A, B)
    source = FakeSource({A: 20.0, B: 0.0})
    runtime = Runtime(registry, source, Clock(), batch_delay_s=0.01)

    async def go() -> list[Decision | None]:
        for key in (A, B):
            runtime.on_new_target(_target(registry, key))
        return [await runtime.first_decision(_target(registry, key), 1.0) for key in (A, B)]

    first = asyncio.run(go())
    assert source.warmed == [([A, B], START, None)]
    assert source.observed == [([A, B], START)]
    assert first == [_target(registry, A).latest, _target(registry, B).latest]
    assert [d.replicas if d else None for d in first] == [2, 1]


def test_on_the_grid_warming_steps_by_the_refresh_interval_from_the_grid_time() -> None:
    """With a grid, new targets are warmed up to the grid time in steps of the refresh interval."""
    source = FakeSource({A: 0.0})
    decision, _ = _first_decision_of_a(source, refresh_interval_s=15.0, grid=True, settle_s=1.0)
    grid_time = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)  # 12:00:07 less 1 s settle, floored to 15 s
    assert source.warmed == [([A], grid_time, 15.0)]
    assert decision is not None
    assert decision.now == grid_time


def test_a_failed_warm_is_logged_and_the_target_is_still_decided() -> None:
    """Warming is best effort: its failure is logged and the first decision still comes."""
    source = FakeSource({A: 30.0})
    source.warm_fail = TimeoutError("history query timed out")
    decision, log = _first_decision_of_a(source)
    assert decision is not None
    assert decision.replicas == 3
    assert log.events == [("warning", "warm_failed", {"targets": 1, "error": "history query timed out"})]


def test_a_failed_first_decision_is_logged_and_waiters_time_out_without_one() -> None:
    """If the first decision's observe fails, it is logged and first_decision returns None at its timeout."""
    source = FakeSource({A: 30.0})
    source.fail = ConnectionError("refused")
    decision, log = _first_decision_of_a(source, timeout_s=0.05)
    assert decision is None
    assert log.events == [("warning", "first_decision_failed", {"targets": 1, "error": "refused"})]


def test_first_decision_returns_the_latest_at_once_when_there_is_one() -> None:
    """A decided target answers first_decision at once, even while a first decision for it is pending."""
    registry = _registry(A)
    runtime = Runtime(registry, FakeSource({A: 0.0}), Clock(), batch_delay_s=60.0)
    target = _target(registry, A)

    async def go() -> Decision | None:
        await runtime.refresh_once()
        runtime.on_new_target(target)  # its batch waits a minute: a waiter on it would block
        try:
            return await asyncio.wait_for(runtime.first_decision(target, 5.0), 0.5)
        finally:
            await _closed_promptly(runtime)

    decision = asyncio.run(go())
    assert decision is not None
    assert decision is target.latest


def test_close_cancels_a_pending_first_decision() -> None:
    """close() cancels the background warm-and-decide of targets not yet handled."""
    registry = _registry(A)
    source = FakeSource({A: 0.0})
    runtime = Runtime(registry, source, Clock(), batch_delay_s=60.0)

    async def go() -> None:
        runtime.on_new_target(_target(registry, A))
        await asyncio.sleep(0)
        assert await _closed_promptly(runtime)  # uncancelled, the batch would sleep a minute

    asyncio.run(go())
    assert source.warmed == []
    assert source.observed == []
    assert _target(registry, A).latest is None


def test_a_refresh_forgets_targets_idle_by_the_injected_clock() -> None:
    """refresh_once drops targets not polled within idle_seconds of the clock's time."""
    registry = TargetRegistry(idle_seconds=300.0)
    registry.resolve(A, META, (START - timedelta(seconds=301)).timestamp())
    registry.resolve(B, META, (START - timedelta(seconds=299)).timestamp())
    runtime = Runtime(registry, FakeSource({A: 0.0, B: 0.0}), Clock())
    asyncio.run(runtime.refresh_once())
    assert registry.get(A) is None
    assert registry.get(B) is not None


def test_staleness_counts_from_registration_until_the_source_answers() -> None:
    """Inputs never complete age from the registration; once complete, from then; served until the limit."""
    registry = TargetRegistry()
    registry.resolve(A, {**META, "maxStalenessSeconds": "30"}, START.timestamp())
    source = FakeSource({})  # no answer for A yet
    clock = Clock(START + timedelta(seconds=40))
    runtime = Runtime(registry, source, clock)
    target = _target(registry, A)
    asyncio.run(runtime.refresh_once())
    never = target.latest
    assert never is not None
    assert runtime.stale_for(target, never) == 40.0  # registered at START, limit 30 s
    source.waiting[A] = 0.0
    asyncio.run(runtime.refresh_once())
    decision = target.latest
    assert decision is not None
    clock.now = START + timedelta(seconds=65)
    assert runtime.stale_for(target, decision) is None  # complete at 40: 25 s old
    clock.now = START + timedelta(seconds=75)
    assert runtime.stale_for(target, decision) == 35.0


def test_a_target_without_a_data_source_is_never_stale() -> None:
    """A target the source expects no data for is served whatever the age of its inputs."""
    registry = _registry(A)
    runtime = Runtime(registry, FakeSource({}, expects=False), Clock(START + timedelta(seconds=4000)))
    target = _target(registry, A)
    asyncio.run(runtime.refresh_once())
    assert target.latest is not None
    assert runtime.stale_for(target, target.latest) is None


def test_the_offline_source_knows_nothing_and_expects_nothing() -> None:
    """OfflineSource answers every target with all inputs unknown and never expects data."""
    registry = _registry(A, B)
    source = OfflineSource()
    observed = asyncio.run(source.observe(registry.targets(), START))
    assert observed == {key: unknown_observation(START, OfflineSource.reason) for key in (A, B)}
    assert not source.expects_data(_target(registry, A))
    assert asyncio.run(source.warm(registry.targets(), START)) is None
