"""What one replica holds, measured: slots from the KV cache, prefill from the mean TTFT, decode slowdown."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scaler.capacity import CapacityModel, service_time
from scaler.config import parse_metadata
from scaler.demand import DemandReader
from scaler.model import Observation
from scaler.queueing import erlang_c

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def run(model: CapacityModel, observations: list[Observation]) -> None:
    """Feed the observations through a demand reader into the model, as the engine does."""
    reader = DemandReader()
    for obs in observations:
        model.observe(obs, reader.read(obs))


def steady(
    i: int,
    ready: int = 4,
    running: float = 48.0,
    kv: float | None = 0.5,
    waiting: float = 0.0,
    **extra: float,
) -> Observation:
    """Refresh ``i`` (15 s apart) of a steady fleet: 4 Ready, 48 running, half the KV cache used."""
    values: dict[str, float] = {
        "requests_per_s": 4.0,
        "prompt_tokens_per_s": 4800.0,
        "generation_tokens_per_s": 800.0,
        "ttft_mean_seconds": 0.3,
    }
    values.update(extra)
    return Observation(
        now=T0 + timedelta(seconds=15 * i),
        ready_replicas=ready,
        current_replicas=ready,
        requests_running=running,
        queue_waiting=waiting,
        kv_cache_usage=kv,
        **values,  # type: ignore[arg-type]
    )


def test_slots_from_the_kv_cache_usage() -> None:
    """48 running on 4 replicas at half the KV cache: 24 slots each, measured on the first reading."""
    model = CapacityModel(parse_metadata({}))
    run(model, [steady(i) for i in range(3)])
    capacity = model.capacity()
    assert capacity.slots == pytest.approx(24.0)
    assert capacity.slots_source == "measured"


def test_slots_from_waiting_only_without_a_kv_gauge() -> None:
    """Without a KV gauge, requests waiting on every replica say the replicas are full; with it, no."""
    model = CapacityModel(parse_metadata({}))
    run(model, [steady(i, running=80.0, kv=None, waiting=12.0) for i in range(3)])
    assert model.capacity().slots == pytest.approx(20.0)
    # With the gauge, queues left on a few replicas after a scale-up do not fool it.
    fooled = CapacityModel(parse_metadata({}))
    run(fooled, [steady(i, running=30.0, kv=0.2, waiting=12.0) for i in range(3)])
    assert fooled.capacity().slots is None  # below a quarter of the cache: nothing to read


def test_where_max_num_seqs_binds_first_the_cache_share_of_a_full_batch_is_learned() -> None:
    """24 sequences a replica (max_num_seqs) fill 60% of the cache: 96 running on 4 replicas with 12
    waiting. Until the fleet has settled the cache reading says 96 / 4 / 0.6 = 40; once requests
    have waited on every replica of a settled fleet, the share a full batch uses (0.6) is learned and
    every later reading, at any load, says 24. A cache seen fuller than that raises the share at once."""
    model = CapacityModel(parse_metadata({}))
    run(model, [steady(i, running=96.0, kv=0.6, waiting=12.0) for i in range(3)])
    assert model.capacity().slots == pytest.approx(40.0)  # 30 s after the last change: not settled
    reader = DemandReader()
    learned = CapacityModel(parse_metadata({}))
    for i in range(6):  # settled from 60 s (a rate window; 24 s in service)
        obs = steady(i, running=96.0, kv=0.6, waiting=12.0)
        learned.observe(obs, reader.read(obs))
    for i in range(6, 300):  # then half the load: nobody waits, 30% of the cache
        obs = steady(i, running=48.0, kv=0.3)
        learned.observe(obs, reader.read(obs))
    assert learned.capacity().slots == pytest.approx(24.0, rel=0.01)
    obs = steady(300, running=112.0, kv=0.8)  # 28 a replica: the batch holds more than was learned
    learned.observe(obs, reader.read(obs))
    for i in range(301, 600):
        obs = steady(i, running=48.0, kv=0.3)
        learned.observe(obs, reader.read(obs))
    assert learned.capacity().slots == pytest.approx(32.0, rel=0.01)  # 12 / 0.3 x 0.8


def test_a_backlog_prefill_explains_teaches_nothing_of_the_batch() -> None:
    """Requests waiting on every replica while the prompts arrive faster than the replicas prefill
    them (5,000 tokens/s configured, 4 x 5,000 = 20,000 offered) wait for prefill, not for slots."""
    model = CapacityModel(parse_metadata({"promptTokensPerSecondPerReplica": "5000"}))
    run(
        model,
        [steady(i, running=96.0, kv=0.6, waiting=12.0, prompt_tokens_per_s=20000.0) for i in range(6)]
        + [steady(i, running=48.0, kv=0.3) for i in range(6, 300)],
    )
    assert model.capacity().slots == pytest.approx(40.0, rel=0.01)


def test_slots_from_a_saturated_router_and_from_an_exported_max_num_seqs() -> None:
    """A router that stops dispatching at saturation says each replica holds what it runs now; an
    exported max_num_seqs is the slots, unless the KV cache says fewer."""
    gated = CapacityModel(parse_metadata({}))
    run(gated, [steady(i, running=64.0, kv=0.8, router_saturation=1.02) for i in range(3)])
    assert gated.capacity().slots == pytest.approx(16.0)  # not 64 / 4 / 0.8 = 20: the router's limit
    # Below saturation the KV reading holds the router's threshold: its flow control sends a replica
    # nothing more once the cache is 80% used, so 48 / 4 / 0.6 = 20 sequences fit, 16 are given.
    below = CapacityModel(parse_metadata({}))
    run(below, [steady(i, running=48.0, kv=0.6, router_saturation=0.75) for i in range(3)])
    assert below.capacity().slots == pytest.approx(16.0)
    exported = CapacityModel(parse_metadata({}))
    run(exported, [steady(i, running=40.0, kv=None, slots_per_replica=32.0) for i in range(3)])
    assert exported.capacity().slots == pytest.approx(32.0)
    fuller = CapacityModel(parse_metadata({}))
    run(fuller, [steady(i, running=48.0, kv=0.5, slots_per_replica=32.0) for i in range(3)])
    assert fuller.capacity().slots == pytest.approx(24.0)  # the cache holds 24 of the 32


def test_the_itl_objective_allows_the_batch_its_learned_line_gives() -> None:
    """The inter-token latency, 20 ms plus 40 ms at a full batch of 64, its p99 1.5 times its mean:
    a 60 ms objective allows 32 sequences a replica; with no objective, no limit."""

    def refresh(i: int) -> Observation:
        share = 0.3 + 0.6 * (i % 12) / 11  # a third to nine tenths of the slots in use
        mean = 0.020 + 0.040 * share
        return steady(i, running=4 * 64 * share, kv=share, itl_mean_seconds=mean, itl_tail_seconds=1.5 * mean)

    limited = CapacityModel(parse_metadata({"itlObjectiveSeconds": "0.06"}))
    run(limited, [refresh(i) for i in range(400)])
    assert limited.capacity().slots == pytest.approx(64.0)
    assert limited.capacity().itl_slots == pytest.approx(32.0, rel=0.02)
    free = CapacityModel(parse_metadata({}))
    run(free, [refresh(i) for i in range(400)])
    assert free.capacity().itl_slots is None


def test_no_slot_reading_while_removed_replicas_drain() -> None:
    """After a scale-down, running still counts the removed replicas' sequences: not read until they end."""
    model = CapacityModel(parse_metadata({}))
    reader = DemandReader()
    for i in range(8):
        obs = steady(i, ready=6, running=72.0)
        model.observe(obs, reader.read(obs))
    before = model.capacity().slots
    assert before == pytest.approx(24.0)
    # 6 -> 3 Ready while 60 still run (some on the draining three): 60 / 3 / 0.5 would read 40
    for i in range(8, 9):
        obs = steady(i, ready=3, running=60.0, kv=0.5)
        model.observe(obs, reader.read(obs))
    assert model.capacity().slots == pytest.approx(before)


