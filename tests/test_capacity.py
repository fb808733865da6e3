"""What one replica holds, measured: slots from the cache and the cap, prefill from phase times, slowdown."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scaler.config import parse_metadata
from scaler.decider.capacity import CapacityModel
from scaler.decider.demand import DemandReader
from scaler.model import Capacity, Observation
from tests.helpers import slowdown_history

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def run(model: CapacityModel, observations: list[Observation]) -> None:
    """Feed the observations through a demand reader into the model, as the engine does."""
    reader = DemandReader()
    for obs in observations:
        model.observe(obs, reader.read(obs))


def measured(observations: Iterable[Observation]) -> Capacity:
    """What a model with no capacity configured measures from ``observations``, fed as ``run`` does."""
    model = CapacityModel(parse_metadata({}).spec)
    run(model, list(observations))
    return model.capacity()


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
    model = CapacityModel(parse_metadata({}).spec)
    run(model, [steady(i) for i in range(3)])
    capacity = model.capacity()
    assert capacity.slots == pytest.approx(24.0)
    assert capacity.slots_source == "measured"


def test_where_max_num_seqs_binds_first_the_cap_is_measured_at_slot_bound_refreshes() -> None:
    """24 sequences a replica (max_num_seqs) fill 60% of the cache: 96 running on 4 replicas with 12
    waiting and prefill busy 0.2 of the time. The cache reading says 96 / 4 / 0.6 = 40 at once; once
    requests have waited on every replica of a settled fleet with the cache below full, the cap (24)
    is measured, and every later reading, at any load, says 24. A batch seen running more raises
    the cap at once."""
    fast: Any = {"prefill_time_mean_seconds": 0.2}  # busy = 4 served/s x 0.2 s / 4 replicas = 0.2
    model = CapacityModel(parse_metadata({}).spec)
    run(model, [steady(i, running=96.0, kv=0.6, waiting=12.0, **fast) for i in range(3)])
    assert model.capacity().slots == pytest.approx(40.0)  # 30 s after the last change: not settled
    learned = CapacityModel(parse_metadata({}).spec)
    run(
        learned,
        [steady(i, running=96.0, kv=0.6, waiting=12.0, **fast) for i in range(6)]  # settled from 60 s
        + [steady(i, running=48.0, kv=0.3, **fast) for i in range(6, 300)],  # half the load
    )
    capacity = learned.capacity()
    assert capacity.slots == pytest.approx(24.0, rel=0.01)
    assert capacity.slots_method == "running while every slot was busy"
    raised = CapacityModel(parse_metadata({}).spec)
    run(
        raised,
        [steady(i, running=96.0, kv=0.6, waiting=12.0, **fast) for i in range(6)]
        + [steady(i, running=112.0, kv=0.7, waiting=12.0, **fast) for i in range(6, 8)]  # 28 a replica
        + [steady(i, running=48.0, kv=0.3, **fast) for i in range(8, 300)],
    )
    assert raised.capacity().slots == pytest.approx(28.0, rel=0.01)


def test_prompts_queued_behind_prefill_teach_no_cap_where_the_busiest_replica_computes_prompts() -> None:
    """Requests waiting on every replica behind prompts (vLLM V1 counts a request waiting until its
    prefill starts): 48 running on 4 replicas of a 64-slot cache, 40 waiting. Every replica is full
    (the saturation reads "slots": the engine admits no more), but the busiest replica computes
    prompts all the time (its prefill busy 1.0): it runs what its prefill lets in, so its 12 are
    not read as the engine's cap (broken once: with its prefill half busy the cap reads 12), and
    the slots stay what the cache says (12 / 0.1875 = 64, read once the cache is a quarter used)."""
    queued: Any = {
        "prefill_time_mean_seconds": 1.0,
        "prefill_busy_max": 1.0,
        "requests_running_max": 12.0,
        "kv_cache_usage_max": 0.1875,
    }
    model = CapacityModel(parse_metadata({}).spec)
    run(model, [steady(i, running=48.0, kv=0.1875, waiting=40.0, **queued) for i in range(40)])
    capacity = model.capacity()
    assert capacity.saturation == "slots"
    assert capacity.slots is None  # the cache below a quarter used: nothing read from it either
    half = CapacityModel(parse_metadata({}).spec)
    queued_half = {**queued, "requests_running_max": 32.0, "kv_cache_usage_max": 0.5}
    run(half, [steady(i, running=128.0, kv=0.5, waiting=40.0, **queued_half) for i in range(40)])
    assert half.capacity().slots == pytest.approx(64.0, rel=0.01)
    assert half.capacity().slots_method == "KV cache usage"
    # And the prefill rate is what the prefill time says: 1,200 tokens in 1 s.
    assert half.capacity().prefill_tokens_per_s == pytest.approx(1200.0, rel=0.01)


def test_every_slot_busy_with_requests_waiting_measures_the_slots_without_a_kv_gauge() -> None:
    """Without a KV gauge only the refreshes where every replica is full measure the slots: 80
    running on 4 replicas with 12 waiting read 20 once the count holds still; with fewer waiting
    than replicas (room somewhere) nothing is read."""
    idle_prefill: Any = {"prefill_time_mean_seconds": 0.1}
    model = CapacityModel(parse_metadata({}).spec)
    run(model, [steady(i, running=80.0, kv=None, waiting=12.0, **idle_prefill) for i in range(8)])
    assert model.capacity().slots == pytest.approx(20.0)
    assert model.capacity().saturation == "slots"
    room = CapacityModel(parse_metadata({}).spec)
    run(room, [steady(i, running=80.0, kv=None, waiting=3.0, **idle_prefill) for i in range(8)])
    assert room.capacity().saturation == "room"
    assert room.capacity().slots is None
    # With a gauge below a quarter of the cache, nothing is read from it.
    low = CapacityModel(parse_metadata({}).spec)
    run(low, [steady(i, running=30.0, kv=0.2) for i in range(8)])
    assert low.capacity().slots is None


def test_slots_from_a_saturated_router_and_from_an_exported_max_num_seqs() -> None:
    """A router that holds requests (it stopped dispatching at saturation) says each replica holds what
    it runs now, whether its saturation gauge is read or dropped for a stale endpoint; an exported
    max_num_seqs is the slots, unless the KV cache says fewer."""
    gated = CapacityModel(parse_metadata({}).spec)
    run(
        gated,
        [
            steady(i, running=64.0, kv=0.8, router_saturation=1.02, router_queue_waiting=30.0)
            for i in range(3)
        ],
    )
    assert gated.capacity().slots == pytest.approx(16.0)  # not 64 / 4 / 0.8 = 20: the router's limit
    stale = CapacityModel(parse_metadata({}).spec)
    run(stale, [steady(i, running=64.0, kv=0.8, router_queue_waiting=30.0) for i in range(3)])
    assert stale.capacity().slots == pytest.approx(16.0)  # the gauge dropped, the queue still read
    # Below saturation the KV reading holds the router's threshold: its flow control sends a replica
    # nothing more once the cache is 80% used, so 48 / 4 / 0.6 = 20 sequences fit, 16 are given.
    below = CapacityModel(parse_metadata({"router": "llm-d", "inferencePool": "pool"}).spec)
    run(below, [steady(i, running=48.0, kv=0.6, router_saturation=0.75) for i in range(3)])
    assert below.capacity().slots == pytest.approx(16.0)
    exported = CapacityModel(parse_metadata({}).spec)
    run(exported, [steady(i, running=40.0, kv=None, slots_per_replica=32.0) for i in range(3)])
    assert exported.capacity().slots == pytest.approx(32.0)
    fuller = CapacityModel(parse_metadata({}).spec)
    run(fuller, [steady(i, running=48.0, kv=0.5, slots_per_replica=32.0) for i in range(3)])
    assert fuller.capacity().slots == pytest.approx(24.0)  # the cache holds 24 of the 32


def test_the_itl_objective_allows_the_batch_its_learned_line_gives() -> None:
    """The inter-token latency, 20 ms plus 40 ms at a full batch of 64, its p99 1.5 times its mean:
    a 60 ms objective allows 32 sequences a replica; with no objective, no limit."""

    def refresh(i: int) -> Observation:
        share = 0.3 + 0.6 * (i % 12) / 11  # a third to nine tenths of the slots in use
        mean = 0.020 + 0.040 * share
        return steady(i, running=4 * 64 * share, kv=share, itl_mean_seconds=mean, itl_tail_seconds=1.5 * mean)

    limited = CapacityModel(parse_metadata({"itlObjectiveSeconds": "0.06"}).spec)
    run(limited, [refresh(i) for i in range(400)])
    assert limited.capacity().slots == pytest.approx(64.0)
    assert limited.capacity().itl_slots == pytest.approx(32.0, rel=0.02)
    free = CapacityModel(parse_metadata({}).spec)
    run(free, [refresh(i) for i in range(400)])
    assert free.capacity().itl_slots is None


def test_no_slot_reading_while_removed_replicas_drain() -> None:
    """After a scale-down, running still counts the removed replicas' sequences: not read until they end."""
    model = CapacityModel(parse_metadata({}).spec)
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


