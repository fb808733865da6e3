"""Pre-warm windows: at least ``replicas`` inside a cron window, starting one cold start early.

A window is open at ``t`` when the next event after ``t`` is its end (KEDA's cron
scaler rule). It pre-warms at ``t`` when it is open, or when its next start is
within ``lead`` seconds, so replicas ordered then are Ready when it opens. Times
are evaluated in the window's own timezone by croniter, which keeps wall-clock
schedules through DST changes (a 09:00 window opens at 09:00 local on both sides); a
wall time that happens twice when clocks go back fires once, at its first occurrence,
and one skipped when clocks go forward fires at the jump, as Vixie cron does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from croniter import croniter

from scaler.decider.spec import Window
from scaler.model import Proposal, Signal


@dataclass(frozen=True, slots=True)
class WindowState:
    """A pre-warm window at one instant: whether it pre-warms, why, and its next start."""

    window: Window
    active: bool
    why: str
    next_start: datetime


# Time zones kept parsed: more than any fleet's windows name (an IANA zone is a few KiB).
ZONES_CACHED = 256
# Fire times read past before giving up on skipping repeated wall times: a clock that goes back
# repeats a wall time at most once per fire, so two reads always suffice; four leaves room.
REPEAT_READS = 4
SECONDS_PER_MINUTE = 60.0  # the opening is said in minutes


@lru_cache(maxsize=ZONES_CACHED)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def _next(expr: str, after: datetime) -> datetime:
    """The next fire time after ``after``, firing once for wall times repeated when clocks go back."""
    it = croniter(expr, after)
    for _ in range(REPEAT_READS):
        value: datetime = it.get_next(datetime)
        repeated = value.fold == 1 and value.replace(fold=0).utcoffset() != value.utcoffset()
        if not repeated:
            return value
    return value


def window_state(window: Window, now: datetime, lead_seconds: float) -> WindowState:
    """Whether ``window`` is open or opens within ``lead_seconds`` of ``now``, and why."""
    local = now.astimezone(_zone(window.timezone or "UTC"))
    # Compare and subtract in UTC: Python compares two datetimes that share a tzinfo by
    # wall time, ignoring fold, which is wrong across a DST change.
    now_utc = now.astimezone(UTC)
    next_start = _next(window.start, local).astimezone(UTC)
    next_end = _next(window.end, local).astimezone(UTC)
    label = f"{window.start} -> {window.end} ({window.timezone})"
    if next_end < next_start:
        return WindowState(window, True, f"inside window {label}", next_start)
    lead = timedelta(seconds=lead_seconds)
    if next_start - now_utc <= lead:
        minutes = (next_start - now_utc).total_seconds() / SECONDS_PER_MINUTE
        return WindowState(
            window, True, f"window {label} opens in {minutes:.1f} min (lead {lead_seconds:g}s)", next_start
        )
    opens = next_start.astimezone(local.tzinfo).isoformat()
    return WindowState(window, False, f"window {label} next opens {opens}", next_start)


def propose(windows: tuple[Window, ...], now: datetime, lead_seconds: float) -> Proposal:
    """The pre-warm proposal: the most replicas of the active windows, or none and why."""
    if not windows:
        return Proposal(Signal.PREWARM, None, "no pre-warm windows")
    states = [window_state(w, now, lead_seconds) for w in windows]
    active = [s for s in states if s.active]
    if not active:
        soonest = min(states, key=lambda s: s.next_start)
        return Proposal(Signal.PREWARM, None, soonest.why)
    best = max(active, key=lambda s: s.window.replicas)
    return Proposal(Signal.PREWARM, best.window.replicas, f"{best.why}: {best.window.replicas} replicas")
