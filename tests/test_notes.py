"""Decision notes are typed: a reader matches on the kind, and the text reads as before."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from scaler.config import engine_for
from scaler.decider.engine import Observation
from scaler.model import Note, NoteKind

NOW = datetime(2026, 12, 1, 9, tzinfo=UTC)


def test_missing_inputs_and_their_age_are_noted_by_kind() -> None:
    """A refresh without the queue notes the missing input and how long ago inputs were complete."""
    engine = engine_for({"minReplicas": "2"})
    engine.decide(Observation(now=NOW, queue_waiting=0, gpu_schedulable_replicas=4, current_replicas=2))
    later = engine.decide(
        Observation(
            now=NOW + timedelta(seconds=30),
            gpu_schedulable_replicas=4,
            current_replicas=2,
            missing={"queue_waiting": "prometheus: timeout"},
        )
    )
    kinds = [note.kind for note in later.notes]
    assert kinds == [NoteKind.INPUTS_MISSING, NoteKind.INPUTS_AGE]
    assert later.notes[0] == "inputs missing: queue_waiting: prometheus: timeout"
    assert later.notes[1] == "inputs last complete 30s ago"


def test_the_gpu_check_notes_say_whether_it_is_off_or_skipped() -> None:
    """gpuCheck=false and an unknown inventory each leave a note of their own kind."""
    off = engine_for({"gpuCheck": "false"}).decide(Observation(now=NOW, queue_waiting=0))
    assert [n.kind for n in off.notes] == [NoteKind.GPU_CHECK_OFF]
    skipped = engine_for({}).decide(
        Observation(now=NOW, queue_waiting=0, missing={"gpu_schedulable_replicas": "no Kubernetes source"})
    )
    assert [n.kind for n in skipped.notes] == [NoteKind.GPU_CHECK_SKIPPED]
    assert "GPU check not applied (gpuCheckFailure=open)" in skipped.notes[0]


def test_a_note_is_its_text_wherever_a_string_is_expected() -> None:
    """A Note compares, joins and serialises as its text, and keeps its kind through pickling."""
    import json
    import pickle

    note = Note(NoteKind.GPU_CHECK_OFF, "GPU check off (gpuCheck=false)")
    assert note == "GPU check off (gpuCheck=false)"
    assert json.dumps([note]) == '["GPU check off (gpuCheck=false)"]'
    assert pickle.loads(pickle.dumps(note)).kind is NoteKind.GPU_CHECK_OFF
