"""Pre-warm windows: lead time, timezones, several windows, and DST on both sides."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from scaler.decider.signals import prewarm
from scaler.decider.spec import Window

NY = ZoneInfo("America/New_York")


def window(start: str, end: str, replicas: int = 6, tz: str = "UTC") -> Window:
    """A pre-warm window from two cron expressions, a replica count and a timezone."""
    return Window(start, end, replicas, tz)


@pytest.mark.parametrize(
    ("local_time", "lead_s", "expected"),
    [
        ("08:44", 900, None),
        ("08:45", 900, 6),  # 15 minutes early: replicas are Ready when the window opens
        ("08:59", 0, None),
        ("09:00", 0, 6),
        ("11:59", 0, 6),
        ("12:00", 0, None),
        ("12:00", 900, None),  # the lead applies to the opening, not the closing
        ("13:00", 900, None),
    ],
)
def test_weekday_window_with_lead(local_time: str, lead_s: float, expected: int | None) -> None:
    """A weekday window proposes its replicas from lead time before opening until it closes."""
    hour, minute = map(int, local_time.split(":"))
    now = datetime(2026, 12, 1, hour, minute, tzinfo=ZoneInfo("Asia/Shanghai"))  # a Tuesday
    proposal = prewarm.propose((window("0 9 * * 1-5", "0 12 * * 1-5", tz="Asia/Shanghai"),), now, lead_s)
    assert proposal.replicas == expected


def test_weekend_is_outside_a_weekday_window() -> None:
    """A weekday-only window proposes nothing on a Saturday."""
    saturday = datetime(2026, 12, 5, 10, 0, tzinfo=ZoneInfo("Asia/Shanghai"))
    assert prewarm.propose((window("0 9 * * 1-5", "0 12 * * 1-5"),), saturday, 900).replicas is None


def test_window_crossing_midnight() -> None:
    """A window from 22:00 to 02:00 stays active across midnight and closes at 02:00."""
    w = window("0 22 * * *", "0 2 * * *", 3)
    assert prewarm.propose((w,), datetime(2026, 12, 1, 23, 30, tzinfo=UTC), 0).replicas == 3
    assert prewarm.propose((w,), datetime(2026, 12, 2, 1, 59, tzinfo=UTC), 0).replicas == 3
    assert prewarm.propose((w,), datetime(2026, 12, 2, 2, 0, tzinfo=UTC), 0).replicas is None


def test_largest_active_window_wins_and_inactive_explain_next_opening() -> None:
    """The largest active window wins; with none active the reason names the next opening."""
    now = datetime(2026, 12, 4, 18, 30, tzinfo=UTC)  # Friday
    windows = (window("0 9 * * 1-5", "0 20 * * 1-5", 4), window("0 18 * * 5", "0 20 * * 5", 9))
    assert prewarm.propose(windows, now, 0).replicas == 9
    idle = prewarm.propose(windows, datetime(2026, 12, 5, 12, 0, tzinfo=UTC), 0)
    assert idle.replicas is None
    assert "next opens" in idle.reason


def _first_active(w: Window, start: datetime, lead_s: float) -> datetime:
    t = start
    while prewarm.propose((w,), t, lead_s).replicas is None:
        t += timedelta(minutes=1)
    return t


def _first_inactive(w: Window, start: datetime, lead_s: float) -> datetime:
    t = start
    while prewarm.propose((w,), t, lead_s).replicas is not None:
        t += timedelta(minutes=1)
    return t


@pytest.mark.parametrize("day", [7, 8, 9])  # 2026-03-08: clocks go forward in New York
def test_spring_forward_keeps_local_wall_times(day: int) -> None:
    """Around spring-forward the window still opens at 08:45 and closes at 12:00 local time."""
    w = window("0 9 * * *", "0 12 * * *", tz="America/New_York")
    start = datetime(2026, 3, day, 0, 0, tzinfo=NY).astimezone(UTC)
    opened = _first_active(w, start, 900).astimezone(NY)
    assert (opened.hour, opened.minute) == (8, 45)
    closed = _first_inactive(w, opened.astimezone(UTC), 900).astimezone(NY)
    assert (closed.hour, closed.minute) == (12, 0)


@pytest.mark.parametrize("day", [31, 1, 2])  # 2026-11-01: clocks go back in New York
def test_fall_back_keeps_local_wall_times(day: int) -> None:
    """Around fall-back the window still opens at 08:45 local time."""
    w = window("0 9 * * *", "0 12 * * *", tz="America/New_York")
    month = 10 if day == 31 else 11
    start = datetime(2026, month, day, 0, 0, tzinfo=NY).astimezone(UTC)
    opened = _first_active(w, start, 900).astimezone(NY)
    assert (opened.hour, opened.minute) == (8, 45)


def test_lead_spanning_the_spring_forward_gap() -> None:
    """A lead across the skipped hour is real time: one hour before 03:30 EDT is 01:30 EST."""
    # A 03:30 window with a one-hour lead on the night 02:00-03:00 does not exist:
    # the lead is real time, so pre-warming starts at 01:30 EST (one real hour before 03:30 EDT).
    w = window("30 3 * * *", "0 5 * * *", tz="America/New_York")
    opened = _first_active(w, datetime(2026, 3, 8, 0, 0, tzinfo=NY).astimezone(UTC), 3600).astimezone(NY)
    assert (opened.hour, opened.minute) == (1, 30)


def test_window_in_the_repeated_hour_opens_once() -> None:
    """A window in the repeated hour opens at the first 01:00 and closes at 02:00 EST."""
    # 01:00-02:00 on 2026-11-01 in New York: 01:xx happens twice; the window opens at the
    # first 01:00 (EDT) and stays open until 02:00 EST, two real hours later.
    w = window("0 1 * * *", "0 2 * * *", tz="America/New_York")
    start = datetime(2026, 11, 1, 0, 0, tzinfo=NY).astimezone(UTC)
    opened = _first_active(w, start, 0)
    closed = _first_inactive(w, opened, 0)
    assert opened == datetime(2026, 11, 1, 5, 0, tzinfo=UTC)  # 01:00 EDT
    assert closed == datetime(2026, 11, 1, 7, 0, tzinfo=UTC)  # 02:00 EST
