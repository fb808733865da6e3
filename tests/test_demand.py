"""Offered demand: served plus what the queue gained, never capped by the fleet."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scaler.decider.demand import Demand, DemandReader
from scaler.model import Observation

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SERVED: dict[str, Any] = {"requests_per_s": 5.0, "prompt_tokens_per_s": 6000.0, "requests_running": 60.0}


def read(waits: list[float], step_s: float = 15.0, **served: Any) -> list[Demand]:
    """The demand read at each refresh (``step_s`` apart) with the queue at ``waits``."""
    reader = DemandReader(time_constant_s=60.0)
    values = {**SERVED, **served}
    return [
        reader.read(Observation(now=T0 + timedelta(seconds=step_s * i), queue_waiting=w, **values))
        for i, w in enumerate(waits)
    ]


def test_worked_example_queue_growth_is_demand() -> None:
    """The module docstring's example: 5/s served, the queue growing 10/s at two refreshes: 15/s arrive."""
    demand = read([100, 250, 400])[-1]
    assert demand.arrivals_per_s == pytest.approx(15.0)
    assert demand.prompt_tokens_per_s == pytest.approx(18000.0)
    assert demand.concurrency == pytest.approx(180.0)
    assert demand.prompt_tokens_per_request == pytest.approx(1200.0)
    assert demand.time_in_service_s == pytest.approx(12.0)


def test_a_queue_seen_at_one_refresh_is_not_arrivals() -> None:
    """A backlog that appears at one refresh only adds nothing; one that keeps growing adds its growth."""
    spike = read([0, 0, 0, 0, 0, 300, 0])
    assert [d.arrivals_per_s for d in spike] == pytest.approx([5.0] * 7)
    growing = read([0, 0, 0, 150, 300])
    assert growing[3].arrivals_per_s == pytest.approx(5.0)  # the first refresh of it: not yet
    assert growing[4].arrivals_per_s == pytest.approx(5.0 + 150 / 45)  # the smaller of two windows


def test_a_draining_backlog_is_not_demand() -> None:
    """A queue that shrinks was served but did not arrive: arrivals fall below the served rate."""
    demand = read([600, 450, 300], step_s=30.0, requests_per_s=10.0)[-1]
    assert demand.arrivals_per_s == pytest.approx(5.0)


def test_without_a_served_rate_the_served_work_stands_for_demand() -> None:
    """An engine with no TTFT histogram: no arrivals; prompt rate and running count are the demand."""
    reader = DemandReader()
    demand = reader.read(
        Observation(now=T0, queue_waiting=10, prompt_tokens_per_s=3000.0, requests_running=20.0)
    )
    assert demand.arrivals_per_s is None
    assert demand.prompt_tokens_per_s == 3000.0
    assert demand.concurrency == 20.0


def test_nothing_served_keeps_the_last_sizes() -> None:
    """A window with no first token (everything stuck) keeps the sizes measured before it."""
    reader = DemandReader(time_constant_s=60.0)
    reader.read(
        Observation(
            now=T0, queue_waiting=0, requests_per_s=2.0, prompt_tokens_per_s=2000.0, requests_running=20.0
        )
    )
    stuck: dict[str, Any] = {"requests_per_s": 0.0, "prompt_tokens_per_s": 0.0, "requests_running": 20.0}
    reader.read(Observation(now=T0 + timedelta(seconds=30), queue_waiting=60, **stuck))
    demand = reader.read(Observation(now=T0 + timedelta(seconds=60), queue_waiting=120, **stuck))
    assert demand.arrivals_per_s == pytest.approx(2.0)
    assert demand.prompt_tokens_per_s == pytest.approx(2000.0)
    assert demand.concurrency == pytest.approx(20.0)
