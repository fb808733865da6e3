"""A week served by a known replica in each of the replay's physics, as OpenMetrics (issue 36).

``tests/vllm_history.py`` writes its TTFT histogram from two fixed shapes (waiting or not), so no
replica reproduces it to the point. Here the history *is* a replay: requests drawn as
``scaler replay --prometheus`` draws them (Poisson arrivals in each window of ``SCRAPE_S``, every
request its window's mean sizes: ``scaler.replay.trace.expand_rates``), served by a fleet as it ran
(``pods_for_hour``'s pods, each ordered one cold start ahead)
of a known replica in one physics (``scaler.replay.replay.run``), and each request counted at its
first token, as vLLM counts it. The same week replayed through the same replica must measure what
the week measured but for the draw, so the replay's check of itself (``scaler.replay.ownfleet``)
has nothing else to miss; through another physics it must miss.

Each physics is a model of its own (``model_name``, ``model(physics)``) in one history:

* ``separate``: prefill and decode on two resources (prefill does not slow decoding), a week;
* ``shared``: prefill and decode share the GPU's time (prefill slows decoding), a week;
* ``step``: vLLM V1's engine steps (``scaler.replay.fleet.stepped``, the default profile: Llama 3 70B on
  four A100s) at twice the rates, two days (Monday, and Tuesday with its burst): a week of it
  takes about 45 s a replay on one core, and the check replays it twice.

Arrivals and sizes are ``tests/vllm_history.py``'s (a weekday hump, Tuesday's burst, prompts
900 +- 300 and outputs 220 +- 60 tokens over the day). Per pod and every ``SCRAPE_S``: the prompt- and
generation-token counters and the TTFT histogram (a request counts at its first token, its tokens
with it; bounds from vLLM V1's, ``OBJECTIVE_S`` among them so that the history's share within it is
exact, not interpolated), the requests waiting (arrived, no first token yet) and running (Little's
law over the window's first tokens at the fluid replica's time in a slot: a gauge the check does not
read, written so that each pod reports). A window's counts are split evenly over its pods; a pod
that joins writes zeros first, one that leaves writes no more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
from numpy.typing import NDArray

from scaler.presets.engines import VLLM_TTFT_BUCKETS
from scaler.replay.fleet.cluster import ClusterConfig
from scaler.replay.policies import TickInputs
from scaler.replay.replay import run
from scaler.replay.trace import RateTrace, Trace, expand_rates
from tests.vllm_history import arrivals, output_tokens, prompt_tokens

START = datetime(2026, 11, 30, tzinfo=UTC)  # a Monday
SCRAPE_S = 60  # a sample a minute; sizes and pods change per window of this length
SEED = 11  # the history's draw; a replay draws its own (seed 0 unless told)
OBJECTIVE_S = 2.5  # a bound of vLLM's TTFT buckets (below)
# Of vLLM V1's time_to_first_token_seconds bounds (the project's one list of them, VLLM_TTFT_BUCKETS)
# a few around the objective, to keep the history small; +Inf is written too.
BUCKETS = (0.5, 1.0, 2.5, 5.0, 20.0)
assert set(BUCKETS) <= set(VLLM_TTFT_BUCKETS)
assert OBJECTIVE_S in BUCKETS
# The fluid replica: 6,000 prompt tokens/s, 16 sequences decoding 14 tokens/s each. A request of
# 900 + 220 tokens holds a slot 900 / 6,000 + 219 / 14 = 15.8 s: 16 slots serve 1.0 request/s.
FLUID = ClusterConfig(
    prefill_tokens_per_s=6000.0,
    decode_slots=16,
    decode_tokens_per_s_per_seq=14.0,
    cold_start_s=240.0,
    gpus_free=256,
)


@dataclass(frozen=True)
class World:
    """A physics' replica, and the week it serves: rates scaled, pods sized at ``per_pod`` requests/s
    at the hour's peak (1 to ``most``), over ``days``."""

    cluster: ClusterConfig
    rate_scale: float
    per_pod: float
    most: int
    days: int


WORLDS = {
    "separate": World(FLUID.with_overrides(physics="separate"), 1.0, 1.0, 8, 7),
    "shared": World(FLUID.with_overrides(physics="shared"), 1.0, 1.0, 8, 7),
    # Two pods at most: Tuesday's burst (8.6 requests/s) is more than they serve, and queues.
    "step": World(FLUID.with_overrides(physics="step", gpus_per_replica=4), 2.0, 2.5, 2, 2),
}


def model(physics: str) -> str:
    """The ``model_name`` of the history served in ``physics``."""
    return f"llama-{physics}"


def pods_for_hour(world: World, hour_start: float) -> int:
    """Pods in the hour from ``hour_start``: its peak rate at ``per_pod`` a pod, 1 to ``most``."""
    peak = world.rate_scale * max(arrivals(hour_start + s) for s in range(0, 3600, 60))
    return max(1, min(world.most, math.ceil(peak / world.per_pod)))


@dataclass(frozen=True)
class Served:
    """One physics' history: its requests, the pods per window of SCRAPE_S, each request's TTFT."""

    physics: str
    trace: Trace
    pods: tuple[int, ...]
    ttft: NDArray[np.float64]

    @property
    def within_objective(self) -> float:
        """The share of the first tokens within OBJECTIVE_S, request by request."""
        return float(np.mean(self.ttft[np.isfinite(self.ttft)] <= OBJECTIVE_S))