def test_prefill_rate_from_the_mean_ttft_by_the_mm_c_model() -> None:
    """The service time that reproduces the mean TTFT in M/M/c gives the prefill rate (docstring example)."""
    s = service_time(0.30, 6.0, 4)
    assert s is not None
    load = 6.0 * s
    assert s + erlang_c(4, load) * s / (4 - load) == pytest.approx(0.30, rel=1e-6)
    assert 1000 / s == pytest.approx(3500, rel=0.01)
    model = CapacityModel(parse_metadata({}))
    run(
        model,
        [
            steady(i, ttft_mean_seconds=0.30, requests_per_s=6.0, prompt_tokens_per_s=6000.0)
            for i in range(12)
        ],
    )
    capacity = model.capacity()
    assert capacity.prefill_tokens_per_s == pytest.approx(1000 / s, rel=0.01)
    assert capacity.prefill_source == "measured"


def test_prefill_is_not_read_from_a_fleet_that_just_changed_or_waits() -> None:
    """The mean TTFT measures prefill only on a fleet steady for a rate window with nobody waiting."""
    model = CapacityModel(parse_metadata({"promptTokensPerSecondPerReplica": "9000"}))
    run(model, [steady(i, ready=2 + i % 2) for i in range(12)])  # Ready changes every refresh
    assert model.capacity().prefill_tokens_per_s == 9000.0
    assert model.capacity().prefill_source == "configured"
    waiting = CapacityModel(parse_metadata({"promptTokensPerSecondPerReplica": "9000"}))
    run(waiting, [steady(i, waiting=3.0) for i in range(12)])
    assert waiting.capacity().prefill_source == "configured"


