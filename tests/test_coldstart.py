"""The cold start measured from pods: percentiles, the window, and which lead a decision uses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scaler.config import engine_for
from scaler.decider import coldstart
from scaler.decider.coldstart import ColdStart, PodTimes
from scaler.decider.engine import Observation
from scaler.model import Signal


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([180, 200, 210, 240, 260, 280, 300], 0.9, 288.0),  # the module docstring's example
        ([100], 0.9, 100.0),
        ([100, 200], 0.9, 190.0),
        ([], 0.9, None),
        ([5, 1, 3], 0.5, 3.0),  # order does not matter
    ],
    ids=["docstring", "one", "two", "empty", "unsorted"],
)
def test_quantile_interpolates_between_order_statistics(
    values: list[float], q: float, expected: float | None
) -> None:
    """Linear interpolation between order statistics, as numpy's default."""
    got = coldstart.quantile(values, q)
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_measure_keeps_the_most_recent_pods_and_splits_pending_from_startup() -> None:
    """The 20 most recently created Ready pods count; Pending and start-up are reported apart."""
    old = [PodTimes(f"old-{i}", i, i + 1, i + 900) for i in range(10)]  # slow, and older
    new = [PodTimes(f"new-{i}", 1000 + i, 1000 + i + 30, 1000 + i + 200) for i in range(20)]
    never = [PodTimes("starting", 5000, 5001, None), PodTimes("no-creation", None, None, 10)]
    measured = coldstart.measure([*old, *new, *never])
    assert measured == ColdStart(20, 200.0, 30.0, 170.0)


@pytest.mark.parametrize(
    ("configured", "measured", "expected"),
    [
        (240.0, ColdStart(12, 420.0, 2.0, 418.0), (240.0, "configured")),
        (None, ColdStart(12, 420.0, 2.0, 418.0), (420.0, "measured p90 over 12 pods")),
        (None, ColdStart(4, 420.0, 2.0, 418.0), (180.0, "default")),  # too few pods
        (None, None, (180.0, "default")),
    ],
    ids=["configured-wins", "measured", "too-few", "nothing"],
)
def test_which_lead_a_decision_uses(
    configured: float | None, measured: ColdStart | None, expected: tuple[float, str]
) -> None:
    """A configured number overrides; a measurement counts from five pods; 180 s otherwise."""
    assert coldstart.lead(configured, measured) == expected


def test_the_lead_follows_slower_pods_and_opens_the_prewarm_window_earlier() -> None:
    """As slower pods arrive the lead goes from 180 s to 420 s, and the 09:00 window pre-warms at 08:53."""
    engine = engine_for(
        {"minReplicas": "2", "prewarmStart": "0 9 * * *", "prewarmEnd": "0 12 * * *", "prewarmReplicas": "6"}
    )

    def obs(now: datetime, samples: int, p90: float | None) -> Observation:
        return Observation(
            now=now,
            queue_waiting=0.0,
            current_replicas=2,
            ready_replicas=2,
            cold_start_seconds=p90,
            cold_start_samples=samples,
        )

    start = datetime(2026, 12, 7, 8, 40, tzinfo=UTC)
    first = engine.decide(obs(start, 2, 180.0))
    assert first.lead is not None
    assert (first.lead.seconds, first.lead.source) == (180.0, "default")
    opened = None
    for minute in range(1, 20):
        now = start + timedelta(minutes=minute)
        decision = engine.decide(obs(now, 12, 420.0))  # twelve pods now, the slow ones among them
        assert decision.lead is not None
        assert decision.lead.seconds == 420.0
        if opened is None and Signal.PREWARM.value in decision.proposals:
            opened = now
    assert opened == datetime(2026, 12, 7, 8, 53, tzinfo=UTC)  # 09:00 minus 420 s is 08:53