def serve(physics: str) -> Served:
    """The requests of ``physics``' days, served by the pods ``pods_for_hour`` gives."""
    world = WORLDS[physics]
    windows = world.days * 86400 // SCRAPE_S
    mids = np.arange(windows) * SCRAPE_S + SCRAPE_S / 2
    rates = RateTrace(
        np.arange(windows, dtype=np.float64) * SCRAPE_S,
        np.array([world.rate_scale * arrivals(t) for t in mids]),
        float(SCRAPE_S),
        "tests/replica_history.py",
        np.array([prompt_tokens(t) for t in mids]),
        np.array([output_tokens(t) for t in mids]),
    )
    trace = expand_rates(rates, None, SEED)
    pods = tuple(pods_for_hour(world, t - t % 3600) for t in range(0, windows * SCRAPE_S, SCRAPE_S))
    result = run(trace, world.cluster, _Scheduled(pods, world), START, pods[0])
    return Served(physics, trace, pods, result.ttft)


class _Scheduled:
    """The fleet a platform team ran: each window's pods Ready in it, so ordered one cold start
    ahead, and none removed while a window within a cold start still holds it. (Written here, not
    ``scaler.replay.ownfleet.AsRanPolicy``, which the check under test uses.)"""

    def __init__(self, pods: tuple[int, ...], world: World) -> None:
        self.name, self.min_replicas, self.max_replicas = "as scheduled", 1, world.most
        self.pods, self.lead = pods, int(world.cluster.cold_start_s // SCRAPE_S) + 1

    def tick(self, tick: TickInputs) -> int:
        k = max(0, int(tick.now_s // SCRAPE_S))
        ahead = self.pods[min(k, len(self.pods) - 1) : k + self.lead + 1] or self.pods[-1:]
        return max(ahead)


def _per_window(served: Served) -> NDArray[np.float64]:
    """Per window: prompt and output tokens, first tokens, their TTFT sum, then one column per
    bucket (first tokens at or under its bound, +Inf last), each counted at the first token."""
    trace, ttft, windows = served.trace, served.ttft, len(served.pods)
    first = trace.arrivals + ttft
    seen = np.isfinite(first) & (first < windows * SCRAPE_S)
    k = (first[seen] // SCRAPE_S).astype(np.int64)
    bucket = np.searchsorted(np.asarray(BUCKETS), ttft[seen], side="left")  # the first bound >= ttft
    columns = [trace.prompt_tokens[seen], trace.output_tokens[seen], np.ones(len(k)), ttft[seen]]
    columns += [(bucket <= b).astype(np.float64) for b in range(len(BUCKETS) + 1)]
    return np.stack([np.bincount(k, weights=c, minlength=windows) for c in columns], axis=1)


def openmetrics(histories: list[Served]) -> str:
    """The histories' series, a sample every SCRAPE_S from START, as OpenMetrics text."""
    lines: dict[str, list[str]] = {
        "vllm:prompt_tokens": ["# TYPE vllm:prompt_tokens counter"],
        "vllm:generation_tokens": ["# TYPE vllm:generation_tokens counter"],
        "vllm:num_requests_waiting": ["# TYPE vllm:num_requests_waiting gauge"],
        "vllm:num_requests_running": ["# TYPE vllm:num_requests_running gauge"],
        "vllm:time_to_first_token_seconds": ["# TYPE vllm:time_to_first_token_seconds histogram"],
    }
    les = [f"{b:g}" for b in BUCKETS] + ["+Inf"]

    def write(
        name: str, pod: str, counters: NDArray[np.float64], t: int, waiting: float, running: float
    ) -> None:
        labels = f'model_name="{name}",pod="{pod}"'
        for family, value in (
            ("vllm:prompt_tokens_total", f"{counters[0]:.3f}"),
            ("vllm:generation_tokens_total", f"{counters[1]:.3f}"),
            ("vllm:num_requests_waiting", f"{waiting:.4f}"),
            ("vllm:num_requests_running", f"{running:.4f}"),
        ):
            lines[family.removesuffix("_total")].append(f"{family}{{{labels}}} {value} {t}")
        ttft = lines["vllm:time_to_first_token_seconds"]
        for le, value in zip(les, counters[4:], strict=True):
            ttft.append(f'vllm:time_to_first_token_seconds_bucket{{{labels},le="{le}"}} {value:.3f} {t}')
        ttft.append(f"vllm:time_to_first_token_seconds_count{{{labels}}} {counters[2]:.3f} {t}")
        ttft.append(f"vllm:time_to_first_token_seconds_sum{{{labels}}} {counters[3]:.3f} {t}")

    t0 = int(START.timestamp())
    for served in histories:
        name, windows = model(served.physics), len(served.pods)
        per_window = _per_window(served)
        at = np.arange(windows + 1) * SCRAPE_S
        first = np.sort(served.trace.arrivals + served.ttft)
        arrived = np.searchsorted(served.trace.arrivals, at, side="right")
        waiting = arrived - np.searchsorted(first, at, side="right")
        slot_s = 900 / FLUID.prefill_tokens_per_s + 219 / FLUID.decode_tokens_per_s_per_seq
        pods: list[tuple[str, NDArray[np.float64]]] = []
        for i in range(windows + 1):
            t = t0 + i * SCRAPE_S
            wanted = served.pods[i] if i < windows else 0
            for pod, counters in pods[wanted:]:  # leaving: its last sample, then no more
                write(name, pod, counters, t, 0.0, 0.0)
            pods = pods[:wanted]
            while len(pods) < wanted:  # joining: a new name, as a ReplicaSet's pods have
                pods.append((f"{name}-{i:05d}-{len(pods)}", np.zeros(per_window.shape[1])))
            if i == windows:
                break
            running = per_window[i, 2] / SCRAPE_S * slot_s / wanted
            for pod, counters in pods:
                write(name, pod, counters, t, waiting[i] / wanted, running)
                np.add(counters, per_window[i] / wanted, out=counters)
    return "\n".join(line for family in lines.values() for line in family) + "\n"
