"""Inert-autoscaler detection against a real Prometheus: each reason made by a real series layout (a
renamed model label, a stopped exporter, pods Prometheus does not scrape, a stranded router gauge, a
backfilled gap), read through the live source with the Kubernetes inventory on the API double, named,
and gone once the cause is fixed. Issue 30 part 1, and issue 31 item 5 (the dry-run on an 8-minute gap).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client

from scaler.inputs import Input
from scaler.inventory import scaledobject_from_json
from scaler.model import Decision, Inert, InertReason, Observation
from scaler.outputs.dryrun import CompactLines, format_json
from scaler.service.app import dry_run_live, live_source, wall_clock
from scaler.sim.exposition import MetricsServer
from scaler.sim.fleet import PodLoad, SimulatedFleet
from scaler.sim.prometheus import LocalPrometheus
from scaler.sources.kubernetes import InventoryOptions, KubernetesInventory
from scaler.sources.live import LiveSource
from scaler.sources.probe import SeriesProbe
from scaler.sources.prometheus import PrometheusReader
from scaler.targets.registry import Target, TargetKey, TargetRegistry
from tests import k8s_double as k8s
from tests.conftest import require_prometheus
from tests.fleet_history import history
from tests.helpers import eventually
from tests.k8s_double import KubeDouble

pytestmark = pytest.mark.prometheus

NS = "inference"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
PODS = ("llama-5d8f-a", "llama-5d8f-b")
FAST = InventoryOptions(watch_timeout_seconds=5, backoff_initial_seconds=0.05, backoff_max_seconds=0.2)
TIMEOUT_S = 30.0  # scrapes every second: a change is read within a few of them


class Router:
    """llm-d's EPP as its in-flight-load plugin writes to /metrics: a gauge per endpoint, kept after
    the endpoint's pod is gone (pkg/epp/framework/plugins/requestcontrol/dataproducer/inflightload)."""

    def __init__(self) -> None:
        self.tokens: dict[str, float] = {}  # endpoint -> tokens in flight
        self._http = MetricsServer(self.render)

    def render(self) -> str:
        """The exposition: llm_d_epp_inflight_requests and _tokens, one series per endpoint."""
        lines = []
        for name in ("llm_d_epp_inflight_requests", "llm_d_epp_inflight_tokens"):
            lines.append(f"# TYPE {name} gauge")
            for endpoint, tokens in sorted(self.tokens.items()):
                labels = (
                    f'endpoint_name="{endpoint}",namespace="{NS}",producer_name="inflight-load",'
                    'fairness_id="default",priority="0"'
                )
                value = tokens if name.endswith("tokens") else tokens / 1000
                lines.append(f"{name}{{{labels}}} {value}")
        return "\n".join(lines) + "\n"

    def start(self) -> str:
        """Serve; the host:port."""
        return self._http.start()

    def stop(self) -> None:
        """Stop serving."""
        self._http.stop()