def test_the_prefill_rate_comes_from_the_phase_times_where_the_engine_exports_them() -> None:
    """vLLM's prefill time: 1,200-token prompts prefilled in 0.24 s on average are 5,000 tokens/s,
    whatever the TTFT's queueing; SGLang's queue time: a 0.3 s TTFT of which 0.06 s waited leaves
    0.24 s of prefill, 5,000 too. Each says where it came from."""
    vllm = CapacityModel(parse_metadata({}).spec)
    run(
        vllm,
        [steady(i, waiting=30.0, ttft_mean_seconds=2.5, prefill_time_mean_seconds=0.24) for i in range(40)],
    )
    assert vllm.capacity().prefill_tokens_per_s == pytest.approx(5000.0, rel=0.01)
    assert vllm.capacity().prefill_method == "prefill-time histogram"
    sglang = CapacityModel(parse_metadata({}).spec)
    run(sglang, [steady(i, waiting=3.0, queue_time_mean_seconds=0.06) for i in range(40)])
    assert sglang.capacity().prefill_tokens_per_s == pytest.approx(5000.0, rel=0.01)
    assert sglang.capacity().prefill_method == "TTFT less the queue time"


def test_without_phase_times_the_prefill_rate_is_the_ttft_bound_while_nobody_waits() -> None:
    """No phase time exported: the mean TTFT while nobody waits bounds the prefill from below
    (1,200 tokens in 0.3 s: at least 4,000 tokens/s), and says so; a fleet that waits or just
    changed teaches it nothing; configured, it is where the readings start."""
    model = CapacityModel(parse_metadata({}).spec)
    run(model, [steady(i) for i in range(40)])
    capacity = model.capacity()
    assert capacity.prefill_tokens_per_s == pytest.approx(4000.0, rel=0.01)
    assert capacity.prefill_method == "TTFT while nobody waited (a lower bound)"
    assert "prefill from TTFT while nobody waited (a lower bound)" in capacity.describe()
    changing = CapacityModel(parse_metadata({"promptTokensPerSecondPerReplica": "9000"}).spec)
    run(changing, [steady(i, ready=2 + i % 2) for i in range(12)])  # Ready changes every refresh
    assert changing.capacity().prefill_tokens_per_s == 9000.0
    assert changing.capacity().prefill_source == "configured"
    waiting = CapacityModel(parse_metadata({"promptTokensPerSecondPerReplica": "9000"}).spec)
    run(waiting, [steady(i, waiting=3.0) for i in range(12)])
    assert waiting.capacity().prefill_source == "configured"


