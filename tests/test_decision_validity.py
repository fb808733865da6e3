"""A decision carries its own validity: how old its inputs are, and whether it may be served."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from scaler.config import engine_for
from scaler.decider.engine import Observation

T0 = datetime(2026, 12, 1, 9, tzinfo=UTC)
MISSING = {"queue_waiting": "prometheus: connection refused"}


def test_the_decision_records_when_its_inputs_were_last_complete() -> None:
    """Complete inputs stamp the decision; later incomplete ones keep the last complete time."""
    engine = engine_for({"minReplicas": "2"})
    first = engine.decide(Observation(now=T0, queue_waiting=3))
    assert first.inputs_complete_at == T0.timestamp()
    later = engine.decide(Observation(now=T0 + timedelta(seconds=45), missing=MISSING))
    assert later.inputs_complete_at == T0.timestamp()
    assert later.input_age(T0.timestamp() + 60, watched_since=0) == 60.0


def test_inputs_never_complete_count_from_when_the_target_was_first_watched() -> None:
    """A source down from the start goes stale too, counted from the registration."""
    never = engine_for({}).decide(Observation(now=T0, missing=MISSING))
    assert never.inputs_complete_at is None
    registered = T0.timestamp() - 20
    assert never.input_age(T0.timestamp() + 10, watched_since=registered) == 30.0


def test_a_decision_is_stale_past_max_staleness_and_not_before() -> None:
    """maxStalenessSeconds is the line: equal is still served, one second more is not."""
    decision = engine_for({}).decide(Observation(now=T0, queue_waiting=0))
    now = T0.timestamp()
    assert not decision.stale(now + 300, now, 300)
    assert decision.stale(now + 301, now, 300)