class Stand:
    """A vLLM fleet and a router scraped every second by a real Prometheus, the Deployment's pods on
    the Kubernetes API double, and the live source reading both."""

    def __init__(self) -> None:
        self.fleet = SimulatedFleet(namespace=NS, model=MODEL)
        self.fleet.set_pods(PODS)
        self.fleet.set_fleet_load(PodLoad(waiting=6, running=10, prompt_tokens_per_s=2000, requests_per_s=2))
        self.fleet_address = self.fleet.start()
        self.router = Router()
        self.prometheus = LocalPrometheus(scrape_interval_s=1.0)
        self.prometheus.start([self.fleet_address, self.router.start()])
        self.double = KubeDouble().start()
        self.double.apply(k8s.node("gpu-a", 8))
        self.double.apply(k8s.deployment("llama", NS, replicas=len(PODS), gpus=2))
        self.double.apply(k8s.scaledobject("llama", NS))
        for pod in PODS:
            self.pod(pod)
        api = client.ApiClient(client.Configuration(host=self.double.url))
        self.inventory = KubernetesInventory(api, options=FAST)
        self.inventory.start()
        assert self.inventory.wait_synced(10), self.inventory.problem()
        reader = PrometheusReader(self.prometheus.url, rate_window="5s")
        # Series here live seconds, not hours: their last sample is looked for every second.
        probe = SeriesProbe(reader, lookback_s=600, resolution_s=1)
        self.source = LiveSource(reader, self.inventory, probe=probe)
        self.registry = TargetRegistry()

    def pod(self, name: str) -> None:
        """A Ready pod of the Deployment."""
        self.double.apply(
            k8s.pod(name, NS, labels={"app": "llama"}, owner="llama-5d8f", node="gpu-a", ready=True)
        )

    def target(self, selector: str = f'model_name="{MODEL}"') -> Target:
        """The ScaledObject inference/llama with this labelSelector."""
        meta = {"labelSelector": selector, "minReplicas": "1", "maxReplicas": "16"}
        target, _ = self.registry.resolve(TargetKey(NS, "llama"), meta, 0.0)
        return target

    def observe(self, selector: str = f'model_name="{MODEL}"') -> Observation:
        """What the live source reads for the target now."""
        target = self.target(selector)
        return asyncio.run(self.source.observe([target], wall_clock()))[target.key]

    def close(self) -> None:
        """Stop everything started."""
        self.inventory.stop()
        self.double.stop()
        self.prometheus.close()
        self.router.stop()
        self.fleet.stop()


@pytest.fixture
def stand() -> Iterator[Stand]:
    """A fresh stand per test: each breaks it its own way."""
    require_prometheus()
    s = Stand()
    try:
        yield s
    finally:
        s.close()


def reasons(obs: Observation) -> set[InertReason]:
    """The kinds of reason an observation's target is inert for."""
    return {i.reason for i in obs.inert}


def healthy(stand: Stand) -> Observation:
    """The first observation with the queue read and no reason to be inert."""
    return eventually(
        stand.observe, lambda o: o.queue_waiting is not None and not o.inert, timeout=TIMEOUT_S, every=0.5
    )


def inert_for(stand: Stand, why: InertReason) -> tuple[Observation, Inert]:
    """The first observation whose target is inert for ``why``, and that reason: its only one."""
    seen = eventually(stand.observe, lambda o: why in reasons(o), timeout=TIMEOUT_S, every=0.5)
    (reason,) = seen.inert
    return seen, reason


def test_a_renamed_model_label_is_named_with_what_the_pods_write_now_and_cleared(stand: Stand) -> None:
    """The servers' served-model-name changes: no_series, naming the value they write now with a
    did-you-mean (never "stale", never "no series match labelSelector"); renamed back, cleared."""
    healthy(stand)
    stand.fleet.model = "Llama-3.1-8B-Instruct"
    seen, reason = inert_for(stand, InertReason.NO_SERIES)
    assert f'model_name="{MODEL}" matches no fresh series' in reason.text
    assert "llama-5d8f-a, llama-5d8f-b" in reason.text
    assert 'did you mean model_name="Llama-3.1-8B-Instruct"?' in reason.text
    assert Input.QUEUE_WAITING in reason.inputs
    assert seen.queue_waiting is None
    assert seen.missing[Input.QUEUE_WAITING].startswith("no_series: ")
    assert "no series match labelSelector" not in json.dumps(dict(seen.missing))
    stand.fleet.model = MODEL
    assert healthy(stand).queue_waiting == 6


def test_a_selector_that_never_matched_names_the_values_that_exist(stand: Stand) -> None:
    """A labelSelector written wrong from the start: no_series, the Ready pods counted, the values listed."""
    healthy(stand)
    seen = eventually(
        lambda: stand.observe('model_name="llama-3.1-8b-instruct"'),
        lambda o: bool(o.inert),
        timeout=TIMEOUT_S,
    )
    (reason,) = seen.inert
    assert reason.reason is InertReason.NO_SERIES
    assert "while Deployment inference/llama has 2 Ready pods" in reason.text
    assert f'model_name has {MODEL} (did you mean model_name="{MODEL}"?)' in reason.text