def test_a_configured_rate_too_high_is_corrected_by_the_prefill_time_and_bounded_without_it() -> None:
    """Configured 4x too high (20,000 where a replica prefills 5,000), requests waiting on every
    replica behind prompts (20,000 prompt tokens/s over 4 replicas). With the prefill time exported
    the estimate is within 15% of 5,000 in 6 minutes. Without it nothing in the queue says the rate:
    the configured one stands, and the TTFT while nobody waits (1,200 tokens in 0.3 s: at least
    4,000) lowers it only slowly, as the bound from below it is (broken once: at the phase time's
    weight it falls to 4,000 in minutes). What the engine sizes with it is then corrected by the
    measured objective (``scaler.decider.calibration``, tests/test_calibration.py)."""
    saturated: Any = {"requests_per_s": 16.7, "prompt_tokens_per_s": 20000.0}
    timed = CapacityModel(parse_metadata({"promptTokensPerSecondPerReplica": "20000"}).spec)
    run(
        timed,
        [
            steady(i, waiting=40.0, running=48.0, prefill_time_mean_seconds=0.24, **saturated)
            for i in range(24)
        ],
    )
    assert timed.capacity().prefill_tokens_per_s == pytest.approx(5000.0, rel=0.15)  # 6 minutes
    untimed = CapacityModel(parse_metadata({"promptTokensPerSecondPerReplica": "20000"}).spec)
    run(untimed, [steady(i, waiting=40.0, running=48.0, kv=0.25, **saturated) for i in range(30)])
    assert untimed.capacity().saturation == "slots"
    assert untimed.capacity().prefill_tokens_per_s == 20000.0
    run(untimed, [steady(i) for i in range(30, 70)])  # ten minutes with nobody waiting
    capacity = untimed.capacity()
    assert capacity.prefill_method == "TTFT while nobody waited (a lower bound)"
    assert (
        8000.0 < (capacity.prefill_tokens_per_s or 0.0) < 20000.0
    )  # 12,800: a third of the way in log space


