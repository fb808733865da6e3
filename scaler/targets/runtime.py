"""The refresh loop: observe every target in one batch, decide, publish.

The only place that reads the clock is the ``clock`` callable passed in; the engine
receives the time inside each Observation.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from datetime import UTC, datetime, timedelta
from typing import Any

from scaler.model import Decision, Observation
from scaler.targets.registry import DecisionSink, ObservationSource, Target, TargetKey, TargetRegistry

# Every input that is unknown unless a source gives it (the input table's rows without a
# default of 0): what a source that returned nothing leaves missing.
ALL_FIELDS = tuple(f.name for f in fields(Observation) if "input" in f.metadata and f.default is None)


def unknown_observation(now: datetime, reason: str) -> Observation:
    """An observation at ``now`` with every input unknown, for ``reason``."""
    return Observation(now=now, missing=dict.fromkeys(ALL_FIELDS, reason))


class OfflineSource:
    """No live data: every input is unknown, so decisions rest on the floor and pre-warm windows."""

    reason = "no live source configured"

    async def observe(self, targets: Sequence[Target], now: datetime) -> Mapping[TargetKey, Observation]:
        """An all-unknown observation for every target."""
        return {t.key: unknown_observation(now, self.reason) for t in targets}

    async def warm(self, targets: Sequence[Target], now: datetime, step_s: float | None = None) -> None:
        """Nothing to warm from."""
        return None

    def expects_data(self, target: Target) -> bool:
        """Never: no target has a data source here."""
        return False


class Runtime:
    """The refresh loop over a registry: observe every target, decide, publish to the sinks."""

    def __init__(
        self,
        registry: TargetRegistry,
        source: ObservationSource,
        clock: Callable[[], datetime],
        sinks: Sequence[DecisionSink] = (),
        refresh_interval_s: float = 15.0,
        log: Any = None,
        batch_delay_s: float = 0.05,
        grid: bool = False,
        settle_s: float = 1.0,
    ) -> None:
        self.batch_delay_s = batch_delay_s
        self.slice_s = 0.001
        self.pause_s = 0.002
        self.grid = grid
        self.settle_s = settle_s
        self.log = log
        self.registry = registry
        self.source = source
        self.clock = clock
        self.sinks = list(sinks)
        self.refresh_interval_s = refresh_interval_s
        self.refreshes = 0
        self.last_refresh_seconds = 0.0
        self._first: dict[TargetKey, asyncio.Event] = {}
        self._new: list[Target] = []
        self._tasks: set[asyncio.Task[None]] = set()

    def now_timestamp(self) -> float:
        """The clock's current time as Unix seconds."""
        return self.clock().timestamp()

    def tick(self, now: datetime) -> datetime:
        """The refresh-grid time at or before ``now`` (``now`` itself without a grid).

        With a grid, every replica decides at the same instants, evaluates its Prometheus
        queries at those instants and warms new targets from history on the same steps,
        so replicas given the same data answer alike, and a restarted one rebuilds the
        state the others hold.
        """
        if not self.grid:
            return now
        step = self.refresh_interval_s
        # Only grid times at least `settle_s` old: the scrapes due then have been stored.
        settled = now.timestamp() - self.settle_s
        return datetime.fromtimestamp(math.floor(settled / step) * step, tz=UTC)

    def publish(self, target: Target, decision: Decision) -> None:
        """Store the decision as the target's latest, wake first-decision waiters, call the sinks."""
        target.latest = decision
        event = self._first.pop(target.key, None)
        if event is not None:
            event.set()
        for sink in self.sinks:
            sink(target, decision)

    async def _decide(self, targets: Sequence[Target], at: datetime | None = None) -> None:
        if not targets:
            return
        now = at or self.tick(self.clock())
        observed = await self.source.observe(targets, now)
        loop = asyncio.get_running_loop()
        slice_started = loop.time()
        for target in targets:
            if loop.time() - slice_started > self.slice_s:
                # Let RPCs in between: a thousand decisions in one go would hold the event
                # loop (and the interpreter lock) for a fifth of a second, and KEDA's calls
                # with it. Decide in slices of about a millisecond with pauses between them,
                # so an RPC meets at most one slice: the refresh takes longer, RPCs do not.
                await asyncio.sleep(self.pause_s)
                slice_started = loop.time()
            obs = observed.get(target.key) or unknown_observation(
                now, "source returned nothing for this target"
            )
            self.publish(target, target.engine.decide(obs))

    async def refresh_once(self, at: datetime | None = None) -> None:
        """One refresh: decide for every target at ``at`` (else the grid time), then forget idle ones."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        await self._decide(self.registry.targets(), at)
        for key in self.registry.forget_idle(self.now_timestamp()):
            self._first.pop(key, None)
        self.refreshes += 1
        self.last_refresh_seconds = loop.time() - started

    def on_new_target(self, target: Target) -> None:
        """Warm a new target from history and decide for it at once, in the background.

        Targets that appear together (a restart: every ScaledObject polls within seconds)
        are warmed and decided in one batch, so the source sees a few queries, not one per target.
        """
        self._first.setdefault(target.key, asyncio.Event())
        self._new.append(target)
        if len(self._new) > 1:
            return  # a batch is already scheduled and will take this target too

        async def first() -> None:
            await asyncio.sleep(self.batch_delay_s)
            batch, self._new = self._new, []
            now = self.tick(self.clock())
            try:
                await self.source.warm(batch, now, self.refresh_interval_s if self.grid else None)
            except Exception as exc:  # noqa: BLE001 - warming is best effort: the forecaster starts conservatively
                if self.log is not None:
                    self.log.warning("warm_failed", targets=len(batch), error=str(exc))
            try:
                await self._decide(batch, now)
            except Exception as exc:  # noqa: BLE001 - the refresh loop decides for them on its next pass
                if self.log is not None:
                    self.log.warning("first_decision_failed", targets=len(batch), error=str(exc))

        task = asyncio.get_running_loop().create_task(first())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def stale_for(self, target: Target, decision: Decision) -> float | None:
        """Seconds the decision's inputs have been incomplete, when that is beyond the target's
        ``maxStalenessSeconds`` and its source is one that should answer; None when it may be served.

        A target whose source has never answered counts from its registration, so a Prometheus
        that is down from the start also ends in UNAVAILABLE. A target with no data source
        (nothing configured to read) is never stale: its floor and pre-warm still hold.
        """
        if not self.source.expects_data(target):
            return None
        now, limit = self.now_timestamp(), target.policy.max_staleness_seconds
        if not decision.stale(now, target.registered_at, limit):
            return None
        return decision.input_age(now, target.registered_at)

    async def first_decision(self, target: Target, timeout_s: float) -> Decision | None:
        """The target's latest decision, waiting up to ``timeout_s`` for a first; None if none came."""
        if target.latest is not None:
            return target.latest
        event = self._first.get(target.key)
        if event is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout_s)
        return target.latest

    async def run(self, stop: asyncio.Event) -> None:
        """Refresh every interval until ``stop``; on the grid, ``settle_s`` after each grid time."""
        at: datetime | None = self.tick(self.clock()) if self.grid else None
        while not stop.is_set():
            try:
                await self.refresh_once(at)
            except Exception as exc:  # noqa: BLE001 - a failed refresh keeps the previous decisions
                if self.log is not None:
                    self.log.error("refresh_failed", error=str(exc), error_type=type(exc).__name__)
            if self.grid:
                now = self.clock()
                at = self.tick(now) + timedelta(seconds=self.refresh_interval_s)
                delay = max(0.0, (at - now).total_seconds() + self.settle_s)
            else:
                delay = self.refresh_interval_s
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)

    async def close(self) -> None:
        """Cancel the background warm-and-first-decision tasks and wait for them to end."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