def test_a_stopped_exporter_is_not_scraped_and_cleared_when_it_is_back(stand: Stand) -> None:
    """The servers' /metrics stops answering: up == 0, not_scraped, naming the target and its error;
    serving again on the same port, cleared."""
    healthy(stand)
    stand.fleet.stop()
    seen, reason = inert_for(stand, InertReason.NOT_SCRAPED)
    assert f"up == 0 for scrape/{stand.fleet_address}" in reason.text
    assert "connection refused" in reason.text
    assert "2 of 2 Ready pods not scraped" in reason.text
    assert seen.missing[Input.QUEUE_WAITING].startswith("not_scraped: ")
    host, port = stand.fleet_address.rsplit(":", 1)
    stand.fleet.start(host, int(port))
    healthy(stand)


def test_a_ready_pod_without_series_is_named(stand: Stand) -> None:
    """A third Ready pod whose series Prometheus does not have: not_scraped names it, the inputs of
    the two others are read; once it exports, cleared."""
    healthy(stand)
    stand.pod("llama-5d8f-c")
    seen = eventually(stand.observe, lambda o: bool(o.inert), timeout=TIMEOUT_S, every=0.5)
    (reason,) = seen.inert
    assert reason.reason is InertReason.NOT_SCRAPED
    assert (
        "1 of 3 Ready pods not scraped: no fresh series of engine vllm from Ready pods llama-5d8f-c"
        in reason.text
    )
    assert seen.queue_waiting == 6
    stand.fleet.set_pods([*PODS, "llama-5d8f-c"])
    healthy(stand)


def test_a_router_gauge_stranded_on_a_deleted_pod_is_named_never_counted_and_cleared(stand: Stand) -> None:
    """llm-d's in-flight gauges keep a series for a pod that is gone: stranded, naming the endpoint;
    the queue read is the servers' alone; the series deleted, cleared."""
    stand.router.tokens = {"llama-5d8f-a": 1200.0, "llama-5d8f-a-rank-1": 300.0, "llama-5d8f-gone": 90000.0}
    seen = eventually(
        stand.observe, lambda o: bool(o.inert) and o.queue_waiting is not None, timeout=TIMEOUT_S
    )
    (reason,) = seen.inert
    assert reason.reason is InertReason.STRANDED
    assert "1 endpoint that is no live pod of namespace inference (llama-5d8f-gone)" in reason.text
    assert "llm_d_epp_inflight_requests, llm_d_epp_inflight_tokens" in reason.text
    assert reason.inputs == ()
    assert seen.queue_waiting == 6  # the servers' queue: nothing of the stranded tokens
    del stand.router.tokens["llama-5d8f-gone"]
    healthy(stand)


# ---- a backfilled gap: issue 31, item 5 ----------------------------------------------------

END = datetime(2026, 11, 30, 12, tzinfo=UTC)
RESUMED = END + timedelta(minutes=10)  # the samples start again


@pytest.fixture(scope="module")
def gap() -> Iterator[LocalPrometheus]:
    """A Prometheus holding 90 minutes of a model up to END, nothing for ten minutes, then five
    minutes more: two blocks written by ``promtool tsdb create-blocks-from openmetrics``."""
    require_prometheus()
    prom = LocalPrometheus(retention="100y")
    try:
        prom.import_openmetrics(history(1, int(END.timestamp()), minutes=90))
        prom.import_openmetrics(history(1, int((RESUMED + timedelta(minutes=5)).timestamp()), minutes=5))
        prom.start()
        yield prom
    finally:
        prom.close()


