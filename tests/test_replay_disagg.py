"""The disaggregated replay: a prefill pool hands finished prompts to a decode pool after the KV
transfer; each pool's policy reads its own pool's series; the clairvoyant grows the pool that
held the late requests."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from scaler.model import Signal
from scaler.replay.disagg_run import clairvoyant_disagg, role_scaledobject, run_disagg
from scaler.replay.fleet.cluster import ClusterConfig, ClusterError
from scaler.replay.fleet.disagg import DisaggConfig, Pool
from scaler.replay.keda import load_scaledobject_model
from scaler.replay.policies import ClairvoyantPolicy, KedaPolicy
from scaler.replay.trace import Trace

ROOT = Path(__file__).resolve().parent.parent
START = datetime(2026, 12, 7, tzinfo=UTC)
# The benchmark's replica, read from its file so the two cannot drift: 5,000 prompt tokens/s,
# 24 slots at 18 tokens/s, 2 GPUs, a 180 s cold start. gpus_free, which the benchmark sets per
# trace, is pinned to the 32 GPUs these tests' pools hold.
REPLICA = ClusterConfig.load(ROOT / "benchmarks" / "cluster-70b.yaml").with_overrides(gpus_free=32)
FLEET = DisaggConfig(REPLICA, prefill_gpus=32, decode_gpus=32)


def test_the_docstring_request_on_an_idle_fleet() -> None:
    """1,300 prompt tokens: prefill 0.26 s, transfer 5 ms + 26 ms, a free slot: first token at
    0.291 s; 1,500 tokens end at 0.291 + 1,499 / 18 = 83.6 s."""
    trace = Trace(np.array([0.0]), np.array([1300]), np.array([1500]), "one")
    fixed = {role: ClairvoyantPolicy(role, [1], 60.0, 180.0, 1) for role in ("prefill", "decode")}
    result = run_disagg(trace, FLEET, fixed, START, {"prefill": 1, "decode": 1}, "fixed", warmup_s=0.0)
    assert result.ttft[0] == pytest.approx(0.26 + 0.005 + 1300 / 50_000)
    assert result.pools["prefill"].wait[0] == 0.0
    assert result.pools["decode"].wait[0] == 0.0
    decode = Pool(FLEET, "decode", 1)
    admitted, end = decode.decode(0.291, 1500)
    assert (admitted, end) == pytest.approx((0.291, 0.291 + 1499 / 18))


def test_prompts_queue_in_the_prefill_pool_and_sequences_wait_for_decode_slots() -> None:
    """One prefill pod computes one prompt at a time; a decode pod with every slot taken makes the
    next request wait for the first to free, and its first token waits with it."""
    prefill = Pool(FLEET, "prefill", 1)
    assert prefill.prefill(0.0, 5000) == pytest.approx((0.0, 1.0))
    assert prefill.prefill(0.5, 2500) == pytest.approx((1.0, 1.5))  # waited 0.5 s for the first
    assert sum(prefill.view(0.7).waiting) == 1  # the second prompt, not started at 0.7
    decode = Pool(DisaggConfig(REPLICA.with_overrides(decode_slots=2), 32, 32), "decode", 1)
    ends = [decode.decode(0.0, 181)[1] for _ in range(2)]  # two sequences of 10 s hold both slots
    admitted, _ = decode.decode(1.0, 10)
    assert admitted == pytest.approx(min(ends))
    view = decode.view(2.0)
    assert (sum(view.waiting), sum(view.running)) == (1, 2)


def test_the_transfer_and_pool_sizes_are_validated() -> None:
    """A pool smaller than one replica's GPUs, or a transfer rate of 0, is refused, each named."""
    with pytest.raises(ClusterError) as caught:
        DisaggConfig(REPLICA, prefill_gpus=1, decode_gpus=32, transfer_tokens_per_s=0.0)
    assert "prefill_gpus must be an integer >= gpus_per_replica (2)" in str(caught.value)
    assert "transfer_tokens_per_s must be a number > 0" in str(caught.value)


def burst_trace(prompt: int, output: int, rate: float, minutes: float, seed: int = 0) -> Trace:
    """Poisson arrivals at ``rate``/s for ``minutes``, every request the same size."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, int(rate * minutes * 60 * 1.2)))
    arrivals = arrivals[arrivals < minutes * 60]
    n = len(arrivals)
    return Trace(arrivals, np.full(n, prompt), np.full(n, output), "synthetic")


@pytest.mark.parametrize(
    ("shape", "grows", "stays"),
    [((200, 900, 1.2), "decode", "prefill"), ((9000, 2, 1.2), "prefill", "decode")],
    ids=["decode-heavy", "prompt-heavy"],
)
def test_the_clairvoyant_grows_the_pool_that_held_the_late_requests(
    shape: tuple[int, int, float], grows: str, stays: str
) -> None:
    """Long decodes of short prompts need decode replicas and leave prefill at its floor; long prompts
    with a token of output the other way round. The search stops once 99.5% meet 2 s."""
    prompt, output, rate = shape
    trace = burst_trace(prompt, output, rate, 20)
    result, search = clairvoyant_disagg(trace, FLEET, START, 2.0, 1, 16)
    assert search.goal_met
    assert np.mean(result.ttft <= 2.0) >= 0.995
    assert max(search.schedules[grows]) >= 2
    assert set(search.schedules[stays]) == {1}


def role_policy(role: str) -> KedaPolicy:
    """The benchmark's ScaledObject (capacities configured, 2 to 16 replicas) for one pool."""
    so = load_scaledobject_model(ROOT / "benchmarks" / "scaledobject-70b.yaml")
    return KedaPolicy(f"scaler {role}", role_scaledobject(so, role, coldStartSeconds="180"))


def test_each_role_decides_from_its_own_pool() -> None:
    """From the same arrivals, the prefill policy reads the prefill pool (prompts, no KV gauge, no
    tokens generated) and sizes prompts; the decode policy reads the decode pool (its KV cache,
    generated tokens) and sizes slots: 1.2 requests/s of 900 tokens at 18 a second hold 60
    sequences, 3 pods of 24 slots at least."""
    trace = burst_trace(200, 900, 1.2, 20)
    policies = {role: role_policy(role) for role in ("prefill", "decode")}
    result = run_disagg(trace, FLEET, policies, START, {"prefill": 2, "decode": 3}, "scaler")
    prefill, decode = policies["prefill"].latest, policies["decode"].latest
    assert prefill is not None
    assert decode is not None
    assert prefill.observation.kv_cache_usage is None
    assert prefill.observation.generation_tokens_per_s == 0.0
    assert decode.observation.kv_cache_usage is not None
    assert (decode.observation.generation_tokens_per_s or 0.0) > 500  # about 1.2 x 899 a second
    assert "slots: the decode pool's own (role: prefill)" in prefill.signal_reasons[Signal.LOAD]
    assert decode.replicas >= 3
    assert prefill.replicas == 2  # its floor: 240 prompt tokens/s are 0.05 replicas
    assert result.pools["decode"].peak_replicas >= 3
    assert np.mean(result.ttft <= 2.0) >= 0.99
