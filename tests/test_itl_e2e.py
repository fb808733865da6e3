"""The inter-token latency read end to end: a real Prometheus scrapes a simulated vLLM fleet whose
ITL histogram is named as vLLM names it now, or as it did before 0.11."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from scaler.model import Observation
from scaler.service.app import wall_clock
from scaler.sim.fleet import PodLoad, SimulatedFleet
from scaler.sim.prometheus import LocalPrometheus
from scaler.sources.live import LiveSource
from scaler.sources.prometheus import PrometheusReader
from scaler.targets.registry import TargetKey
from tests.conftest import require_prometheus
from tests.helpers import target_of

pytestmark = pytest.mark.prometheus

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def wait_until(check: Callable[[], object], timeout_s: float = 30.0) -> None:
    """Poll ``check`` until it is true (Prometheus has scraped what the test set)."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "Prometheus never showed what the test set"
        time.sleep(0.1)


@pytest.mark.parametrize(
    ("generation", "name"),
    [("current", "vllm:inter_token_latency_seconds"), ("legacy", "vllm:time_per_output_token_seconds")],
)
def test_the_itl_histogram_gives_its_mean_tail_and_share_over_the_objective(
    generation: str, name: str
) -> None:
    """Gaps of 80 ms against a 50 ms objective: mean 80 ms, the tail in the 75-100 ms bucket, all
    of them over; read under vLLM's current name, or the older one where only it exists."""
    require_prometheus()
    fleet = SimulatedFleet(model=MODEL, generations=(generation,))
    fleet.set_pods(["vllm-0", "vllm-1"])
    fleet.start()
    prometheus = LocalPrometheus(scrape_interval_s=0.5)
    try:
        prometheus.start([fleet.address])
        fleet.set_fleet_load(PodLoad(running=40, generation_tokens_per_s=500, itl_seconds=0.08))
        wait_until(lambda: prometheus.query(f"sum(rate({name}_count[5s])) > 450"))
        metadata = {"labelSelector": f'model_name="{MODEL}"', "itlObjectiveSeconds": "0.05"}
        target = target_of(TargetKey("inference", "llama"), metadata)
        source = LiveSource(PrometheusReader(prometheus.url, rate_window="5s"))
        seen: Observation = asyncio.run(source.observe([target], wall_clock()))[target.key]
    finally:
        prometheus.close()
        fleet.stop()
    assert seen.itl_mean_seconds == pytest.approx(0.08, rel=0.01)
    assert seen.itl_tail_seconds is not None
    assert 0.075 < seen.itl_tail_seconds <= 0.1
    assert seen.itl_over_objective == pytest.approx(1.0)
