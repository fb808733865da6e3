"""The compiled loop (``scaler.replay.fleet.kernel``) replays exactly what the Python classes replay.

Each run replays the same trace twice, once through ``Cluster`` and ``ControlLoop.serve`` one request
at a time and once through ``FastCluster``'s batches, and every figure a replay reports must be
equal to the last bit: each request's TTFT, the GPU-seconds, the Pending pod-seconds, the scale
events and the replica counts at every tick (which the policies' decisions, read from the fleet's
series, set), and every series the fleet exports at every tick (the pods' gauges, the TTFT
histogram, the phase times, the token rates), whether a policy reads it or not. The trace has a
burst that queues and a fleet that scales up and down and drains.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import numpy as np
import pytest
import yaml

from scaler.replay.compare import BUCKET_S, busy_per_bucket
from scaler.replay.fleet import kernel
from scaler.replay.fleet.cluster import ClusterConfig
from scaler.replay.keda import load_scaledobject_model, scaledobject_model
from scaler.replay.policies import ClairvoyantPolicy, KedaPolicy, TickInputs
from scaler.replay.replay import Policy, RunResult, run
from scaler.replay.trace import Trace
from tests.helpers import plain_scaledobject

START = datetime(2026, 12, 7, tzinfo=UTC)
CFG = ClusterConfig(
    prefill_tokens_per_s=3000.0,
    decode_slots=8,
    decode_tokens_per_s_per_seq=14.0,
    cold_start_s=60.0,
    gpus_free=24,
)
PLAIN = plain_scaledobject(
    "http://prometheus:9090", "sum(vllm:num_requests_waiting)", threshold=3, min_replicas=2, max_replicas=20
)


def _trace(minutes: int = 40, seed: int = 7) -> Trace:
    """Poisson arrivals at 1.5 requests/s, 6/s from minute 12 to 20, with sizes that vary."""
    rng = np.random.default_rng(seed)
    times, t = [], 0.0
    while t < minutes * 60:
        rate = 6.0 if 720 <= t < 1200 else 1.5
        t += rng.exponential(1 / rate)
        times.append(t)
    n = len(times)
    prompts = rng.integers(200, 2000, n)
    outputs = rng.integers(1, 400, n)
    return Trace(np.asarray(times[:-1]), prompts[:-1], outputs[:-1], "burst.csv")


def _policies(trace: Trace, cfg: ClusterConfig) -> dict[str, Any]:
    """Makers of a clairvoyant schedule, the plain KEDA object and this scaler's example object."""
    need = np.clip(np.ceil(busy_per_bucket(trace, cfg)), 2, 20).astype(int).tolist()
    with resources.as_file(resources.files("scaler") / "examples" / "scaledobject.yaml") as path:
        this = load_scaledobject_model(path)
    plain = scaledobject_model(yaml.safe_load(PLAIN))
    return {
        "clairvoyant": lambda: ClairvoyantPolicy("clairvoyant", need, BUCKET_S, cfg.cold_start_s, 2, need),
        "keda": lambda: KedaPolicy("keda", plain),
        "this scaler": lambda: KedaPolicy("this scaler", this),
    }


class Watching:
    """``policy``, with every series the fleet exports recorded at every tick."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.name = policy.name
        self.min_replicas, self.max_replicas = policy.min_replicas, policy.max_replicas
        self.seen: list[tuple[Any, ...]] = []

    def tick(self, tick: TickInputs) -> int | None:
        """Record the tick's series, then let the policy decide."""
        pods, readings = tick.pods, tick.readings
        histograms = {k: dict(v) for k, v in readings.histograms.items()}
        self.seen.append((tick.now_s, asdict(pods), dict(readings.values), histograms))
        return self.policy.tick(tick)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.policy, name)


def _figures(result: RunResult, seen: list[tuple[Any, ...]]) -> dict[str, Any]:
    return {
        "series": seen,
        "ttft": result.ttft.tolist(),
        "gpu_seconds": result.gpu_seconds,
        "pending_pod_seconds": result.pending_pod_seconds,
        "scale_events": result.scale_events,
        "peak": result.peak_replicas,
        "ticks": [result.tick_spec.tolist(), result.tick_ready.tolist(), result.tick_pending.tolist()],
    }


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"physics": "separate", "waiting": "prefill"},
        {"dispatch": "round-robin", "phase_histograms": False},
        {"pod_maxima": False, "kv_cache_usage_full_batch": 0.7},
    ],
    ids=["shared-slot", "separate-prefill", "round-robin-no-phases", "sums-only"],
)
def test_the_compiled_loop_replays_what_the_python_classes_replay(changes: dict[str, Any]) -> None:
    """Each policy's replay through the compiled loop equals the Python one, figure by figure."""
    trace = _trace()
    cfg = CFG.with_overrides(**changes)
    assert kernel.supports(cfg)
    makers = _policies(trace, cfg)
    names = list(makers) if not changes else ["clairvoyant", "keda"]
    for name in names:
        python, compiled = Watching(makers[name]()), Watching(makers[name]())
        python_run = run(trace, cfg, python, START, 3, compiled=False)
        compiled_run = run(trace, cfg, compiled, START, 3, compiled=True)
        assert _figures(compiled_run, compiled.seen) == _figures(python_run, python.seen), name
    assert python_run.scale_events > 4  # the fleet moved: pods started, became Ready and drained


def test_a_fleet_the_compiled_loop_does_not_serve_runs_in_python() -> None:
    """The step physics, random dispatch and a router in front are replayed by the Python classes."""
    for changes in ({"physics": "step", "gpus_per_replica": 4}, {"dispatch": "random"}, {"router": "llm-d"}):
        assert not kernel.supports(CFG.with_overrides(**changes)), changes
    trace = _trace(minutes=5)
    plain = scaledobject_model(yaml.safe_load(PLAIN))
    result = run(trace, CFG.with_overrides(dispatch="random"), KedaPolicy("keda", plain), START, 3)
    assert np.isfinite(result.ttft).all()
    with pytest.raises(ValueError, match="the compiled loop does not serve"):
        kernel.FastCluster(CFG.with_overrides(router="llm-d"), 1)


def test_a_request_with_no_pod_to_go_to_is_an_error() -> None:
    """With no pod Ready or starting, serving a request is the cluster model's error, as in Python."""
    from scaler.replay.fleet.cluster import ClusterError
    from scaler.replay.fleet.series import Histogram, PhaseTimes, TokenCounters

    cluster = kernel.FastCluster(CFG, 1)
    cluster.scale_to(0, 0.0)
    one = np.asarray([1.0])
    series = kernel.Series(
        one, one * 100, one * 10, np.zeros(1), Histogram(100), PhaseTimes(100), TokenCounters(100)
    )
    with pytest.raises(ClusterError, match="no pod can ever serve"):
        cluster.serve(0, 1, series)


def test_without_a_directory_for_numba_s_cache_the_loop_is_compiled_each_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A read-only install and no writable home: numba cannot cache (its RuntimeError at decoration),
    and the replay compiles instead of failing to import."""
    calls: list[dict[str, bool]] = []

    class NoCache:
        @staticmethod
        def njit(**options: bool) -> Any:
            calls.append(options)
            if options.get("cache"):
                raise RuntimeError("cannot cache function 'f': no locator available for file 'kernel.py'")
            return lambda function: function

    monkeypatch.setattr(kernel, "numba", NoCache)

    def double(x: int) -> int:
        return 2 * x

    assert kernel.jit(double)(21) == 42
    assert calls == [{"cache": True, "nogil": True}, {"nogil": True}]
