"""Prefill and decode pools against a real Prometheus: a simulated vLLM fleet of two pools, its pods
labelled as llm-d labels them (the decode pool with one pod unlabelled, which llm-d counts as
decode), an SGLang fleet labelled by engine_type, and Dynamo's KV router queue per worker type."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence

import pytest

from scaler.config import parse_metadata
from scaler.decider.params import DeciderParams
from scaler.model import Decision
from scaler.presets import PRESETS
from scaler.readings import Readings
from scaler.service.app import wall_clock
from scaler.sim.fleet import PodLoad, SimulatedFleet
from scaler.sim.prometheus import LocalPrometheus
from scaler.sim.router import RouterLoad, SimulatedRouter
from scaler.sources.live import LiveSource
from scaler.sources.prometheus import PrometheusReader, TargetQuery
from scaler.targets.registry import Target, TargetKey
from tests.helpers import eventually, started, target_of
from tests.test_itl_e2e import wait_until

pytestmark = pytest.mark.prometheus

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SELECTOR = f'model_name="{MODEL}"'
# llm-d labels pods llm-d.ai/role; the scrape's labelmap copies it onto the series as llm_d_ai_role.
PREFILL_PODS = {
    "vllm-prefill-0": {"llm_d_ai_role": "prefill"},
    "vllm-prefill-1": {"llm_d_ai_role": "prefill"},
}
DECODE_PODS = {"vllm-decode-0": {"llm_d_ai_role": "decode"}, "vllm-decode-1": {}}


class Stack:
    """One Prometheus scraping a vLLM fleet of two pools, an SGLang one and a Dynamo router."""

    def __init__(self) -> None:
        self.vllm = SimulatedFleet(namespace="pd", model=MODEL)
        self.vllm.set_pods([*PREFILL_PODS, *DECODE_PODS])
        self.vllm.pod_labels = {**PREFILL_PODS, **DECODE_PODS}
        self.sglang = SimulatedFleet(namespace="pd-sglang", model="qwen", engine="sglang")
        self.sglang.set_pods(["s-prefill", "s-decode", "s-unified"])
        self.sglang.pod_labels = {
            pod: {"engine_type": pod.removeprefix("s-")} for pod in ("s-prefill", "s-decode", "s-unified")
        }
        self.router = SimulatedRouter("dynamo", model=MODEL)
        self.prometheus = LocalPrometheus(scrape_interval_s=0.5)
        for server in (self.vllm, self.sglang, self.router):
            server.start()
        self.prometheus.start([self.vllm.address, self.sglang.address, self.router.address])

    def close(self) -> None:
        """Stop Prometheus and the servers."""
        self.prometheus.close()
        for server in (self.vllm, self.sglang, self.router):
            server.stop()

    def pools(self, prefill: PodLoad, decode: PodLoad) -> None:
        """Set each pool's load, spread evenly over its pods."""
        for pods, load in ((PREFILL_PODS, prefill), (DECODE_PODS, decode)):
            for pod in pods:
                self.vllm.set_pod_load(
                    pod,
                    PodLoad(
                        waiting=load.waiting / len(pods),
                        running=load.running / len(pods),
                        prompt_tokens_per_s=load.prompt_tokens_per_s / len(pods),
                        generation_tokens_per_s=load.generation_tokens_per_s / len(pods),
                        requests_per_s=load.requests_per_s / len(pods),
                        ttft_seconds=load.ttft_seconds,
                        kv_cache_usage=load.kv_cache_usage,
                        itl_seconds=load.itl_seconds,
                    ),
                )


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    """The module's Prometheus and servers, started once."""
    yield from started(Stack)


def query(key: str, stack: Stack, **metadata: str) -> TargetQuery:
    """A target on the stack's Prometheus from ScaledObject-style metadata."""
    return TargetQuery(key, parse_metadata(metadata), stack.prometheus.url)


def read_when(
    reader: PrometheusReader, targets: Sequence[TargetQuery], key: str, name: str, expected: float
) -> dict[str, Readings]:
    """The readings of ``targets``, read again until target ``key`` reads ``expected`` for ``name``:
    the load just set has been scraped."""
    return eventually(
        lambda: reader.read(targets),
        lambda got: got[key].values.get(name) == expected,
        timeout=25,
        every=0.25,
    )


def test_each_role_reads_its_own_pool_and_an_unlabelled_pod_is_decode(stack: Stack) -> None:
    """Prefill pods wait 14 and decode pods 6 (one of them unlabelled): the prefill target reads
    14 on 2 pods, the decode target 6 on 2, role both 20 on 4; one query per family serves all
    three, as it serves one."""
    stack.pools(PodLoad(waiting=14, running=8), PodLoad(waiting=6, running=50))
    reader = PrometheusReader(stack.prometheus.url, rate_window="5s")
    targets = [
        query("prefill", stack, labelSelector=SELECTOR, role="prefill"),
        query("decode", stack, labelSelector=SELECTOR, role="decode"),
        query("both", stack, labelSelector=SELECTOR),
    ]
    before = reader.queries
    got = read_when(reader, targets, "both", "queue_waiting", 20)
    assert (reader.queries - before) % len(PRESETS["vllm"].families) == 0
    assert got["prefill"].values["queue_waiting"] == 14
    assert got["prefill"].values["requests_running"] == 8
    assert got["prefill"].values["replicas_reporting"] == 2
    assert got["decode"].values["queue_waiting"] == 6
    assert got["decode"].values["requests_running"] == 50
    assert got["decode"].values["replicas_reporting"] == 2
    assert got["both"].values["replicas_reporting"] == 4


