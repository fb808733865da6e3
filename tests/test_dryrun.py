"""The dry-run line and JSON, and the engine presets' queries: what a user reads and what Prometheus runs."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from scaler.config import engine_for
from scaler.model import Decision, Observation
from scaler.outputs.dryrun import CompactLines, format_json, format_line
from scaler.presets import PRESETS, Combine

NOW = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)


def decision(waiting: float, schedulable: int) -> Decision:
    """One decision of a 2..12, 10-per-replica engine on four ready replicas at NOW, watched since ten
    minutes before (its warm-up's hold of the standing replicas over: signals/last_known.py)."""
    engine = engine_for({"minReplicas": "2", "maxReplicas": "12", "targetQueuePerReplica": "10"})
    obs = Observation(
        now=NOW,
        queue_waiting=waiting,
        current_replicas=4,
        ready_replicas=4,
        gpu_schedulable_replicas=schedulable,
    )
    engine.warm([replace(obs, now=NOW - timedelta(minutes=10))])
    return engine.decide(obs)


def test_the_line_names_every_proposal_the_binding_signal_and_each_clamp_that_changed_the_target() -> None:
    """The line names each proposal, the binding signal, each clamp that changed the target, the lead."""
    d = decision(waiting=150, schedulable=3)  # the queue asks 15: max 12, then 4 + 3 GPUs fit 7
    line = format_line(d, "inference/llama")
    assert line.startswith("2026-12-01T09:30:00Z inference/llama target=7 binding=queue [floor=2 queue=15*] ")
    assert (
        "clamps: max 15->12: maxReplicas=12; gpu_inventory 12->7: GPU inventory fits 7: 4 bound + 3" in line
    )
    assert "| lead 180s (default)" in line


def test_without_clamps_the_line_says_none_and_the_json_carries_the_same_decision() -> None:
    """An unclamped line says "clamps: none" and the JSON carries the same replicas and proposals."""
    d = decision(waiting=30, schedulable=20)
    line = format_line(d)
    assert " target=3 binding=queue [floor=2 queue=3*] clamps: none | " in line
    body = json.loads(format_json(d, "inference/llama"))
    assert body["scaledobject"] == "inference/llama"
    assert body["replicas"] == 3
    assert body["proposals"] == {"floor": 2, "queue": 3}
    assert body["binding"] == "queue"


@pytest.mark.parametrize("engine", sorted(PRESETS))
def test_every_preset_reads_the_queue_and_renders_grouped_by_the_selector_s_labels(engine: str) -> None:
    """Every preset has a queue family; every family renders grouped by the given labels, no placeholder."""
    preset = PRESETS[engine]
    queue = preset.family("queue_waiting")
    assert queue is not None
    # Every server preset counts its pods; Dynamo's frontend sums its workers in one process,
    # and no worker series carries the model: its replicas come from Kubernetes only.
    assert (preset.family("replicas_reporting") is not None) != (engine == "dynamo")
    query = queue.render(("model_name", "namespace"), "1m")
    assert "by (model_name, namespace)" in query
    assert "{by}" not in query
    for family in preset.families:
        rendered = family.render(("pod",), "30s")
        assert "{window}" not in rendered
        assert "{by}" not in rendered
        if family.combine is Combine.HISTOGRAM:
            assert "by (le, pod)" in rendered
            assert "_bucket[30s]" in rendered


def test_a_label_name_that_is_not_one_is_refused_before_it_reaches_promql() -> None:
    """A label name that is not a valid Prometheus label raises ValueError before rendering PromQL."""
    family = PRESETS["vllm"].family("queue_waiting")
    assert family is not None
    with pytest.raises(ValueError, match="invalid label name"):
        family.render(("model_name) or vector(1) #",), "1m")


def test_triton_s_first_response_histogram_is_in_milliseconds() -> None:
    """Triton's TTFT histogram is scaled from milliseconds; TGI has no TTFT family."""
    ttft = PRESETS["triton"].family("ttft")
    assert ttft is not None
    assert ttft.le_scale == 0.001
    assert PRESETS["tgi"].family("ttft") is None  # TGI exports no time-to-first-token histogram


def test_the_compact_line_says_again_only_what_changed() -> None:
    """The default line keeps target, binding, proposals and clamp steps; the lead and capacity once,
    and the capacity again only when a figure moved by 5% or more."""
    engine = engine_for({"minReplicas": "2", "maxReplicas": "12", "promptTokensPerSecondPerReplica": "9000"})
    lines = CompactLines()

    def line(second: int, slots_in_use: float) -> str:
        obs = Observation(
            now=NOW.replace(second=second),
            queue_waiting=0,
            requests_running=60,
            kv_cache_usage=slots_in_use,
            current_replicas=4,
            ready_replicas=4,
            gpu_schedulable_replicas=8,
        )
        return lines(engine.decide(obs))

    first, same, moved = line(0, 0.5), line(15, 0.5), line(30, 0.25)
    # the first observation: the 4 standing held while the demand warms up (signals/last_known.py)
    assert first.startswith("2026-12-01T09:30:00Z target=4 last_known [floor=2 queue=0 last_known=4*]")
    assert "| lead 180s (default)" in first
    assert "capacity: 9,000 prompt tokens/s (configured), 30 slots (measured: KV cache usage)" in first
    assert "capacity" not in same
    assert "lead" not in same
    assert "slots (measured: KV cache usage)" in moved  # 60 running at a quarter of the cache: the slots move
    assert max(len(same), len(moved)) < 160  # the first line says everything once


def test_the_wide_line_shows_the_replica_counts_seen() -> None:
    """--output wide shows current and Ready replicas (and Pending, starting when there are any)."""
    engine = engine_for({"minReplicas": "2", "maxReplicas": "12", "targetQueuePerReplica": "10"})
    seen = Observation(
        now=NOW,
        queue_waiting=30,
        current_replicas=5,
        ready_replicas=3,
        pending_replicas=2,
        starting_replicas=0,
    )
    assert "| replicas: current 5, Ready 3, Pending 2 |" in format_line(engine.decide(seen))
    unknown = Observation(now=NOW, queue_waiting=30)
    assert "| replicas: current ?, Ready ? |" in format_line(engine.decide(unknown))


def test_a_p99_above_the_objective_beside_none_over_it_says_why() -> None:
    """p99 2.12 s beside 0% over a 2 s objective (one window, two estimates inside the (1, 2.5]
    bucket) carries a note in the JSON and a pointer in the wide line; agreeing figures carry none."""
    engine = engine_for({"minReplicas": "2", "maxReplicas": "12", "targetQueuePerReplica": "10"})
    seen = Observation(now=NOW, queue_waiting=0, ttft_p99_seconds=2.125, ttft_over_objective=0.0)
    d = engine.decide(seen)
    body = json.loads(format_json(d, "inference/llama", 2.0))
    assert body["ttft_note"].startswith(
        "TTFT p99 2.12s and 0.0% over the 2s objective come from the same rate window of the TTFT"
        " histogram, estimated differently inside the bucket the objective falls in"
    )
    assert "| ttft: p99 2.12s, 0.0% over 2s (one window, two estimates" in format_line(d, objective_s=2.0)
    agreeing = engine.decide(
        Observation(now=NOW, queue_waiting=0, ttft_p99_seconds=2.5, ttft_over_objective=0.03)
    )
    assert "ttft_note" not in json.loads(format_json(agreeing, None, 2.0))
    assert "| ttft: p99 2.50s, 3.0% over 2s |" in format_line(agreeing, objective_s=2.0)
