"""The history warm-up in batches, against a real Prometheus holding an hour and more of several models.

The history (``tests/fleet_history.py``) is loaded with ``promtool tsdb create-blocks-from
openmetrics`` at fixed dates; the queries are counted by Prometheus itself (its /metrics'
``prometheus_http_requests_total`` by handler).
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from scaler.config import parse_metadata
from scaler.presets import PRESETS
from scaler.sim.prometheus import LocalPrometheus
from scaler.sources.history import KEEP_S, WARM_FAMILIES, History
from scaler.sources.live import LiveSource
from scaler.sources.prometheus import PrometheusReader, TargetQuery
from tests.conftest import require_prometheus
from tests.fleet_history import ITL_P995_S, ITL_SHARES, SCRAPE_S, history, itl_mean

pytestmark = pytest.mark.prometheus

END = datetime(2026, 11, 30, 12, tzinfo=UTC)
MODELS = 4
STEP_S = 15.0
# The warm-up families vLLM's preset has: the range queries one warm-up costs.
VLLM_FAMILIES = sum(PRESETS["vllm"].family(name) is not None for name in WARM_FAMILIES)


@pytest.fixture(scope="module")
def prometheus() -> Iterator[LocalPrometheus]:
    """A Prometheus holding 90 minutes of four models up to END (a sample every 15 s)."""
    require_prometheus()
    prom = LocalPrometheus(retention="100y")
    try:
        prom.import_openmetrics(history(MODELS, int(END.timestamp()), minutes=90))
        prom.start()
        yield prom
    finally:
        prom.close()


def requests(prometheus: LocalPrometheus, handler: str) -> float:
    """Prometheus' own count of the requests it answered on ``handler``."""
    with urllib.request.urlopen(f"{prometheus.url}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("prometheus_http_requests_total{") and f'handler="{handler}"' in line
    )


def targets(url: str, count: int, selector: str = 'model_name="model-{m}"') -> list[TargetQuery]:
    """``count`` targets over the models, ``selector`` formatted with the model's number."""
    return [
        TargetQuery(
            f"so-{selector[:5]}-{i}",
            parse_metadata({"labelSelector": selector.format(m=i % MODELS), "itlObjectiveSeconds": "0.05"}),
            url,
        )
        for i in range(count)
    ]


def warm_up(prometheus: LocalPrometheus) -> History:
    """A fresh warm-up reader over the hour before the time it is asked for."""
    return History(PrometheusReader(prometheus.url, rate_window="1m"), history_seconds=3600, step_s=STEP_S)


def range_queries(prometheus: LocalPrometheus, read: object) -> float:
    """The range queries Prometheus answered while ``read()`` ran."""
    before = requests(prometheus, "/api/v1/query_range")
    read()  # type: ignore[operator]
    return requests(prometheus, "/api/v1/query_range") - before


def test_many_new_targets_cost_the_range_queries_of_one(prometheus: LocalPrometheus) -> None:
    """One target and sixty (two label names, four models) warm up in one range query per family."""
    url = prometheus.url
    one = range_queries(prometheus, lambda: warm_up(prometheus).history(targets(url, 1), END))
    many = targets(url, 40) + targets(url, 20, 'namespace="team-{m}"')
    sixty = range_queries(prometheus, lambda: warm_up(prometheus).history(many, END))
    assert one == sixty == VLLM_FAMILIES


def test_targets_arriving_apart_share_the_answers(prometheus: LocalPrometheus) -> None:
    """Later batches read nothing at the same refresh time and only the steps since at a later one;
    their points are those a fresh warm-up reads; a label the answers lack reads the hour again."""
    url = prometheus.url
    shared = warm_up(prometheus)
    first = range_queries(prometheus, lambda: shared.history(targets(url, 8), END))
    later = targets(url, 6)[4:] + targets(url, 4, 'namespace="team-{m}", model_name=~"model-[12]"')
    got = {}
    same_time = range_queries(prometheus, lambda: got.update(shared.history(targets(url, 3), END)))
    after = END + timedelta(seconds=2 * STEP_S)
    step_later = range_queries(prometheus, lambda: got.update(shared.history(later[:2], after)))
    new_label = range_queries(prometheus, lambda: got.update(shared.history(later[2:], after)))
    assert (first, same_time, step_later, new_label) == (VLLM_FAMILIES, 0, VLLM_FAMILIES, VLLM_FAMILIES)
    fresh = warm_up(prometheus).history(later, after)
    for t in later:
        assert [p.to_json() for p in got[t.key]] == [p.to_json() for p in fresh[t.key]], t.key
    # the hour before `after`, a point every step
    assert len(fresh[later[0].key]) == 3600 / STEP_S + 1


def test_answers_are_dropped_once_new_targets_stop_coming(prometheus: LocalPrometheus) -> None:
    """The live source's refresh drops answers no warm-up read for KEEP_S; a later target reads anew."""
    reader = PrometheusReader(prometheus.url, rate_window="1m")
    source = LiveSource(reader, history=History(reader, history_seconds=3600, step_s=STEP_S))
    source.history.history(targets(prometheus.url, 2), END)
    assert source.history.kept == 1
    source._observe([], END + timedelta(seconds=KEEP_S))  # a refresh with no target: nothing to read
    assert source.history.kept == 1
    source._observe([], END + timedelta(seconds=KEEP_S + STEP_S))
    assert source.history.kept == 0


def test_the_warm_up_carries_the_inter_token_latency(prometheus: LocalPrometheus) -> None:
    """Each point has the ITL mean (the histogram's sum over its count) and its 99.5th percentile."""
    points = warm_up(prometheus).history(targets(prometheus.url, 1), END)["so-model-0"]
    scrapes = 90 * 60 // SCRAPE_S
    for point in points[::40]:
        k = scrapes - round((END - point.now).total_seconds() / SCRAPE_S)
        # a 1-minute rate over four scrapes of a slowly turning cycle: the mean at its middle
        assert point.itl_mean_seconds == pytest.approx(itl_mean(0, k - 2), rel=0.02)
        assert point.itl_tail_seconds == pytest.approx(ITL_P995_S, rel=1e-4)
        assert point.itl_over_objective == pytest.approx(1 - ITL_SHARES[0], rel=1e-4)  # at a bucket bound
        assert point.ttft_mean_seconds is not None


def test_first_decisions_share_the_refresh_answers(prometheus: LocalPrometheus) -> None:
    """Reads at one refresh time share one instant query per family, with what a fresh read says."""
    url = prometheus.url
    reader = PrometheusReader(url, rate_window="1m")
    before = requests(prometheus, "/api/v1/query")
    reader.read(targets(url, 4, 'model_name="model-{m}", namespace=~"team-.*"'), END)
    first = requests(prometheus, "/api/v1/query") - before
    got = reader.read(targets(url, 6), END)
    second = requests(prometheus, "/api/v1/query") - before - first
    reader.read(targets(url, 2, 'pod="model-{m}-0"'), END)
    third = requests(prometheus, "/api/v1/query") - before - first - second
    families = len(PRESETS["vllm"].families)
    assert (first, second, third) == (families, 0, families)
    fresh = PrometheusReader(url, rate_window="1m").read(targets(url, 6), END)
    assert {k: v.values for k, v in got.items()} == {k: v.values for k, v in fresh.items()}
    assert got["so-model-5"].values["requests_running"] > 0
