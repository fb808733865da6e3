"""vLLM's reasons a request waits, read where exported and unknown where not, on a real Prometheus."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from scaler.config import parse_metadata
from scaler.inputs import Input
from scaler.readings import Readings
from scaler.sim.fleet import PodLoad, SimulatedFleet
from scaler.sources.prometheus import PrometheusReader, TargetQuery
from tests.helpers import ScrapedFleets, eventually, started

pytestmark = pytest.mark.prometheus

AT = datetime(2026, 12, 1, tzinfo=UTC)


class Stack(ScrapedFleets):
    """A real Prometheus scraping two vLLM fleets: one that says why requests wait, one older."""

    def __init__(self) -> None:
        fleets = []
        for model, by_reason in (("new", True), ("old", False)):
            fleet = SimulatedFleet(namespace="inference", model=model)
            fleet.set_pods([f"{model}-0", f"{model}-1"])
            load = PodLoad(waiting=10, waiting_deferred=4, waiting_by_reason=by_reason, running=6)
            fleet.set_fleet_load(load)
            fleets.append(fleet)
        super().__init__(fleets)


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    """The module's Prometheus and fleets."""
    yield from started(Stack)


def test_the_waiting_reasons_are_read_where_exported_and_unknown_where_not(stack: Stack) -> None:
    """A vLLM exporting num_requests_waiting_by_reason gives capacity 6 and deferred 4 of its 10
    waiting; an older one leaves both unknown with a reason (never 0) and its queue read as before."""
    reader = PrometheusReader(stack.prometheus.url, rate_window="5s")
    new, old = (
        TargetQuery(m, parse_metadata({"labelSelector": f'model_name="{m}"'}), stack.prometheus.url)
        for m in ("new", "old")
    )

    def read() -> dict[object, Readings]:
        return reader.read([new, old])

    # Every figure asserted below, read at once: the pods are scraped one at a time, so a read may
    # come between the first series of a fleet and its last.
    got = eventually(
        read,
        lambda r: (
            r["new"].values.get(Input.QUEUE_WAITING) == 10
            and r["new"].values.get(Input.QUEUE_WAITING_CAPACITY) == 6
            and r["new"].values.get(Input.QUEUE_WAITING_DEFERRED) == 4
            and r["old"].values.get(Input.QUEUE_WAITING) == 10
        ),
        timeout=25,
        every=0.25,
    )
    seen = got["new"].observation(AT, new.policy)
    assert (seen.queue_waiting, seen.queue_waiting_capacity, seen.queue_waiting_deferred) == (10, 6, 4)
    older = got["old"].observation(AT, old.policy)
    assert older.queue_waiting == 10
    assert older.queue_waiting_capacity is None
    assert older.queue_waiting_deferred is None
    assert older.missing[Input.QUEUE_WAITING_CAPACITY] == "no series match labelSelector"  # the reader alone
    assert Input.QUEUE_WAITING_DEFERRED in older.missing
