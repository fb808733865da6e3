"""Reading ScaledObjects for the replay: triggers, query mapping, behavior, the example files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scaler.inputs import Input
from scaler.inventory import ScaledObjectError
from scaler.replay.keda import (
    CronTrigger,
    ExternalTrigger,
    PodSeries,
    PrometheusTrigger,
    aggregate,
    load_scaledobject_model,
    map_query,
    scaledobject_model,
)
from tests.helpers import WEEKDAY_CRON

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("query", "series", "aggregation"),
    [
        ('sum(vllm:num_requests_waiting{model_name="m"})', "queue_waiting", "sum"),
        ("avg(vllm:num_requests_running)", "requests_running", "avg"),
        ('sum(DCGM_FI_DEV_GPU_UTIL{pod=~"vllm-.*"})', "gpu_utilization", "sum"),
        ("max by (pod) (vllm:gpu_cache_usage_perc)", "kv_cache_usage", "max"),
        ("sum(sglang:queue_size)", "queue_waiting", "sum"),
        ('sum(llm_d_epp_flow_control_queue_size{inference_pool="p"})', "router_queue", "sum"),
        ("sum(inference_extension_flow_control_queue_size)", "router_queue", "sum"),
    ],
)
def test_query_mapping(query: str, series: str, aggregation: str) -> None:
    """A trigger's PromQL query maps to the simulated series it reads and its aggregation."""
    assert map_query(query) == (series, aggregation)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("sum(http_requests_total)", "names no simulated series"),
        ("vllm:num_requests_waiting", "must aggregate"),
    ],
)
def test_query_mapping_errors(query: str, message: str) -> None:
    """A query naming no simulated series, or not aggregating, raises ScaledObjectError."""
    with pytest.raises(ScaledObjectError, match=message):
        map_query(query)


