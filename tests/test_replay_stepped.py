"""The step physics (scaler.replay.fleet.stepped): vLLM V1's scheduler step by step, checked against the
published measurements each profile is fitted to, against itself without the decode jump, and in
the replay's closed loop."""

from __future__ import annotations

import dataclasses
import math
from datetime import UTC, datetime

import numpy as np
import pytest

from scaler.readings import Readings
from scaler.replay.fleet.cluster import ClusterConfig, ClusterError
from scaler.replay.fleet.stepped import PROFILES, Engine, Profile, Request, Sink, saturation
from scaler.replay.policies import ClairvoyantPolicy
from scaler.replay.replay import run
from scaler.replay.trace import Trace

START = datetime(2026, 12, 7, tzinfo=UTC)


class Events(Sink):
    """Every event an engine sends, in order."""

    def __init__(self) -> None:
        self.first: dict[int, float] = {}
        self.ended: dict[int, float] = {}
        self.tokens = 0
        self.steps: list[float] = []

    def first_token(self, request: Request, t: float) -> None:
        """Its first token's time."""
        self.first[request.i] = t

    def finished(self, request: Request, t: float) -> None:
        """Its end."""
        self.ended[request.i] = t

    def generated(self, start: float, end: float, tokens: int, step_s: float) -> None:
        """Tokens decoded."""
        self.tokens += tokens
        self.steps.append(step_s)


def served(profile: Profile, sizes: list[tuple[int, int]], jump: bool = True, at: float = 0.0) -> Events:
    """``sizes`` sent at once to one engine of ``profile``, run to the end."""
    events = Events()
    engine = Engine(profile, events, jump=jump)
    for i, (prompt, output) in enumerate(sizes):
        engine.add(Request(i, at, prompt, output), at)
    engine.drain()
    return events


@pytest.mark.parametrize(
    ("name", "published_s"),
    [("llama-3-70b-4xh100", 2.4445), ("llama-3.1-8b-1xh100", 0.9975), ("llama-3-70b-4xa100", None)],
)
def test_the_latency_tests_each_profile_is_fitted_to_are_replayed(
    name: str, published_s: float | None
) -> None:
    """vLLM's latency test (8 requests of 32 prompt and 128 output tokens at once) ends within 1% of
    the published time on each H100 profile."""
    events = served(PROFILES[name], [(32, 128)] * 8)
    end = max(events.ended.values())
    assert len(events.ended) == 8
    if published_s is not None:
        assert end == pytest.approx(published_s, rel=0.01)


def test_the_a100_profile_replays_lambdas_ten_sharegpt_requests() -> None:
    """LambdaLabsML/vllm-benchmark's ten ShareGPT requests on 4 A100s: every first token at the
    published 356 ms (one prefill step of 1,369 tokens) and the run within 5% of its 21.4 s."""
    prompts = [13, 25, 27, 10, 329, 29, 399, 328, 4, 205]
    outputs = [120, 579, 233, 194, 101, 741, 1, 1, 6, 35]
    events = served(PROFILES["llama-3-70b-4xa100"], list(zip(prompts, outputs, strict=True)))
    assert sorted(events.first) == list(range(10))
    assert all(t == pytest.approx(0.356, rel=0.01) for t in events.first.values())
    assert max(events.ended.values()) == pytest.approx(21.41, rel=0.05)


def test_the_decode_jump_is_exact() -> None:
    """Jumping over pure decode runs in closed form gives every first token and end the step-by-step
    engine gives (requests arriving through the runs, a preemption included)."""
    small = dataclasses.replace(PROFILES["llama-3-70b-4xa100"], kv_blocks=400)
    rng = np.random.default_rng(7)
    arrivals = np.cumsum(rng.exponential(0.4, 60))
    sizes = [
        (int(p), int(o)) for p, o in zip(rng.integers(50, 3000, 60), rng.integers(1, 400, 60), strict=True)
    ]
    outcomes = []
    for jump in (True, False):
        events = Events()
        engine = Engine(small, events, jump=jump)
        for i, ((prompt, output), t) in enumerate(zip(sizes, arrivals, strict=True)):
            engine.add(Request(i, float(t), prompt, output), float(t))
        engine.drain()
        outcomes.append((events.first, events.ended, events.tokens, engine.preemptions))
    (first_a, end_a, tokens_a, pre_a), (first_b, end_b, tokens_b, pre_b) = outcomes
    assert pre_a == pre_b > 0
    assert tokens_a == tokens_b
    assert first_a.keys() == first_b.keys() == set(range(60))
    assert all(first_a[i] == pytest.approx(first_b[i], abs=1e-9) for i in first_a)
    assert all(end_a[i] == pytest.approx(end_b[i], abs=1e-9) for i in end_a)


