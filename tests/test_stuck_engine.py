"""A stuck engine is not demand: detected per pod on a real Prometheus, named, its queue not counted."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from scaler.config import parse_metadata
from scaler.decider import Engine
from scaler.inputs import Reading
from scaler.model import InertReason
from scaler.sim.prometheus import LocalPrometheus
from scaler.sources.prometheus import PrometheusReader, TargetQuery
from tests.conftest import require_prometheus

pytestmark = pytest.mark.prometheus

END = datetime(2026, 12, 1, 12, tzinfo=UTC)
SCRAPE_S = 15
MINUTES = 5
# Per pod, per sample (seconds before END): requests waiting for capacity, deferred, running, KV usage.
# s-0 is stuck the whole span; s-1 is busy and healthy; s-2 ran until 30 s before END and then
# stopped admitting: the signature, but not for the whole window yet.


def pod_state(pod: str, before_end_s: int) -> tuple[float, float, float, float]:
    """(capacity, deferred, running, kv usage) ``pod`` reports ``before_end_s`` seconds before END."""
    if pod == "s-0":
        return 5.0, 0.0, 0.0, 0.01
    if pod == "s-1":
        return 3.0, 1.0, 8.0, 0.6
    return (4.0, 0.0, 0.0, 0.0) if before_end_s <= 30 else (0.0, 0.0, 6.0, 0.5)


def history() -> str:
    """Five minutes of three vLLM pods' gauges ending at END, as OpenMetrics for promtool."""
    names = (
        "vllm:num_requests_waiting",
        "vllm:num_requests_waiting_by_reason",
        "vllm:num_requests_running",
        "vllm:kv_cache_usage_perc",
    )
    lines: dict[str, list[str]] = {n: [f"# TYPE {n} gauge"] for n in names}
    end = int(END.timestamp())
    for pod in ("s-0", "s-1", "s-2"):
        labels = f'engine="0",model_name="llama",namespace="inference",pod="{pod}"'
        for k in range(MINUTES * 60 // SCRAPE_S + 1):
            before = MINUTES * 60 - k * SCRAPE_S
            t = end - before
            capacity, deferred, running, kv = pod_state(pod, before)
            lines["vllm:num_requests_waiting"].append(
                f"vllm:num_requests_waiting{{{labels}}} {capacity + deferred} {t}"
            )
            for reason, value in (("capacity", capacity), ("deferred", deferred)):
                lines["vllm:num_requests_waiting_by_reason"].append(
                    f'vllm:num_requests_waiting_by_reason{{{labels},reason="{reason}"}} {value} {t}'
                )
            lines["vllm:num_requests_running"].append(f"vllm:num_requests_running{{{labels}}} {running} {t}")
            lines["vllm:kv_cache_usage_perc"].append(f"vllm:kv_cache_usage_perc{{{labels}}} {kv} {t}")
    return "\n".join(line for n in names for line in lines[n]) + "\n# EOF\n"


@pytest.fixture(scope="module")
def prometheus() -> Iterator[LocalPrometheus]:
    """A real Prometheus holding the five backfilled minutes."""
    require_prometheus()
    prom = LocalPrometheus(retention="100y")
    try:
        prom.import_openmetrics(history())
        prom.start()
        yield prom
    finally:
        prom.close()


def test_a_stuck_pod_is_named_and_its_queue_is_not_demand(prometheus: LocalPrometheus) -> None:
    """s-0 waited for capacity with nothing running and an empty KV cache for the whole window: it
    alone is stuck (s-2's 30 s are not enough, s-1 runs), its 5 waiting leave the queue (13 -> 8) and
    what waits for capacity (12 -> 7), and the observation and the decision name it."""
    reader = PrometheusReader(prometheus.url, rate_window="1m")
    query = TargetQuery("t", parse_metadata({"labelSelector": 'model_name="llama"'}), prometheus.url)
    got = reader.read([query], at=END)["t"]
    assert got.pods[Reading.STUCK_WAITING] == {"s-0": 5.0}
    seen = got.observation(END, query.policy)
    assert seen.queue_waiting == 8
    assert seen.queue_waiting_capacity == 7
    (stuck,) = [i for i in seen.inert if i.reason is InertReason.STUCK]
    assert "s-0 (5 waiting)" in stuck.text
    assert "s-2" not in stuck.text
    assert "not counted as demand" in stuck.text
    decision = Engine(query.policy.spec).decide(seen)
    assert InertReason.STUCK in {i.reason for i in decision.inert}


def test_without_a_stuck_pod_nothing_is_taken_out(prometheus: LocalPrometheus) -> None:
    """With only the healthy s-1 selected: no pod is stuck, the
    queue is as the servers say, and no reason is given."""
    reader = PrometheusReader(prometheus.url, rate_window="1m")
    query = TargetQuery(
        "t", parse_metadata({"labelSelector": 'model_name="llama", pod="s-1"'}), prometheus.url
    )
    got = reader.read([query], at=END)["t"]
    assert got.pods[Reading.STUCK_WAITING] == {}
    seen = got.observation(END, query.policy)
    assert seen.queue_waiting == 4
    assert not [i for i in seen.inert if i.reason is InertReason.STUCK]