def test_configured_generation_rate_gives_the_slots_until_measured() -> None:
    """generationTokensPerSecondPerReplica over what one sequence decodes now starts the slots.

    The start follows the latest reading (a first rate window may still hold idle seconds
    and read a sequence's speed too low), until a measurement moves it.
    """
    model = CapacityModel(parse_metadata({"generationTokensPerSecondPerReplica": "432"}).spec)
    first = steady(0, running=40.0, kv=None, generation_tokens_per_s=120.0)
    run(model, [first, steady(1, running=40.0, kv=None, generation_tokens_per_s=720.0)])
    assert model.capacity().slots == pytest.approx(432 / (720 / 40))
    assert model.capacity().slots_source == "configured"


def test_the_configured_generation_rate_s_slots_are_a_bound_from_below_once_the_fleet_settled() -> None:
    """G over what one sequence decodes now is a full batch's slots only at a full batch: a batch
    with room steps faster and reads fewer. So on a settled fleet the largest reading stands:
    1,165 tokens/s over 44 sequences decoding 1,452 tokens/s reads 35; 104 decoding 1,143 read 106;
    the lighter minute after it leaves 106 (read afresh, the slots and the fleet moved with the load)."""
    model = CapacityModel(parse_metadata({"generationTokensPerSecondPerReplica": "1165"}).spec)
    light: Any = {"running": 44.0, "generation_tokens_per_s": 1452.0, "kv": None}
    heavy: Any = {"running": 104.0, "generation_tokens_per_s": 1143.0, "kv": None}
    run(model, [steady(i, **light) for i in range(8)])  # two minutes: settled from one rate window
    assert model.capacity().slots == pytest.approx(1165 * 44 / 1452)
    run(model, [steady(i, **heavy) for i in range(8, 12)])
    assert model.capacity().slots == pytest.approx(1165 * 104 / 1143)
    run(model, [steady(i, **light) for i in range(12, 20)])
    assert model.capacity().slots == pytest.approx(1165 * 104 / 1143)
    assert model.capacity().slots_source == "configured"


