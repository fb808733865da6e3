"""The test stand-ins themselves: a real Prometheus scrapes the simulated fleet and reads back its rates."""

from __future__ import annotations

import pytest

from scaler.sim.fleet import PodLoad, SimulatedFleet
from scaler.sim.prometheus import LocalPrometheus

pytestmark = pytest.mark.prometheus


def test_fleet_exposition_is_valid_text_format(fleet: SimulatedFleet) -> None:
    """The fleet renders valid Prometheus text with the vLLM families, load split across pods."""
    from prometheus_client.parser import text_string_to_metric_families

    fleet.set_fleet_load(PodLoad(waiting=10, running=4, prompt_tokens_per_s=1000, requests_per_s=2))
    families = {f.name: f for f in text_string_to_metric_families(fleet.render())}
    assert {"vllm:num_requests_waiting", "vllm:prompt_tokens", "vllm:time_to_first_token_seconds"} <= set(
        families
    )
    waiting = [s.value for s in families["vllm:num_requests_waiting"].samples]
    assert waiting == [5.0, 5.0]


def test_prometheus_reads_back_gauges_and_rates(fleet: SimulatedFleet, prometheus: LocalPrometheus) -> None:
    """A real Prometheus scraping the fleet reads back its gauges and token rates."""
    fleet.set_fleet_load(
        PodLoad(waiting=30, running=8, prompt_tokens_per_s=4000, generation_tokens_per_s=800)
    )
    assert prometheus.wait_for(
        'sum(vllm:num_requests_waiting{model_name="meta-llama/Llama-3.1-8B-Instruct"}) > 29'
    )
    rate = prometheus.wait_for("sum(rate(vllm:prompt_tokens_total[5s])) > 3600", timeout_s=30)
    assert rate, prometheus.log_tail()
    assert 3500 < float(rate[0]["value"][1]) < 4500
