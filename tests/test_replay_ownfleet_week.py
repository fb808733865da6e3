"""Issue 36's acceptance: a week served by a known replica, read back through a real Prometheus, and
the replay's own-fleet check (``scaler.replay.ownfleet``) against what the week measured.

The history (``tests/replica_history.py``) is served in each of the replay's physics: prefill
slowing decode (``shared``) and not (``separate``), a week each, and vLLM V1's engine steps
(``step``), two days. It is written as OpenMetrics, loaded with ``promtool tsdb
create-blocks-from openmetrics`` and read as ``scaler replay --prometheus`` reads it
(``scaler.replay.history.from_prometheus``, windows of two minutes). The replay draws its own
requests from what it read (seed 0; the history's draw was another) and replays the pods the
history holds through the replica: the share of first tokens within the objective must come within
a point (``ownfleet.POINTS``) of the measured one. Replayed through the other fluid physics, the
same history is more than a point off, and the report says so first.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from scaler.config import parse_metadata
from scaler.replay import ownfleet
from scaler.replay.history import Measured, from_prometheus
from scaler.replay.span import span
from scaler.sim.prometheus import LocalPrometheus
from scaler.sources.history import read_history
from tests import replica_history as rh
from tests.conftest import require_prometheus

pytestmark = pytest.mark.prometheus


@pytest.fixture(scope="module")
def history() -> Iterator[tuple[LocalPrometheus, dict[str, rh.Served]]]:
    """A local Prometheus holding each physics' history, and the histories as served."""
    require_prometheus()
    served = {physics: rh.serve(physics) for physics in rh.WORLDS}
    prom = LocalPrometheus(retention="100y")
    try:
        prom.import_openmetrics(rh.openmetrics(list(served.values())))
        prom.start()
        yield prom, served
    finally:
        prom.close()


def _measured(prom: LocalPrometheus, physics: str) -> Measured:
    """``physics``' history read back for its model, in windows of two minutes."""
    days = rh.WORLDS[physics].days
    policy = parse_metadata(
        {
            "engine": "vllm",
            "labelSelector": f'model_name="{rh.model(physics)}"',
            "ttftObjectiveSeconds": f"{rh.OBJECTIVE_S:g}",
        }
    )
    end = rh.START + timedelta(days=days)
    return from_prometheus(read_history, prom.url, policy, span(f"{days}d", end.isoformat(), "2m", rh.START))


def _check(measured: Measured, physics: str) -> ownfleet.OwnFleet:
    """The replay's check of ``measured`` through ``physics``' replica, as ``scaler replay`` makes it."""
    world = rh.WORLDS[physics]
    own = ownfleet.check(
        measured, measured.trace(0), world.cluster, measured.start, rh.OBJECTIVE_S, [], world.most
    )
    assert own is not None  # the history holds the pods reporting
    return own


@pytest.mark.parametrize("physics", list(rh.WORLDS))
def test_the_fleet_replayed_as_it_ran_matches_the_week_within_a_point(
    history: tuple[LocalPrometheus, dict[str, rh.Served]], physics: str
) -> None:
    """What the week measured is what was served, and the fleet replayed as it ran comes within a
    point of it in each physics."""
    prom, served = history
    week = served[physics]
    measured = _measured(prom, physics)
    assert measured.within_objective is not None
    # What the history measured is what was served: the objective is a bucket bound, counted exactly.
    assert measured.within_objective == pytest.approx(week.within_objective, abs=1e-4)
    assert measured.served == pytest.approx(len(week.trace), rel=1e-3)
    assert 0.95 < week.within_objective < 0.995  # late first tokens: the check has something to match
    own = _check(measured, physics)
    assert own.off_by is not None
    assert abs(own.off_by) < ownfleet.POINTS, own.lines()
    assert not own.off
    assert own.lines()[0].startswith("own fleet: the replicas the history holds replayed")


@pytest.mark.parametrize(("served_in", "replayed_in"), [("shared", "separate"), ("separate", "shared")])
def test_a_history_replayed_through_the_other_fluid_physics_is_flagged_first(
    history: tuple[LocalPrometheus, dict[str, rh.Served]], served_in: str, replayed_in: str
) -> None:
    """Prefill slowing decode or not is worth more than a point at this load, either way round."""
    prom, _ = history
    own = _check(_measured(prom, served_in), replayed_in)
    assert own.off
    assert own.off_by is not None
    assert abs(own.off_by) > ownfleet.POINTS
    assert (own.off_by > 0) == (served_in == "shared")  # without the slowdown the replay is too kind
    assert own.lines()[0].startswith("WARNING: the replica model does not reproduce your fleet")