SCALEDOBJECT = {
    "apiVersion": "keda.sh/v1alpha1",
    "kind": "ScaledObject",
    "metadata": {"name": "m0", "namespace": "team-0"},
    "spec": {
        "scaleTargetRef": {"name": "m0"},
        "minReplicaCount": 1,
        "maxReplicaCount": 10,
        "triggers": [
            {
                "type": "external",
                "metadata": {
                    "scalerAddress": "llm-gpu-scaler:9090",
                    "labelSelector": 'model_name="model-0"',
                    "minReplicas": "1",
                    "maxReplicas": "10",
                },
            }
        ],
    },
}


def dry_run(prometheus: LocalPrometheus, at: datetime) -> tuple[str, dict[str, Any]]:
    """``scaler dry-run --once`` at ``at`` as a restarted process runs it (the warm-up, then one
    decision): its text line and its JSON."""
    decisions: list[Decision] = []
    so = scaledobject_from_json(SCALEDOBJECT)
    source = live_source(prometheus.url, step_s=15)
    sink = lambda target, decision: decisions.append(decision)  # noqa: E731 - a one-line sink
    asyncio.run(dry_run_live(so, source, [sink], once=True, clock=lambda: at))
    (decision,) = decisions
    return CompactLines()(decision), json.loads(format_json(decision, "team-0/m0"))


def test_eight_minutes_after_the_last_sample_every_input_is_named_stale_and_last_known_binds(
    gap: LocalPrometheus,
) -> None:
    """The line names every missing input (as many as the JSON), with the cause "stale", and after the
    warm-up the last complete demand holds the target (last_known), not load from warmed history."""
    line, body = dry_run(gap, END + timedelta(minutes=8))
    missing = body["inputs"]["missing"]
    # Every input the vLLM preset reads from the stale series, the busiest pod's among them, and the
    # three Kubernetes gives (no Kubernetes here).
    stale = {
        "queue_waiting",
        "requests_running",
        "requests_running_max",
        "prompt_tokens_per_s",
        "generation_tokens_per_s",
        "kv_cache_usage",
        "kv_cache_usage_max",
        "ttft_p95_seconds",
        "ttft_p99_seconds",
        "ttft_over_objective",
        "requests_per_s",
        "ttft_mean_seconds",
    }
    # The waiting reasons and the KV cache's size this history's vLLM does not export (before PRs
    # #38435 and #42206): unknown, never 0.
    unexported = {"queue_waiting_capacity", "queue_waiting_deferred", "kv_cache_tokens"}
    assert set(missing) == stale | unexported | {
        "gpu_schedulable_replicas",
        "current_replicas",
        "ready_replicas",
    }
    for name in unexported:
        assert missing[name].startswith(
            "not exported: the vllm servers' series the labelSelector picks carry no"
        )
    assert f"missing {len(missing)} inputs: " in line
    for name in missing:
        assert name in line
    assert "(stale: the last sample is 8m old, over 2 scrape intervals (120s))" in line
    assert "no series match labelSelector" not in line + json.dumps(body)
    assert " last_known [" in line
    assert body["binding"] == "last_known"
    assert "load" not in body["proposals"]
    assert "inert=stale" in line
    assert [i["reason"] for i in body["inert"]] == ["stale"]


def test_three_minutes_after_the_last_sample_a_value_still_returned_is_stale(gap: LocalPrometheus) -> None:
    """Within Prometheus' 5-minute lookback the queue is still returned: read as stale, not as current."""
    _, body = dry_run(gap, END + timedelta(minutes=3))
    assert body["inputs"]["missing"]["queue_waiting"].startswith("stale: the last sample is 3m old")
    assert "queue_waiting" not in {k for k in body["inputs"] if k != "missing"}


def test_once_the_samples_come_back_the_target_is_not_inert(gap: LocalPrometheus) -> None:
    """Samples again from RESUMED: fresh, nothing inert, nothing stale."""
    _, body = dry_run(gap, RESUMED + timedelta(minutes=4))
    assert body["inert"] == []
    assert "stale" not in json.dumps(body["inputs"].get("missing", {}))
    assert body["inputs"]["queue_waiting"] is not None