def test_the_engines_kv_cache_size_starts_the_slots_over_the_tokens_a_sequence_holds() -> None:
    """vLLM's cache_config_info kv_cache_size_tokens, summed over 4 engines (1,163,700 tokens), on 4
    Ready replicas with 1,200-token prompts and 200-token outputs (4,800 and 800 tokens/s at 4
    requests/s): a sequence holds 1,300 tokens on average, so 224 slots a replica, before the cache's
    use is read, and ahead of a configured decode rate. Once the use is read (half full at 12 a
    replica: 24 slots) the measurement moves it, and the start no longer names it. A size short of
    one sequence a replica is not read."""
    spec = parse_metadata({"generationTokensPerSecondPerReplica": "432"}).spec
    model = CapacityModel(spec)
    run(model, [steady(i, kv=None, kv_cache_tokens=1_163_700.0) for i in range(2)])
    capacity = model.capacity()
    assert capacity.slots == pytest.approx(1_163_700 / 4 / (1200 + 200 / 2))
    assert (capacity.slots_source, capacity.slots_method) == (
        "exported",
        "the engines' KV cache size over the tokens a sequence holds",
    )
    run(model, [steady(i, kv_cache_tokens=1_163_700.0) for i in range(2, 60)])
    read = model.capacity()
    assert (read.slots_source, read.slots_method) == ("measured", "KV cache usage")
    assert read.slots == pytest.approx(24.0, rel=0.05)
    older = CapacityModel(spec)  # a vLLM before the label: the configured decode rate starts it
    run(older, [steady(i, kv=None) for i in range(2)])
    assert older.capacity().slots == pytest.approx(432 / (800 / 48))
    # A share short of one sequence (5,000 tokens on 4 replicas) is no running engine's cache:
    # not read, and the configured decode rate starts the slots as without it.
    short = CapacityModel(spec)
    run(short, [steady(i, kv=None, kv_cache_tokens=5_000.0) for i in range(2)])
    assert short.capacity().slots == pytest.approx(432 / (800 / 48))
    assert short.capacity().slots_source == "configured"


@pytest.mark.parametrize(("shared", "expected"), [(True, 1.0), (False, 0.0)])
def test_decode_slowdown_is_learned_from_the_refreshes(shared: bool, expected: float) -> None:
    """Decode speed falling with prefill's busy share reads as 1; speed that ignores it, as 0."""
    model = CapacityModel(parse_metadata({"promptTokensPerSecondPerReplica": "5000"}).spec)
    run(model, slowdown_history(T0, count=400, prefill_tokens_per_s=5000.0, slows=shared))
    beta = model.capacity().decode_slowdown
    assert beta is not None
    assert beta == pytest.approx(expected, abs=0.1)


def test_the_cap_is_what_the_busiest_replica_runs_and_a_dispatch_imbalance_teaches_it_nothing() -> None:
    """With the busiest replica's running and the fullest cache read (``max`` over the pods):
    requests waiting for slots on every replica, the fullest cache at 60%, no prefill busy, the
    busiest replica running 24 at two refreshes and the rest within one of it (23.5 a replica):
    the cap is 24. A random dispatch that left one replica's cache full with a queue and the rest
    half empty (the fullest cache at 100%) teaches it nothing: 12 a replica on a half-full cache
    still reads 24 slots from the cache, not a cap of 12."""
    capped: Any = {"prefill_time_mean_seconds": 0.2, "prefill_busy_max": 0.3}
    busiest: Any = {**capped, "requests_running_max": 24.0}  # the busiest replica runs 24
    at_cap = measured(
        steady(i, running=94.0, kv=0.59, waiting=12.0, kv_cache_usage_max=0.6, **busiest) for i in range(8)
    )
    assert (at_cap.slots, at_cap.slots_method) == pytest.approx((24.0, "running while every slot was busy"))
    imbalanced = measured(
        steady(i, running=48.0, kv=0.5, waiting=40.0, kv_cache_usage_max=1.0, **busiest) for i in range(40)
    )
    assert (imbalanced.slots, imbalanced.slots_method) == pytest.approx((24.0, "KV cache usage"))
    # Read as sums only, a fleet whose running count moves with its traffic is not at a cap.
    moving = measured(
        steady(i, running=48.0 + 6 * (i % 3), kv=0.5 + 0.06 * (i % 3), waiting=40.0, **capped)
        for i in range(40)
    )
    assert moving.slots_method == "KV cache usage"


