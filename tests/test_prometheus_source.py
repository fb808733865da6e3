"""The Prometheus source against a real Prometheus scraping simulated inference servers."""

from __future__ import annotations

import math
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from scaler.config import parse_metadata
from scaler.histogram import histogram_quantile, share_above
from scaler.presets import PRESETS
from scaler.readings import Readings
from scaler.sim.fleet import PodLoad, SimulatedFleet
from scaler.sim.prometheus import LocalPrometheus, free_port
from scaler.sources.history import History
from scaler.sources.prometheus import PrometheusClient, PrometheusQueryError, PrometheusReader, TargetQuery
from tests.conftest import require_prometheus
from tests.fake_prometheus import FakePrometheus, vector
from tests.helpers import eventually, started

pytestmark = pytest.mark.prometheus

MODEL_A = "meta-llama/Llama-3.1-8B-Instruct"
MODEL_B = "mistralai/Mistral-7B-Instruct"
AT = datetime(2026, 12, 1, tzinfo=UTC)  # an Observation's time (reads are made at Prometheus' now)


class Stack:
    """One real Prometheus scraping a fleet per engine, plus a second vLLM model."""

    def __init__(self) -> None:
        self.fleets: dict[str, SimulatedFleet] = {}
        for name, engine, model, pods in [
            ("vllm", "vllm", MODEL_A, ["a-0", "a-1"]),
            ("vllm-b", "vllm", MODEL_B, ["b-0"]),
            ("sglang", "sglang", "qwen", ["s-0", "s-1"]),
            ("tgi", "tgi", "falcon", ["t-0"]),
            ("triton", "triton", "ensemble", ["n-0", "n-1"]),
        ]:
            fleet = SimulatedFleet(namespace=f"ns-{name}", model=model, engine=engine)
            fleet.set_pods(pods)
            fleet.start()
            self.fleets[name] = fleet
        self.prometheus = LocalPrometheus(scrape_interval_s=0.5)
        self.prometheus.start([f.address for f in self.fleets.values()])

    def close(self) -> None:
        """Stop Prometheus and every fleet."""
        self.prometheus.close()
        for fleet in self.fleets.values():
            fleet.stop()


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    """The module's Prometheus and fleets, started once and closed after the last test."""
    yield from started(Stack)


def reader_for(stack: Stack) -> PrometheusReader:
    """A reader on the stack's Prometheus with a 5 s rate window, short enough for the tests."""
    return PrometheusReader(stack.prometheus.url, rate_window="5s")


def target(key: str, address: str, **metadata: str) -> TargetQuery:
    """A target query from ScaledObject-style metadata."""
    return TargetQuery(key, parse_metadata(metadata), address)


LOAD = PodLoad(
    waiting=40,
    running=12,
    prompt_tokens_per_s=6000,
    generation_tokens_per_s=1200,
    requests_per_s=4,
    ttft_seconds=0.3,
    kv_cache_usage=0.6,
    queue_time_seconds=0.12,
)

SELECTORS = {
    "vllm": f'model_name="{MODEL_A}"',
    "sglang": 'model_name="qwen"',
    "tgi": 'namespace="ns-tgi"',
    "triton": 'model="ensemble"',
}


WINDOW_SCRAPES = 12  # scrapes of 0.5 s that fill reader_for's 5 s rate window, and two more


def close_to(value: float | None, expected: float, tolerance: float = 0.15) -> bool:
    """Whether ``value`` is present and within ``tolerance`` (relative) of ``expected``."""
    return value is not None and abs(value - expected) <= tolerance * max(expected, 1e-9)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "tgi", "triton"])