def test_a_configured_capacity_is_where_the_measurement_starts() -> None:
    """A configured prefill rate twice too high moves towards what is measured, a tenth per refresh."""
    model = CapacityModel(parse_metadata({"promptTokensPerSecondPerReplica": "9000"}))
    run(model, [steady(i) for i in range(60)])
    s = service_time(0.3, 4.0, 4)
    assert s is not None
    assert model.capacity().prefill_tokens_per_s == pytest.approx(1200 / s, rel=0.05)


def test_configured_generation_rate_gives_the_slots_until_measured() -> None:
    """generationTokensPerSecondPerReplica over what one sequence decodes now starts the slots.

    The start follows the latest reading (a first rate window may still hold idle seconds
    and read a sequence's speed too low), until a measurement moves it.
    """
    model = CapacityModel(parse_metadata({"generationTokensPerSecondPerReplica": "432"}))
    first = steady(0, running=40.0, kv=None, generation_tokens_per_s=120.0)
    run(model, [first, steady(1, running=40.0, kv=None, generation_tokens_per_s=720.0)])
    assert model.capacity().slots == pytest.approx(432 / (720 / 40))
    assert model.capacity().slots_source == "configured"


@pytest.mark.parametrize(("shared", "expected"), [(True, 1.0), (False, 0.0)])
def test_decode_slowdown_is_learned_from_the_refreshes(shared: bool, expected: float) -> None:
    """Decode speed falling with prefill's busy share reads as 1; speed that ignores it, as 0."""
    model = CapacityModel(parse_metadata({"promptTokensPerSecondPerReplica": "5000"}))
    reader = DemandReader()
    for i in range(400):
        busy = 0.1 + 0.5 * (i % 20) / 20  # prefill keeps a replica 10% to 60% busy
        served = busy * 4 * 5000 / 1000  # 4 replicas, 1,000-token prompts
        speed = 20.0 * (1 - busy) if shared else 20.0
        decoding = 40.0
        obs = Observation(
            now=T0 + timedelta(seconds=15 * i),
            ready_replicas=4,
            current_replicas=4,
            queue_waiting=0,
            requests_per_s=served,
            prompt_tokens_per_s=served * 1000,
            generation_tokens_per_s=speed * decoding,
            requests_running=decoding + served * 0.2,
            ttft_mean_seconds=0.2,
            kv_cache_usage=0.5,
        )
        model.observe(obs, reader.read(obs))
    beta = model.capacity().decode_slowdown
    assert beta is not None
    assert beta == pytest.approx(expected, abs=0.1)