def test_sglang_roles_are_read_by_engine_type(stack: Stack) -> None:
    """SGLang labels its series engine_type: decode reads the decode engine, not the unified one."""
    for pod, waiting in (("s-prefill", 5), ("s-decode", 3), ("s-unified", 11)):
        stack.sglang.set_pod_load(pod, PodLoad(waiting=waiting))
    reader = PrometheusReader(stack.prometheus.url, rate_window="5s")
    selector = 'model_name="qwen"'
    targets = [
        query(role, stack, engine="sglang", labelSelector=selector, role=role)
        for role in ("prefill", "decode")
    ]
    got = read_when(reader, targets, "prefill", "queue_waiting", 5)
    assert got["decode"].values["queue_waiting"] == 3
    assert got["decode"].values["replicas_reporting"] == 1


def test_dynamo_router_queue_is_read_per_worker_type(stack: Stack) -> None:
    """Dynamo's KV router labels its queue by worker_type: each role reads its own, both the sum."""
    stack.router.set_load(RouterLoad(queued=40, queued_prefill=90))
    reader = PrometheusReader(stack.prometheus.url, rate_window="5s")
    common = {"labelSelector": f'model="{MODEL.lower()}"', "router": "dynamo"}
    targets = [
        query("prefill", stack, **common, role="prefill"),
        query("decode", stack, **common, role="decode"),
        query("both", stack, **common),
    ]
    got = read_when(reader, targets, "both", "router_queue_waiting", 130)
    assert got["prefill"].values["router_queue_waiting"] == 90
    assert got["decode"].values["router_queue_waiting"] == 40


# ---- decisions: each pool's target from its own series ------------------------------------

# The engines read rates over the reader's 3 s window (the decider's rate window, here as short).
WINDOW_S = 3
PARAMS = DeciderParams(rate_window_s=WINDOW_S)
COMMON = {
    "labelSelector": SELECTOR,
    "minReplicas": "2",
    "maxReplicas": "20",
    "coldStartSeconds": "10",
    "promptTokensPerSecondPerReplica": "10000",
}
ITL_OBJECTIVE = {"itlObjectiveSeconds": "0.05"}
# Light prompts on the prefill pool: 4,000 tokens/s of 1,000-token prompts, 0.4 replicas of prefill.
LIGHT_PREFILL = PodLoad(running=2, prompt_tokens_per_s=4000, requests_per_s=4, ttft_seconds=0.2)


def decode_pool(per_pod_running: float, itl_s: float) -> PodLoad:
    """The decode pool's two pods: each sequence in service 10 s, decoding 25 tokens/s, holding 1%
    of a pod's KV cache (100 slots a pod)."""
    running = 2 * per_pod_running
    return PodLoad(
        running=running,
        generation_tokens_per_s=25 * running,
        requests_per_s=running / 10,
        ttft_seconds=0.3,
        kv_cache_usage=per_pod_running / 100,
        itl_seconds=itl_s,
    )


def targets(**roles: dict[str, str]) -> list[Target]:
    """One target per name, each with COMMON and its own metadata."""
    return [target_of(TargetKey("pd", name), {**COMMON, **md}, params=PARAMS) for name, md in roles.items()]


def refresh(source: LiveSource, ts: Sequence[Target]) -> dict[str, Decision]:
    """One refresh: every target observed now, in one batch, and decided."""
    seen = asyncio.run(source.observe(list(ts), wall_clock()))
    return {t.key.name: t.engine.decide(seen[t.key]) for t in ts}


def paced(source: LiveSource, ts: Sequence[Target], count: int) -> list[dict[str, Decision]]:
    """``count`` refreshes, each half a second after the one before (the refresh loop's pace, shortened)."""
    out = []
    for _ in range(count):
        time.sleep(0.5)
        out.append(refresh(source, ts))
    return out