def test_preset_reads_each_engine(stack: Stack, engine: str) -> None:
    """Each engine's preset reads queue, rates, running, pods, and KV cache and TTFT where exported."""
    fleet = stack.fleets[engine]
    fleet.set_fleet_load(LOAD)
    switched = fleet.scrapes
    reader = reader_for(stack)
    query = target("t", stack.prometheus.url, engine=engine, labelSelector=SELECTORS[engine])

    def read() -> Readings | None:
        # Every sample of the 5 s rate window scraped after the load was set (10 scrapes of 0.5 s,
        # and two more): a window that still holds an earlier test's load mixes the two, and the
        # ratios below (a histogram's sum over its count) come out between them.
        if fleet.scrapes - switched < WINDOW_SCRAPES:
            return None
        got = reader.read([query])["t"]
        v = got.values
        rates_ok = close_to(v.get("prompt_tokens_per_s"), 6000) and close_to(
            v.get("generation_tokens_per_s"), 1200
        )
        return got if rates_ok and v.get("queue_waiting") == 40 else None

    got = eventually(read, timeout=25, every=0.25)
    assert got is not None
    obs = got.observation(AT, query.policy)  # the TTFT inputs come from the histogram read
    assert got.values["requests_running"] == 12
    assert got.values["replicas_reporting"] == len(fleet.pods)
    offered = {f.field for f in PRESETS[engine].families}
    if "kv_cache_usage" in offered:
        assert got.values["kv_cache_usage"] == pytest.approx(0.6)
    else:
        assert "exports no metric" in got.missing["kv_cache_usage"]
    if "ttft" in offered:
        # every request at 0.3 s falls in the (0.25, 0.5] bucket: p95 interpolates to 0.4875
        assert obs.ttft_p95_seconds == pytest.approx(0.4875, rel=1e-6)
        assert obs.ttft_p99_seconds == pytest.approx(0.4975, rel=1e-6)
        # the buckets themselves travel too, for the share over each target's objective
        buckets = got.histograms["ttft"]
        assert share_above(2.0, buckets) == 0.0
        assert share_above(0.2, buckets) == pytest.approx(1.0)
    else:
        assert "exports no metric" in obs.missing["ttft_p95_seconds"]
    # The busiest pod's running count and fullest cache (the load is spread evenly over the pods),
    # and vLLM's busiest prefill: the rate of its prefill-time sum, 2 requests/s a pod of 0.18 s.
    if "requests_running_max" in offered:
        assert got.values["requests_running_max"] == pytest.approx(12 / len(fleet.pods))
        assert got.values["kv_cache_usage_max"] == pytest.approx(0.6)
    if "prefill_busy_max" in offered:
        assert close_to(got.values["prefill_busy_max"], 4 / len(fleet.pods) * 0.18)  # a rate, as above
    # The phase times (vLLM: queue and prefill; SGLang: queue), each its histogram's sum over count.
    if "queue_time_sum" in offered:
        assert obs.queue_time_mean_seconds == pytest.approx(0.12, rel=0.02)
    else:
        assert obs.queue_time_mean_seconds is None
    if "prefill_time_sum" in offered:
        assert obs.prefill_time_mean_seconds == pytest.approx(0.18, rel=0.02)  # TTFT less the queue
    else:
        assert obs.prefill_time_mean_seconds is None


def test_our_quantile_matches_prometheus(stack: Stack) -> None:
    """The TTFT p95 computed from the buckets equals Prometheus' own histogram_quantile."""
    stack.fleets["vllm"].set_fleet_load(LOAD)
    eventually(
        lambda: stack.prometheus.query("sum(rate(vllm:time_to_first_token_seconds_count[5s])) > 3"),
        timeout=25,
        every=0.25,
    )
    buckets = f'vllm:time_to_first_token_seconds_bucket{{model_name="{MODEL_A}"}}'
    theirs = stack.prometheus.query(f"histogram_quantile(0.95, sum by (le) (rate({buckets}[5s])))")
    query = target("t", stack.prometheus.url, labelSelector=SELECTORS["vllm"])
    ours = reader_for(stack).read([query])["t"].observation(AT, query.policy)
    assert ours.ttft_p95_seconds == pytest.approx(float(theirs[0]["value"][1]), rel=1e-9)