def test_a_prompt_longer_than_the_budget_is_chunked_beside_the_decodes() -> None:
    """A 5,000-token prompt on a 2,048-token budget takes three steps, and the sequence already
    decoding gets a token in each of them."""
    profile = PROFILES["llama-3-70b-4xa100"]
    events = Events()
    engine = Engine(profile, events, jump=False)
    engine.add(Request(0, 0.0, 100, 50), 0.0)
    engine.advance(0.2)  # its prefill step ran
    assert 0 in events.first
    before = events.tokens
    engine.add(Request(1, 0.2, 5000, 2), 0.2)
    engine.advance(engine.clock + 1e-9)
    chunks = 0
    while 1 not in events.first:
        engine.advance(engine.clock + 1e-9)
        chunks += 1
    assert chunks == 2  # three steps: 2,047 + 2,047 + 906 tokens (one budget token a step for the decode)
    assert events.tokens - before >= 3


def test_the_newest_request_is_preempted_when_the_cache_is_full_and_recomputed() -> None:
    """With too few blocks for every sequence to grow, the newest running request is preempted (its
    blocks freed) and recomputed later; every request still ends with every token counted once, and
    the blocks all come back."""
    tiny = dataclasses.replace(PROFILES["llama-3-70b-4xa100"], kv_blocks=60)
    events = Events()
    engine = Engine(tiny, events)
    for i in range(4):
        engine.add(Request(i, 0.0, 150, 120), 0.0)
    engine.drain()
    assert engine.preemptions > 0
    assert sorted(events.ended) == [0, 1, 2, 3]
    assert engine.used == 0
    assert events.tokens == 4 * 119  # every token after the first, once


def test_waiting_counts_until_a_request_is_scheduled() -> None:
    """vLLM V1's waiting: a request counts as waiting until a step admits it, then as running."""
    profile = dataclasses.replace(PROFILES["llama-3-70b-4xa100"], max_num_seqs=1)
    engine = Engine(profile, Events(), jump=False)
    engine.add(Request(0, 0.0, 100, 500), 0.0)
    engine.add(Request(1, 0.0, 100, 5), 0.0)
    engine.advance(0.5)
    assert (len(engine.waiting), len(engine.running)) == (1, 1)
    assert 0.0 < engine.kv_usage < 1.0


def test_saturation_reads_the_prefill_rate_and_the_batch_of_a_saturated_replica() -> None:
    """A saturated A100 replica computes about 3,900 prompt tokens/s in 2,048-token steps and runs
    its 256 sequences when short requests always wait."""
    prefill, slots = saturation(PROFILES["llama-3-70b-4xa100"], [1000] * 400, [200] * 400)
    assert prefill == pytest.approx(2048 / (0.027 + 0.240e-3 * 2048 + 4.4e-9 * 2048 * 2048 / 2), rel=0.05)
    assert slots == pytest.approx(256, rel=0.05)


def test_a_step_cluster_needs_its_profiles_gpus() -> None:
    """``physics: step`` takes the GPUs per replica from the profile; another count is refused,
    naming both keys."""
    config = ClusterConfig.from_mapping({"physics": "step", "profile": "llama-3.1-8b-1xh100"})
    assert config.gpus_per_replica == 1
    with pytest.raises(ClusterError, match="gpus_per_replica must be 4 with physics step"):
        ClusterConfig().with_overrides(physics="step", gpus_per_replica=2)
    with pytest.raises(ClusterError, match="profile must be one of"):
        ClusterConfig().with_overrides(profile="gpt-5")


def test_the_replay_serves_every_request_in_the_step_physics_and_exports_vllms_series() -> None:
    """A closed-loop replay in the step physics serves every request, and what the scaler reads of it
    holds the inter-token latency histogram, the phase times and a KV cache usage between 0 and 1."""
    rng = np.random.default_rng(3)
    arrivals = np.sort(rng.uniform(0, 900, 2700))
    trace = Trace(arrivals, rng.integers(200, 2000, 2700), rng.integers(20, 400, 2700), "uniform", "")
    config = ClusterConfig.from_mapping({"physics": "step", "gpus_free": 64, "cold_start_s": 60})
    seen: list[Readings] = []

    class Watch(ClairvoyantPolicy):
        def tick(self, tick):  # type: ignore[no-untyped-def]
            if tick.now_s > 300 and not seen:
                seen.append(tick.readings)
            return super().tick(tick)

    policy = Watch("fixed", [4], 60.0, 60.0, 4)
    result = run(trace, config, policy, START, 4)
    assert np.isfinite(result.ttft).all()
    assert float(np.mean(result.ttft <= 2.0)) > 0.9
    readings = seen[0]
    assert readings.histograms["itl"]
    assert readings.values["prefill_time_count"] > 0
    assert 0.0 < readings.values["kv_cache_usage"] < 1.0
    assert math.isfinite(readings.values["itl_sum"])
