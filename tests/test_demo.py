"""The demo's script: a pre-warm window while load is low, a burst the GPUs cannot hold, a summary."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scaler.cli.demo import (
    BURST,
    LOW,
    PEAK,
    Showed,
    demand,
    demo_hpa,
    demo_scaledobject,
    served_metric,
    window_opening,
)
from scaler.config import engine_for, parse_metadata
from scaler.decider.combine import combine
from scaler.decider.engine import Observation
from scaler.hpa import tolerances
from scaler.model import Proposal, Signal
from scaler.sim.cluster import SimulatedCluster
from scaler.sources.files import scaledobject_from_dict
from tests.helpers import SecondsClock

START = datetime(2026, 12, 1, 15, 14, 15, tzinfo=UTC)


@pytest.mark.parametrize(
    ("now", "opens"),
    [
        (datetime(2026, 12, 1, 15, 14, 15, tzinfo=UTC), datetime(2026, 12, 1, 15, 15, tzinfo=UTC)),
        (datetime(2026, 12, 1, 15, 14, 31, tzinfo=UTC), datetime(2026, 12, 1, 15, 16, tzinfo=UTC)),
        (datetime(2026, 12, 1, 15, 14, 30, tzinfo=UTC), datetime(2026, 12, 1, 15, 15, tzinfo=UTC)),
    ],
    ids=["45s-ahead", "89s-ahead", "exactly-30s"],
)
def test_the_window_opens_on_the_first_minute_at_least_30s_ahead(now: datetime, opens: datetime) -> None:
    """Cron opens windows on whole minutes; the demo takes the first one 30 s or more away."""
    assert window_opening(now) == opens
    assert timedelta(seconds=30) <= opens - now < timedelta(seconds=90)


def test_the_load_is_low_until_the_window_opens_then_bursts_then_decays() -> None:
    """2 req/s until W, a ramp to 14, 40 req/s for 15 s, then back towards 2 req/s."""
    w = 45.0
    assert [demand(t, w) for t in (0, w - 1)] == [LOW, LOW]
    assert LOW < demand(w + 5, w) < PEAK
    assert demand(w + 10, w) == BURST
    assert demand(w + 24, w) == BURST
    assert demand(w + 25, w) == PEAK
    assert demand(w + 60, w) == LOW


def test_the_embedded_scaledobject_parses_and_its_window_sets_the_target_before_load() -> None:
    """The demo's own ScaledObject is valid, and one cold start before W pre-warm binds at 6."""
    spec = scaledobject_from_dict(demo_scaledobject(START))
    engine = engine_for(spec.metadata)
    opens = window_opening(START)
    decision = engine.decide(
        Observation(now=opens - timedelta(seconds=10), queue_waiting=0, current_replicas=2)
    )
    assert decision.replicas == 6
    assert decision.binding.value == "prewarm"


def test_showed_reports_the_prewarm_and_the_scale_down_after_the_peak() -> None:
    """The closing lines name when pre-warm set the target and the lowest it fell after its peak."""
    engine = engine_for({"minReplicas": "2", "maxReplicas": "12", "targetQueuePerReplica": "10"})
    showed = Showed()
    decisions = []
    for second, waiting in ((0, 0), (15, 80), (30, 80), (45, 80), (60, 30), (75, 30)):
        decision = engine.decide(Observation(now=START + timedelta(seconds=second), queue_waiting=waiting))
        decisions.append(decision)
        showed(None, decision)  # type: ignore[arg-type]
    peak = max(d.replicas for d in decisions)
    after = decisions[[d.replicas for d in decisions].index(peak) :]
    lowest = min(after, key=lambda d: (d.replicas, d.now))
    assert peak == 8  # 80 waiting at 10 per replica, on the second poll in a row
    assert lowest.replicas < peak
    summary, seen, ending = showed.lines()
    assert summary.startswith("# summary: 6 decisions; binding ")
    assert ending.startswith("# ends at 3: the queue signal: 30 waiting")  # why it stands there
    assert "the pre-warm window never set the target" in seen
    assert (
        f"after the burst the target came down from 8 to {lowest.replicas} (by {lowest.now:%H:%M:%S})" in seen
    )


def test_the_demo_s_cluster_reports_the_tolerance_its_hpa_applies() -> None:
    """The cluster reports the demo's HPA (scaleUp tolerance 0): the policy asks 10 -> 11, and 11 lands."""
    clock = SecondsClock()
    cluster = SimulatedCluster(gpus_total=16, cold_start_s=20.0, initial_replicas=2, clock=clock)
    doc = demo_scaledobject(START)
    hpa = demo_hpa(scaledobject_from_dict(doc))
    cluster.create_hpa(hpa)
    assert cluster.sync_hpa(served_metric(10)).replicas == 10
    state = cluster.workload("inference", "llama-3-8b")
    assert state.hpa is not None
    assert (state.hpa.name, state.hpa.min_replicas, state.hpa.max_replicas) == ("keda-hpa-llama-3-8b", 2, 12)
    applied = (hpa.behavior.scale_up.tolerance, hpa.behavior.scale_down.tolerance)
    assert tolerances(state.hpa) == applied == (0.0, 0.1)  # the example's scaleUp tolerance 0, down unset
    # The decision reads the reported HPA: one replica more lands, so it is asked for as it is.
    seen = Observation(
        now=START,
        current_replicas=state.current_replicas,
        ready_replicas=state.ready_replicas,
        gpu_schedulable_replicas=state.gpu_schedulable_replicas,
        hpa=state.hpa,
    )
    metadata = parse_metadata(scaledobject_from_dict(doc).metadata)
    proposals = [Proposal(Signal.FLOOR, 2, "floor"), Proposal(Signal.QUEUE, 11, "queue")]
    decision = combine(proposals, seen, metadata.spec)
    assert (decision.replicas, decision.clamps) == (11, ())
    clock.t += 15.0
    assert cluster.sync_hpa(served_metric(decision.replicas)).replicas == 11 == cluster.replicas


def test_showed_says_the_burst_s_timing_decides_how_often_the_gpu_clamp_holds() -> None:
    """When the GPU clamp held decisions, a closing line counts them and says why runs differ."""
    engine = engine_for({"minReplicas": "2", "maxReplicas": "12", "targetQueuePerReplica": "10"})
    showed = Showed()
    for second in (0, 15, 30):
        seen = Observation(
            now=START + timedelta(seconds=second),
            queue_waiting=200,
            current_replicas=4,
            ready_replicas=4,
            gpu_schedulable_replicas=1,
        )
        showed(None, engine.decide(seen))  # type: ignore[arg-type]
    held = showed.summary.clamps["gpu_inventory"]
    assert held >= 1
    assert (
        f"# the GPU clamp held {held} of 3 decisions: how many depends on where the 15 s burst falls"
        " against the decision grid and Prometheus' scrapes, so two runs can differ severalfold"
    ) in showed.lines()