def test_selectors_split_one_batched_query_per_family(stack: Stack) -> None:
    """One query per metric family serves every labelSelector; each target gets its own sum."""
    stack.fleets["vllm"].set_fleet_load(PodLoad(waiting=30))
    stack.fleets["vllm-b"].set_fleet_load(PodLoad(waiting=7))
    reader = reader_for(stack)
    url = stack.prometheus.url
    targets = [
        target("a", url, labelSelector=f'model_name="{MODEL_A}"'),
        target("b", url, labelSelector=f'model_name="{MODEL_B}"'),
        target("both", url, labelSelector='model_name=~".*Instruct"'),
        target("pod", url, labelSelector=f'model_name="{MODEL_A}", pod="a-1"'),
        target("none", url, labelSelector='model_name="nope"'),
    ]

    def read() -> dict[str, Readings] | None:
        got = reader.read(targets)
        return (
            got
            if got["a"].values.get("queue_waiting") == 30 and got["b"].values.get("queue_waiting") == 7
            else None
        )

    before = reader.queries
    got = eventually(read, timeout=25, every=0.25)
    assert got is not None
    per_read = len(PRESETS["vllm"].families)
    assert (reader.queries - before) % per_read == 0  # one query per family, whatever the targets
    assert got["both"].values["queue_waiting"] == 37
    assert got["pod"].values["queue_waiting"] == 15
    assert got["none"].missing["queue_waiting"] == "no series match labelSelector"
    assert "queue_waiting" not in got["none"].values


def _query_requests(prometheus: LocalPrometheus) -> float:
    """Prometheus' own count of /api/v1/query requests, read from its /metrics."""
    with urllib.request.urlopen(f"{prometheus.url}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("prometheus_http_requests_total") and 'handler="/api/v1/query"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_query_count_does_not_grow_with_scaledobjects(stack: Stack) -> None:
    """Reading fifty ScaledObjects costs at most one more Prometheus query than reading one."""
    url = stack.prometheus.url
    reader = reader_for(stack)
    one = [target("so-0", url, labelSelector=f'model_name="{MODEL_A}"')]
    fifty = [
        target(
            f"so-{i}", url, labelSelector=f'model_name="{MODEL_A if i % 2 else MODEL_B}", namespace=~"ns-.*"'
        )
        for i in range(50)
    ]
    counts = []
    for targets in (one, fifty):
        start = _query_requests(stack.prometheus)
        reader.read(targets)
        counts.append(_query_requests(stack.prometheus) - start)
    assert counts[0] >= len(PRESETS["vllm"].families)
    assert counts[1] <= counts[0] + 1, counts


def test_prometheus_down_is_a_named_absence() -> None:
    """An unreachable Prometheus leaves every input missing with "connection failed" as the reason."""
    reader = PrometheusReader(f"http://127.0.0.1:{free_port()}", timeout_s=1)
    got = reader.read([target("t", reader.default_address or "")])["t"]
    assert not got.values
    assert "connection failed" in got.missing["queue_waiting"]
    assert "connection failed" in got.missing["prompt_tokens_per_s"]


@pytest.mark.parametrize(
    ("address", "said"),
    [
        (
            "http://127.0.0.1:{port}",
            "connection failed: connection refused (nothing listens at that host and port)",
        ),
        ("http://no-such-host.invalid:9090", "connection failed: the host name does not resolve"),
    ],
    ids=["refused", "no-such-host"],
)
def test_an_unreachable_prometheus_is_said_in_a_few_words(address: str, said: str) -> None:
    """Why a connection failed, named in a few words: none of urllib3's text, nor the query URL-encoded."""
    url = address.format(port=free_port())
    client = PrometheusClient(url, timeout_s=2)
    with pytest.raises(PrometheusQueryError) as caught:
        client.instant('sum(vllm:num_requests_waiting{model_name="m"})')
    message = str(caught.value)
    assert message.startswith(f"prometheus {url}: {said}")
    for leak in ("HTTPConnectionPool", "Max retries", "%28", "urllib3", "NewConnectionError"):
        assert leak not in message


BAD_QUERY = b'{"status":"error","errorType":"bad_data","error":"1:5: parse error: unclosed left parenthesis"}'


@pytest.mark.parametrize(
    ("status", "body", "said"),
    [
        (
            404,
            b"",
            "HTTP 404 Not Found: no Prometheus API at this URL (is it Prometheus' own, without a path such"
            " as /graph?)",
        ),
        (
            400,
            BAD_QUERY,
            'HTTP 400 Bad Request: 1:5: parse error: unclosed left parenthesis (query: sum(vllm:x{a="b"}))',
        ),
    ],
    ids=["not-found", "bad-query"],
)
def test_an_http_error_says_its_status_and_what_prometheus_said(status: int, body: bytes, said: str) -> None:
    """A non-200 answer names its status, Prometheus' own error and the query as written, not as sent."""
    fake = FakePrometheus(lambda path: (status, body))
    try:
        with pytest.raises(PrometheusQueryError) as caught:
            PrometheusClient(fake.url + "/graph", timeout_s=2).instant('sum(vllm:x{a="b"})')
    finally:
        fake.close()
    assert str(caught.value) == f"prometheus {fake.url}/graph: {said}"


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (500, b"internal error", "HTTP 500 Internal Server Error: internal error (query: sum by"),
        (200, b"{not json", "invalid response"),
        (200, b'{"status": "success", "data": {}}', "'result'"),
        (200, vector("NaN", "NaN"), "only NaN samples"),
        (200, vector(), "no series match labelSelector"),
        (
            200,
            b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":"x"}]}}',
            "malformed sample",
        ),
    ],
    ids=["http-500", "not-json", "no-result", "only-nan", "no-series", "malformed-sample"],
)
def test_broken_answers_are_named_absences(status: int, body: bytes, reason: str) -> None:
    """A broken or empty Prometheus answer leaves the queue missing, with a reason naming the fault."""
    fake = FakePrometheus(lambda path: (status, body))
    try:
        got = PrometheusReader(fake.url, timeout_s=2).read([target("t", fake.url)])["t"]
    finally:
        fake.close()
    assert "queue_waiting" not in got.values
    assert reason in got.missing["queue_waiting"]