def test_prompts_queued_on_some_replicas_teach_no_cap_and_a_replica_seen_above_a_cap_raises_it() -> None:
    """Each replica queues its own prompts (a random dispatch, heavy prompts): 18 wait on 7
    replicas, the busiest runs 7 at two refreshes while the mean is 4 and its prefill is 60% busy,
    below the prefill-bound share. A cap that bound would hold every replica at it; these queues are
    for the prefill, so no cap is read (broken once: without the guard the cap reads 7). And a cap
    read too low rises the first time a replica runs above it (broken once: it stays 7)."""
    queued: Any = {"prefill_time_mean_seconds": 2.8, "prefill_busy_max": 0.6, "requests_per_s": 1.5}
    model = CapacityModel(parse_metadata({}).spec)
    run(
        model,
        [
            steady(
                i,
                ready=7,
                running=28.0,
                kv=28.0 / 7 / 24,
                waiting=18.0,
                requests_running_max=7.0,
                kv_cache_usage_max=7.0 / 24,
                **queued,
            )
            for i in range(8)
        ],
    )
    assert model.capacity().slots_method != "running while every slot was busy"
    low = CapacityModel(parse_metadata({}).spec)
    low.slots.cap.measure(7.0, 1.0)  # a cap once read too low
    run(low, [steady(i, ready=4, running=40.0, kv=None, requests_running_max=12.0) for i in range(8)])
    assert low.slots.cap.value == pytest.approx(12.0)


def test_the_dispatch_is_read_as_pooled_where_the_replicas_are_evenly_loaded_and_not_at_random() -> None:
    """6 Ready replicas running 16 on average: the busiest at 17 is a least-loaded router's spread
    (0.2 of a random one's), pooled; at 23, a random spread (1.37), each replica its own queue, and
    the load signal sizes per replica. Where the busiest replica's count is never read (a stack read
    as sums only) a pooled queue cannot be assumed: each replica its own, unless a router that
    dispatches to the least loaded is named (llm-d). Before a steady refresh nothing is known."""

    def model(
        busiest: float | None, metadata: dict[str, str] | None = None, refreshes: int = 12
    ) -> CapacityModel:
        m = CapacityModel(parse_metadata(metadata or {}).spec)
        extra: Any = {} if busiest is None else {"requests_running_max": busiest}
        run(m, [steady(i, ready=6, running=96.0, kv=0.5, **extra) for i in range(refreshes)])
        return m

    assert model(17.0).capacity().pooled is True
    assert model(23.0).capacity().pooled is False
    assert "each replica its own queue" in model(23.0).capacity().describe()
    assert model(None).capacity().pooled is False
    routed = {"router": "llm-d", "inferencePool": "llama-pool"}
    assert model(None, routed).capacity().pooled is True
    assert model(None, refreshes=1).capacity().pooled is None


def test_a_queue_vllm_says_is_deferred_teaches_no_capacity_and_its_capacity_share_does() -> None:
    """vLLM's waiting reasons decide whether requests wait for room (issue 37, item 5): 40 waiting
    on 4 replicas running 10 each with 30% of the KV cache used and prefill idle. Read as waiting
    for room (no split exported, or the split says capacity), every slot is busy and the cap is
    measured at 10; where vLLM says 38 of them are deferred (a LoRA budget, a KV transfer), the
    fleet has room and the slots stay those the KV cache gives, 10 / 0.3 = 33."""
    idle_prefill: Any = {"prefill_time_mean_seconds": 0.05}

    def fleet(deferred: float | None, capacity: float | None) -> Capacity:
        split: Any = {}
        if deferred is not None:
            split = {"queue_waiting_deferred": deferred, "queue_waiting_capacity": capacity}
        return measured(
            steady(i, running=40.0, kv=0.3, waiting=40.0, **idle_prefill, **split) for i in range(20)
        )

    inferred = fleet(None, None)
    assert inferred.slots == pytest.approx(10.0)
    assert inferred.slots_method == "running while every slot was busy"
    said_capacity = fleet(0.0, 40.0)
    assert said_capacity.slots == pytest.approx(10.0)
    deferred = fleet(38.0, 2.0)
    assert deferred.slots == pytest.approx(10.0 / 0.3)
    assert deferred.slots_method != "running while every slot was busy"