def so(triggers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    """A minimal ScaledObject manifest with the given triggers and spec fields."""
    return {"kind": "ScaledObject", "metadata": {"name": "x"}, "spec": {**spec, "triggers": triggers}}


def test_triggers_and_spec() -> None:
    """Prometheus, cron and external triggers, replica bounds, polling and behavior are all read."""
    model = scaledobject_model(
        so(
            [
                {
                    "type": "prometheus",
                    "metadata": {"query": "sum(vllm:num_requests_waiting)", "threshold": "50"},
                },
                WEEKDAY_CRON,
                {"type": "external", "metadata": {"scalerAddress": "x:9090", "minReplicas": "2"}},
            ],
            minReplicaCount=2,
            maxReplicaCount=16,
            pollingInterval=15,
            advanced={
                "horizontalPodAutoscalerConfig": {
                    "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}
                }
            },
        )
    )
    prom, cron, external = model.triggers
    assert isinstance(prom, PrometheusTrigger)
    assert prom.threshold == 50
    assert prom.series == Input.QUEUE_WAITING
    assert isinstance(cron, CronTrigger)
    assert cron.window.replicas == 8
    assert cron.window.timezone == "Asia/Shanghai"
    assert isinstance(external, ExternalTrigger)
    assert model.external is external
    assert (model.min_replicas, model.max_replicas, model.polling_interval_s) == (2, 16, 15)
    assert model.behavior.scale_down.stabilization_window_s == 60


def test_defaults_and_notes() -> None:
    """Missing spec fields take KEDA's defaults and the notes mention scaling to zero."""
    model = scaledobject_model(
        so([{"type": "prometheus", "metadata": {"query": "sum(x_waiting)", "threshold": "5"}}])
    )
    assert (model.min_replicas, model.max_replicas, model.polling_interval_s, model.cooldown_period_s) == (
        1,
        100,
        30,
        300,
    )
    assert any("scaling to zero" in n for n in model.notes)


@pytest.mark.parametrize(
    ("trigger", "message"),
    [
        ({"type": "prometheus", "metadata": {"query": "sum(x_waiting)"}}, "threshold is required"),
        ({"type": "prometheus", "metadata": {"query": "sum(x_waiting)", "threshold": "-1"}}, "must be > 0"),
        ({"type": "kafka", "metadata": {}}, "not modelled"),
        (
            {"type": "cron", "metadata": {"start": "0 9 * *", "end": "0 12 * * *", "desiredReplicas": "2"}},
            "cron",
        ),
    ],
    ids=["no-threshold", "negative-threshold", "unmodelled-type", "bad-cron"],
)
def test_trigger_errors(trigger: dict[str, Any], message: str) -> None:
    """An invalid or unmodelled trigger raises ScaledObjectError naming the problem."""
    with pytest.raises(ScaledObjectError, match=message):
        scaledobject_model(so([trigger]))


def test_series_values_and_aggregation() -> None:
    """Per-pod series derive from the pod state and aggregate by sum, max and avg."""
    pods = PodSeries(
        waiting=[3, 0, 6],
        running=[10, 20, 30],
        busy_replicas=1.5,
        ready=3,
        gpus_per_replica=2,
        decode_slots=20,
    )
    assert aggregate(pods.values(Input.QUEUE_WAITING), "sum") == 9
    assert aggregate(pods.values(Input.QUEUE_WAITING), "max") == 6
    assert aggregate(pods.values(Input.REQUESTS_RUNNING), "avg") == 20
    # 1.5 replicas busy over 3 Ready pods: 50% on each of their 6 GPUs.
    assert aggregate(pods.values("gpu_utilization"), "avg") == 50
    assert aggregate(pods.values("gpu_utilization"), "sum") == 300
    assert aggregate(pods.values("gpu_utilization", per_pod=True), "sum") == 150
    assert aggregate(pods.values(Input.KV_CACHE_USAGE), "max") == 1.0
    assert aggregate(pods.values("router_queue"), "sum") == 0  # no router replayed
    assert aggregate([], "avg") == 0.0
    # A fleet whose max_num_seqs binds first (KV half used at a full batch), behind a router holding 7.
    routed = PodSeries([0, 0], [10, 20], 1.0, 2, 1, 20, kv_cache_usage_full_batch=0.5, router_queue=7)
    assert aggregate(routed.values(Input.KV_CACHE_USAGE), "max") == 0.5
    assert aggregate(routed.values("router_queue"), "sum") == 7


@pytest.mark.parametrize(
    "path",
    [
        "scaler/examples/scaledobject.yaml",
        "scaler/examples/baseline.yaml",
        "benchmarks/baseline-published.yaml",
        "benchmarks/scaledobject-70b.yaml",
    ],
)
def test_example_files_parse(path: str) -> None:
    """Each shipped example ScaledObject parses, with triggers and replicas 2 to 16."""
    model = load_scaledobject_model(ROOT / path)
    assert model.triggers
    assert (model.min_replicas, model.max_replicas) == (2, 16)


def test_published_baseline_is_the_published_configuration() -> None:
    """The published baseline has its queue, per-pod GPU and cron triggers and a 300 s cooldown."""
    model = load_scaledobject_model(ROOT / "benchmarks/baseline-published.yaml")
    waiting, gpu, cron = model.triggers
    assert isinstance(waiting, PrometheusTrigger)
    assert (waiting.series, waiting.threshold) == ("queue_waiting", 50)
    assert isinstance(gpu, PrometheusTrigger)
    assert (gpu.series, gpu.threshold, gpu.per_pod) == ("gpu_utilization", 85, True)
    assert isinstance(cron, CronTrigger)
    assert (cron.window.start, cron.window.end, cron.window.replicas) == ("0 9 * * 1-5", "0 12 * * 1-5", 8)
    assert cron.window.timezone == "Asia/Shanghai"
    assert model.cooldown_period_s == 300


def test_the_replay_runs_the_one_scaledobject_model() -> None:
    """The replay's bounds, polling and behavior are the one model's, not a second parse."""
    from scaler.inventory import ScaledObject, scaledobject_from_json

    doc = so(
        [{"type": "prometheus", "metadata": {"query": "sum(x_waiting)", "threshold": "5"}}],
        minReplicaCount=3,
        maxReplicaCount=9,
        pollingInterval=10,
        advanced={"horizontalPodAutoscalerConfig": {"behavior": {"scaleUp": {"tolerance": "50m"}}}},
    )
    model = scaledobject_model(doc)
    assert type(model.scaledobject) is ScaledObject
    assert model.scaledobject == scaledobject_from_json(doc, name_default="scaledobject")
    assert (model.min_replicas, model.max_replicas, model.polling_interval_s) == (3, 9, 10)
    assert model.behavior is model.scaledobject.behavior
    assert model.behavior.scale_up.tolerance == 0.05


def test_a_bad_spec_field_names_the_file_the_field_and_the_rule(tmp_path: Path) -> None:
    """A count KEDA's CRD refuses stops the replay with the file, the field and the rule."""
    path = tmp_path / "so.yaml"
    text = (ROOT / "scaler/examples/baseline.yaml").read_text()
    assert "pollingInterval: 15" in text
    path.write_text(text.replace("pollingInterval: 15", 'pollingInterval: "15s"'))
    with pytest.raises(ScaledObjectError) as caught:
        load_scaledobject_model(path)
    assert str(caught.value) == f"{path}: spec.pollingInterval: '15s' is not an integer >= 1 (KEDA's CRD)"