def test_nan_next_to_numbers_is_dropped_not_summed() -> None:
    """NaN and +Inf samples are dropped from a sum, and the finite ones are added up."""
    fake = FakePrometheus(lambda path: (200, vector("NaN", "4", "+Inf", "3")))
    try:
        got = PrometheusReader(fake.url).read([target("t", fake.url)])["t"]
    finally:
        fake.close()
    assert got.values["queue_waiting"] == 7.0


@pytest.mark.parametrize(
    ("q", "buckets", "expected"),
    [
        (0.5, {0.1: 0.0, 0.5: 10.0, math.inf: 10.0}, 0.3),
        (0.95, {0.25: 0.0, 0.5: 4.0, math.inf: 4.0}, 0.4875),
        (0.99, {1.0: 99.0, 2.0: 100.0, math.inf: 100.0}, 1.0),
        (0.5, {1.0: 2.0, math.inf: 10.0}, 1.0),  # rank in +Inf: the largest finite bound
        (0.5, {1.0: 0.0, math.inf: 0.0}, None),  # no observations
        (0.5, {1.0: 1.0}, None),  # no +Inf bucket
        (0.1, {2.0: 10.0, math.inf: 10.0}, 0.2),  # the lowest bucket starts at 0
    ],
    ids=[
        "median",
        "p95",
        "p99-at-bound",
        "rank-in-inf",
        "no-observations",
        "no-inf-bucket",
        "lowest-from-zero",
    ],
)
def test_histogram_quantile_table(q: float, buckets: dict[float, float], expected: float | None) -> None:
    """histogram_quantile interpolates like Prometheus, and gives None without data or a +Inf bucket."""
    got = histogram_quantile(q, buckets)
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_history_is_read_from_range_queries(tmp_path: Any) -> None:
    """Token rates, the queue, the pods reporting and the TTFT histogram come back as history."""
    require_prometheus()
    now = int(time.time())  # noqa: TID251 - a real Prometheus accepts samples near now only
    ttft = "vllm:time_to_first_token_seconds"
    lines = [
        "# TYPE vllm:prompt_tokens counter",
        "# TYPE vllm:generation_tokens counter",
        "# TYPE vllm:num_requests_waiting gauge",
        "# TYPE vllm:num_requests_running gauge",
        f"# TYPE {ttft} histogram",
    ]
    prompt = generation = first_tokens = 0.0
    labels = f'model_name="{MODEL_A}",pod="a-0"'
    for t in range(now - 1800, now - 5, 5):  # 30 minutes, rising from 1,000 to about 4,000 tokens/s
        rate = 1000 + (t - (now - 1800)) * (3000 / 1800)
        prompt += rate * 5
        generation += rate * 0.2 * 5
        first_tokens += 20  # 4 requests/s; one in twenty at 3 s, the others at 0.3 s
        lines.append(f"vllm:prompt_tokens_total{{{labels}}} {prompt:.1f} {t}")
        lines.append(f"vllm:generation_tokens_total{{{labels}}} {generation:.1f} {t}")
        lines.append(f"vllm:num_requests_waiting{{{labels}}} 7 {t}")
        lines.append(f"vllm:num_requests_running{{{labels}}} 12 {t}")
        for le, share in (
            ("0.25", 0.0),
            ("0.5", 0.95),
            ("1.0", 0.95),
            ("2.5", 0.95),
            ("5.0", 1.0),
            ("+Inf", 1.0),
        ):
            lines.append(f'{ttft}_bucket{{{labels},le="{le}"}} {first_tokens * share:.1f} {t}')
        lines.append(f"{ttft}_count{{{labels}}} {first_tokens:.1f} {t}")
        lines.append(f"{ttft}_sum{{{labels}}} {first_tokens * (0.95 * 0.3 + 0.05 * 3.0):.1f} {t}")
    prom = LocalPrometheus()
    try:
        prom.import_openmetrics("\n".join(lines) + "\n")
        prom.start()
        reader = History(PrometheusReader(prom.url, rate_window="1m"), history_seconds=1800, step_s=15)
        asked_at = datetime.now(UTC)  # noqa: TID251 - the samples above were placed relative to now
        history = reader.history([target("t", prom.url, labelSelector=SELECTORS["vllm"])], asked_at)["t"]
    finally:
        prom.close()
    assert len(history) > 100
    assert history[0].prompt_tokens_per_s is not None
    assert history[0].prompt_tokens_per_s < 1600
    # two minutes before the data ends the ramp stood at 1,000 + 1,680/1,800 * 3,000 = 3,800 tokens/s
    point = min(history, key=lambda p: abs(p.timestamp - (now - 120)))
    assert point.prompt_tokens_per_s is not None
    assert point.prompt_tokens_per_s == pytest.approx(3800, rel=0.05)
    assert point.generation_tokens_per_s == pytest.approx(point.prompt_tokens_per_s * 0.2, rel=0.01)
    assert [p.timestamp for p in history] == sorted(p.timestamp for p in history)
    # what the capacity calibration warms from
    assert point.queue_waiting == 7
    assert point.ready_replicas == 1  # one pod reporting
    assert point.requests_per_s == pytest.approx(4.0, rel=0.05)
    assert point.ttft_over_objective == pytest.approx(0.05, rel=0.05)  # the default 2 s objective


def test_credentials_in_addresses_never_reach_reasons_or_logs() -> None:
    """Passwords in a Prometheus address are redacted, and never appear in missing-input reasons."""
    from scaler.sources.prometheus import redact_url

    assert (
        redact_url("https://scaler:s3cret@prom.example:9090/prefix") == "https://***@prom.example:9090/prefix"
    )
    assert redact_url("http://prom:9090") == "http://prom:9090"
    reader = PrometheusReader(f"http://scaler:s3cret@127.0.0.1:{free_port()}", timeout_s=1)
    got = reader.read([target("t", reader.default_address or "")])["t"]
    assert "connection failed" in got.missing["queue_waiting"]
    assert all("s3cret" not in reason for reason in got.missing.values())