def settled(stack: Stack, prefill: PodLoad, decode: PodLoad) -> bool:
    """Whether each pool's first tokens and prompt tokens per second (and the decode pool's mean
    ITL) over the rate window are the ones set: the window holds only these loads, and no scrape
    of the simulated fleet came late enough to count tokens of one load at the time of another."""
    window = f"[{WINDOW_S}s]"

    def value(query: str) -> float | None:
        got = stack.prometheus.query(query)
        return float(got[0]["value"][1]) if got else None

    def near(got: float | None, wanted: float, tolerance: float) -> bool:
        return (got or 0.0) == wanted == 0.0 or (got is not None and abs(got - wanted) <= tolerance)

    for pods, load in (('{llm_d_ai_role="prefill"}', prefill), ('{llm_d_ai_role!="prefill"}', decode)):
        served = value(f"sum(rate(vllm:time_to_first_token_seconds_count{pods}{window}))")
        prompt = value(f"sum(rate(vllm:prompt_tokens_total{pods}{window}))")
        if not near(served, load.requests_per_s, 0.02 * load.requests_per_s):
            return False
        if not near(prompt, load.prompt_tokens_per_s, 0.02 * load.prompt_tokens_per_s):
            return False
        if load.generation_tokens_per_s:
            itl = value(
                f"sum(rate(vllm:inter_token_latency_seconds_sum{pods}{window}))"
                f" / sum(rate(vllm:inter_token_latency_seconds_count{pods}{window}))"
            )
            if not near(itl, load.itl_seconds, 1e-3):
                return False
    return True


def test_decode_bound_traffic_over_the_itl_objective_raises_decode_and_leaves_prefill(stack: Stack) -> None:
    """The decode pool runs 30 sequences a pod at 20 ms between tokens, then 45 at 70 ms, over the
    50 ms objective: its KV cache would hold 100 a pod, but the latency learned from the two (a line
    through 20 ms at 30% of the slots and 70 ms at 45%, the tail 1.25 times the mean) says a pod may
    run 36 within the objective, so 90 sequences need more than the 2 pods. The decode target
    without an ITL objective stays at its floor, and so does the prefill target, whose prompts are
    as light as before."""
    source = LiveSource(PrometheusReader(stack.prometheus.url, rate_window=f"{WINDOW_S}s"))
    ts = targets(
        prefill={"role": "prefill", **ITL_OBJECTIVE},
        decode={"role": "decode", **ITL_OBJECTIVE},
        decode_no_itl={"role": "decode"},
    )
    light_decode, heavy_decode = decode_pool(30, 0.02), decode_pool(45, 0.07)
    stack.pools(LIGHT_PREFILL, light_decode)
    decode = ts[1].engine
    # Refreshes half a second apart, as the refresh loop paces them: the ITL line weighs each
    # reading by the time it stands for. The first is read once the rate window holds only this
    # load; until the Ready pods have been steady for a window nothing is learned from them.
    wait_until(lambda: settled(stack, LIGHT_PREFILL, light_decode), timeout_s=60)
    light = [refresh(source, ts)]
    while not decode.capacity.steady:
        light += paced(source, ts, 1)
    light += paced(source, ts, 8)
    measured = light[-1]["decode"].capacity
    assert measured is not None
    assert measured.slots == pytest.approx(100)  # 30 running at 30% KV a pod
    stack.pools(LIGHT_PREFILL, heavy_decode)
    wait_until(lambda: settled(stack, LIGHT_PREFILL, heavy_decode), timeout_s=60)
    heavy = paced(source, ts, 4)
    assert {d["decode"].replicas for d in light} == {2}
    learned = heavy[-1]["decode"].capacity
    assert learned is not None
    itl_slots = learned.itl_slots
    assert itl_slots is not None
    assert 30 < itl_slots < 45
    assert max(d["decode"].replicas for d in heavy) >= 3  # 90 sequences on about 36 a pod
    assert {d["decode_no_itl"].replicas for d in light + heavy} == {2}
    assert {d["prefill"].replicas for d in light + heavy} == {2}


def test_prompt_bound_traffic_raises_prefill_and_leaves_decode(stack: Stack) -> None:
    """Prompts of 2,000 tokens at 20 a second on the prefill pool's two pods, 80 of them waiting, each
    1.5 s in prefill: 15 prompts in prefill at once on a pod (chunked prefill shares each step among
    them), so a pod computes 20,000 tokens a second, all of it busy. The 40,000 offered and the 80
    waiting need more than the two: the prefill pool rises to at least 4; the decode pool, as light
    as before, stays at its floor, its own queue empty."""
    source = LiveSource(PrometheusReader(stack.prometheus.url, rate_window=f"{WINDOW_S}s"))
    ts = targets(prefill={"role": "prefill"}, decode={"role": "decode"})
    heavy = PodLoad(waiting=80, running=8, prompt_tokens_per_s=40000, requests_per_s=20, ttft_seconds=1.5)
    light_decode = decode_pool(30, 0.02)
    stack.pools(heavy, light_decode)
    wait_until(lambda: settled(stack, heavy, light_decode), timeout_s=60)
    decisions = [refresh(source, ts) for _ in range(3)]
    assert min(d["prefill"].replicas for d in decisions) >= 4
    capacity = decisions[-1]["prefill"].capacity
    assert capacity is not None
    assert capacity.prefill_tokens_per_s == pytest.approx(20000, rel=0.02)
    assert {d["decode"].replicas for d in decisions} == {2}
    assert decisions[-1]["decode"].observation.queue_waiting == 0
    assert decisions[-1]["prefill"].observation.queue_waiting == 80
