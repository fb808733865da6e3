"""The replayed replica: each figure from --cluster, the history, the trigger or the default, and the
history's measurement by the decider's own capacity model (scaler/replay/replica.py)."""

from __future__ import annotations

import dataclasses
import math
from datetime import UTC, datetime, timedelta

import pytest

from scaler.config import parse_metadata
from scaler.model import Observation
from scaler.replay import replica
from scaler.replay.fleet.cluster import ClusterConfig

T0 = datetime(2026, 11, 23, tzinfo=UTC)
# A known replica: 3,000 prompt tokens/s, 8 slots, 14 tokens/s a sequence, decoding unslowed.
PREFILL, SLOTS, DECODE = 3000.0, 8, 14.0
PROMPT, OUTPUT = 900.0, 220.0


def _points(count: int = 240, ready: int = 4) -> list[Observation]:
    """A minute a point of a fleet of the known replica that nobody waits on: a daily-like swing of
    0.6 to 1.6 requests/s, each first token its prefill, the slots as full as Little's law says."""
    points = []
    for k in range(count):
        served = 1.1 + 0.5 * math.sin(2 * math.pi * k / 120)
        prefill_s = PROMPT / PREFILL
        in_service = prefill_s + (OUTPUT - 1) / DECODE
        running = served * in_service
        points.append(
            Observation(
                now=T0 + timedelta(minutes=k),
                queue_waiting=0.0,
                requests_running=running,
                prompt_tokens_per_s=served * PROMPT,
                generation_tokens_per_s=served * OUTPUT,
                requests_per_s=served,
                ttft_mean_seconds=prefill_s,
                kv_cache_usage=running / ready / SLOTS,
                ready_replicas=ready,
                current_replicas=ready,
            )
        )
    return points


POLICY = parse_metadata({"engine": "vllm", "promptTokensPerSecondPerReplica": "9000"})


def test_the_decider_s_capacity_model_measures_a_known_replica() -> None:
    """Warmed over the points, the capacity model reads the prefill rate and the slots within 2%,
    however the trigger configured them; Little's law reads the decode rate (corrected for the
    default shared physics by the prefill's share)."""
    measured = replica.measure(_points(), POLICY)
    figures = measured.figures
    assert measured.points == 240
    assert figures["prefill_tokens_per_s"].value == pytest.approx(PREFILL, rel=0.02)
    assert figures["decode_slots"].value == pytest.approx(SLOTS, rel=0.02)
    assert figures["prefill_tokens_per_s"].samples >= replica.MIN_SAMPLES
    spread = figures["decode_slots"].spread
    assert spread is not None
    assert spread[0] <= SLOTS * 1.02
    assert spread[1] >= SLOTS * 0.98
    # Shared physics (not measured here): 14 / (1 - f), f = 900 x 1.1 / (4 x 3000) = 0.08 on average.
    assert figures["decode_tokens_per_s_per_seq"].value == pytest.approx(DECODE / (1 - 0.0825), rel=0.03)


def test_the_docstring_s_worked_example_of_the_decode_rate() -> None:
    """4 replicas, 20 sequences, 1.2 first tokens/s at 0.3 s, 276 generated/s: 14.0 tokens/s a sequence;
    15.4 under shared physics with 1,080 prompt tokens/s on a 3,000 tokens/s prefill."""
    point = Observation(
        now=T0,
        queue_waiting=0.0,
        requests_running=20.0,
        requests_per_s=1.2,
        ttft_mean_seconds=0.3,
        generation_tokens_per_s=276.0,
        prompt_tokens_per_s=1080.0,
        ready_replicas=4,
    )
    assert replica._decode_rates([point], None, shared=False) == [pytest.approx(13.99, abs=0.01)]
    assert replica._decode_rates([point], 3000.0, shared=True) == [pytest.approx(15.4, abs=0.05)]
    waiting = dataclasses.replace(point, queue_waiting=3.0)
    assert replica._decode_rates([waiting], None, shared=False) == []  # its TTFT holds the queue


def test_cluster_wins_then_the_history_then_the_trigger_then_the_default() -> None:
    """A key written in --cluster wins (the measurement said, unused); a measurement beats the trigger's
    promptTokensPerSecondPerReplica; the trigger beats the default; a default says why."""
    measured = replica.measure(_points(), POLICY)
    cluster = ClusterConfig(decode_slots=24)
    chosen = {
        f.name: f for f in replica.choose(cluster, frozenset({"decode_slots"}), POLICY, measured).figures
    }
    assert (chosen["decode_slots"].value, chosen["decode_slots"].source) == (24, "configured")
    assert "the history measured 8 sequences at once, not used" in chosen["decode_slots"].said
    assert chosen["prefill_tokens_per_s"].source == "measured"
    assert chosen["prefill_tokens_per_s"].value == pytest.approx(PREFILL, rel=0.02)
    assert chosen["gpus_per_replica"].source == "default"
    assert "the history does not hold it" in chosen["gpus_per_replica"].said

    from_trace = {f.name: f for f in replica.choose(ClusterConfig(), frozenset(), POLICY, None).figures}
    assert (from_trace["prefill_tokens_per_s"].value, from_trace["prefill_tokens_per_s"].source) == (
        9000.0,
        "trigger",
    )
    assert from_trace["decode_slots"].source == "default"
    assert "a trace holds nothing to measure it from" in from_trace["decode_slots"].said


def test_too_few_refreshes_leave_a_figure_unmeasured_and_say_so() -> None:
    """Fewer than MIN_SAMPLES refreshes measure nothing: the default runs, with the count said."""
    measured = replica.measure(_points(count=3), parse_metadata({"engine": "vllm"}))
    assert "prefill_tokens_per_s" not in measured.figures
    chosen = replica.choose(ClusterConfig(), frozenset(), parse_metadata({"engine": "vllm"}), measured)
    prefill = next(f for f in chosen.figures if f.name == "prefill_tokens_per_s")
    assert prefill.source == "default"
    assert f"fewer than {replica.MIN_SAMPLES}" in prefill.said
    assert "prefill" in chosen.defaults()
