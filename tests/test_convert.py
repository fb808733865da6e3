"""scaler convert: plain KEDA triggers rewritten as this scaler's one external trigger."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from scaler.adoption.convert import ConvertError, convert_text
from scaler.adoption.convert.compare import retuned_queue_triggers
from scaler.adoption.convert.triggers import queue_conversion
from scaler.cli import main
from scaler.config import parse_metadata
from tests.crd import crd_errors, crd_validator

ROOT = Path(__file__).resolve().parent.parent
PUBLISHED = ROOT / "benchmarks" / "baseline-published.yaml"
AZURE = ROOT / "benchmarks" / "traces" / "azure2023_conv.csv"


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    """The ScaledObject CRD's schema validator, built once for the module."""
    return crd_validator()


def scaledobject(triggers: str, spec: str = "minReplicaCount: 2\nmaxReplicaCount: 12\n") -> str:
    """A ScaledObject with the given spec fields and trigger list (YAML at column 0)."""
    return (
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n  name: llm\n  namespace: inference\n"
        "spec:\n  scaleTargetRef:\n    name: vllm\n"
        + textwrap.indent(spec, "  ")
        + "  triggers:\n"
        + textwrap.indent(triggers, "    ")
    )


QUEUE = """\
- type: prometheus
  metadata:
    serverAddress: http://prometheus:9090
    query: sum(vllm:num_requests_waiting{model_name="llama"})
    threshold: "20"
"""


def converted(text: str) -> tuple[dict[str, Any], Any]:
    """The converted ScaledObject document and its conversion record, from ``text``."""
    out, conversions = convert_text(text)
    (doc,) = [d for d in yaml.safe_load_all(out) if d and d.get("kind") == "ScaledObject"]
    return doc, conversions[0]


def external(doc: dict[str, Any]) -> dict[str, str]:
    """The metadata of the one external trigger in a converted ScaledObject."""
    (trigger,) = [t for t in doc["spec"]["triggers"] if t["type"] == "external"]
    return dict(trigger["metadata"])


def test_the_published_configuration_becomes_one_external_trigger(
    validator: jsonschema.protocols.Validator,
) -> None:
    """The published KEDA config becomes one valid external trigger; the rest is kept as written."""
    out, (conversion,) = convert_text(PUBLISHED.read_text())
    doc = yaml.safe_load(out)
    assert [t["type"] for t in doc["spec"]["triggers"]] == ["external"]
    assert external(doc) == {
        "scalerAddress": "llm-gpu-scaler.llm-gpu-scaler.svc.cluster.local:9090",
        "engine": "vllm",
        "labelSelector": 'model_name="llama-70b"',
        "targetQueuePerReplica": "50",
        "prometheusAddress": "http://prometheus-operated.monitoring:9090",
        "prewarmStart": "0 9 * * 1-5",
        "prewarmEnd": "0 12 * * 1-5",
        "prewarmReplicas": "8",
        "timezone": "Asia/Shanghai",
        "minReplicas": "2",
        "maxReplicas": "16",
    }
    policy = parse_metadata(external(doc))
    assert (policy.min_replicas, policy.max_replicas) == (
        doc["spec"]["minReplicaCount"],
        doc["spec"]["maxReplicaCount"],
    )
    assert crd_errors(validator, doc) == []
    # Everything else is kept as written, the user's comments included; ours say what went.
    assert doc["spec"]["scaleTargetRef"] == {"name": "vllm-llama-70b"}
    assert (doc["spec"]["pollingInterval"], doc["spec"]["cooldownPeriod"]) == (15, 300)
    assert out.startswith("# The KEDA configuration published for this problem")
    assert "# Converted by `scaler convert`. Dropped: triggers[1] (prometheus) on GPU utilisation" in out
    assert any(
        "triggers[1] (prometheus): dropped, with its serverAddress and query: GPU utilisation lags" in c
        for c in conversion.changes
    )
    assert "triggers[1] (prometheus): threshold 85 not carried: the load signal's headroom" in " ".join(
        conversion.changes
    )
    # The example's safety nets, sized to this object.
    assert doc["spec"]["fallback"] == {
        "failureThreshold": 4,
        "replicas": 2,
        "behavior": "currentReplicasIfHigher",
    }
    behavior = doc["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] == 0
    assert behavior["scaleUp"]["policies"] == [{"type": "Pods", "value": 16, "periodSeconds": 15}]
    assert conversion.warnings == []


def test_several_cron_triggers_become_prewarm_windows(validator: jsonschema.protocols.Validator) -> None:
    """Several cron triggers become a prewarmWindows list, each with its own timezone."""
    crons = """\
- type: cron
  metadata: {timezone: Europe/Paris, start: 0 8 * * 1-5, end: 0 18 * * 1-5, desiredReplicas: "6"}
- type: cron
  metadata: {timezone: UTC, start: 0 18 * * 5, end: 0 20 * * 5, desiredReplicas: "10"}
"""
    doc, conversion = converted(scaledobject(QUEUE + crons))
    meta = external(doc)
    assert "prewarmStart" not in meta
    assert json.loads(meta["prewarmWindows"]) == [
        {"start": "0 8 * * 1-5", "end": "0 18 * * 1-5", "replicas": 6, "timezone": "Europe/Paris"},
        {"start": "0 18 * * 5", "end": "0 20 * * 5", "replicas": 10, "timezone": "UTC"},
    ]
    windows = parse_metadata(meta).windows
    assert [(w.replicas, w.timezone) for w in windows] == [(6, "Europe/Paris"), (10, "UTC")]
    assert sum("became a pre-warm window" in c for c in conversion.changes) == 2
    assert crd_errors(validator, doc) == []


def test_authentication_refs_and_unknown_triggers(validator: jsonschema.protocols.Validator) -> None:
    """Unknown triggers are kept with a warning; the Prometheus authenticationRef is dropped."""
    triggers = """\
- type: prometheus
  authenticationRef: {name: prometheus-bearer}
  metadata:
    serverAddress: https://thanos:9090
    query: sum(vllm:num_requests_waiting)
    threshold: "10"
    activationThreshold: "1"
- type: kafka
  name: requests-topic
  authenticationRef: {name: kafka-sasl}
  metadata: {bootstrapServers: "kafka:9092", consumerGroup: llm, topic: prompts, lagThreshold: "100"}
"""
    doc, conversion = converted(scaledobject(triggers))
    kafka = doc["spec"]["triggers"][1]
    assert kafka == {
        "type": "kafka",
        "name": "requests-topic",
        "authenticationRef": {"name": "kafka-sasl"},
        "metadata": {
            "bootstrapServers": "kafka:9092",
            "consumerGroup": "llm",
            "topic": "prompts",
            "lagThreshold": "100",
        },
    }
    assert "authenticationRef" not in doc["spec"]["triggers"][0]
    assert external(doc)["engine"] == "vllm"
    assert "labelSelector" not in external(doc)
    assert any("authenticationRef dropped" in c for c in conversion.changes)
    assert any("activationThreshold dropped" in c for c in conversion.changes)
    (warning,) = [w for w in conversion.warnings if w.startswith("triggers[1] ")]
    assert warning.startswith("triggers[1] (kafka, requests-topic): kept as it is")
    assert "the GPU check cannot hold a scale-up" in warning
    assert crd_errors(validator, doc) == []


def test_scale_to_zero_becomes_a_floor_of_one_and_the_bounds_agree(
    validator: jsonschema.protocols.Validator,
) -> None:
    """minReplicaCount 0 becomes 1, idleReplicaCount goes, and both trigger bounds agree."""
    out, (conversion,) = convert_text(scaledobject(QUEUE, spec="minReplicaCount: 0\nidleReplicaCount: 0\n"))
    doc = yaml.safe_load(out)
    spec = doc["spec"]
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (
        1,
        100,
    )  # KEDA's default maximum, written out
    assert "idleReplicaCount" not in spec
    assert (external(doc)["minReplicas"], external(doc)["maxReplicas"]) == ("1", "100")
    assert "# Was 0: scaling an inference workload to zero means a cold start" in out
    assert any(c.startswith("spec.minReplicaCount: was 0, became 1") for c in conversion.changes)
    assert (
        spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleUp"]["policies"][0]["value"]
        == 100
    )
    assert crd_errors(validator, doc) == []


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (
            'sum(vllm:num_requests_waiting{model_name="llama"})',
            {"engine": "vllm", "labelSelector": 'model_name="llama"'},
        ),
        (
            ' sum ( vllm:num_requests_waiting { model_name = "a", namespace=~"prod-.*" } ) ',
            {"engine": "vllm", "labelSelector": 'model_name="a", namespace=~"prod-.*"'},
        ),
        ("sum(sglang:num_queue_reqs)", {"engine": "sglang"}),
        ('sum(tgi_queue_size{namespace="llm"})', {"engine": "tgi", "labelSelector": 'namespace="llm"'}),
        (
            'sum(nv_trt_llm_request_metrics{request_type="waiting", model="ensemble"})',
            {"engine": "triton", "labelSelector": 'model="ensemble"'},
        ),
        (
            'sum(dynamo_frontend_queued_requests{model="llama"})',
            {"engine": "dynamo", "labelSelector": 'model="llama"'},
        ),
        ('sum(nv_trt_llm_request_metrics{request_type="active"})', None),  # running, not waiting
        ("sum(rate(vllm:num_requests_waiting[1m]))", None),
        (
            'max(vllm:num_requests_waiting{model_name="llama"})',
            {"engine": "vllm", "labelSelector": 'model_name="llama"'},
        ),
        (
            'sum(vllm:num_requests_waiting{model_name="qwen"}) by (model_name)',
            {"engine": "vllm", "labelSelector": 'model_name="qwen"'},
        ),
        (
            'sum by (model_name) (vllm:num_requests_waiting{model_name="qwen"})',
            {"engine": "vllm", "labelSelector": 'model_name="qwen"'},
        ),
        (
            'vllm:num_requests_waiting{model_name="qwen"}',
            {"engine": "vllm", "labelSelector": 'model_name="qwen"'},
        ),
        ("(sum((sglang:num_queue_reqs)))", {"engine": "sglang"}),
        (
            '{__name__="tgi_queue_size", namespace="llm"}',
            {"engine": "tgi", "labelSelector": 'namespace="llm"'},
        ),
        ("sum(vllm:num_requests_waiting) by (pod)", None),  # one series per pod: not one model
        ('sum by (model_name) (vllm:num_requests_waiting{model_name=~"q.*"})', None),  # several models
        ('sum without (pod) (vllm:num_requests_waiting{model_name="qwen"})', None),
        ("sum(vllm:num_requests_waiting offset 5m)", None),
        ('topk(1, vllm:num_requests_waiting{model_name="qwen"})', None),
        ("sum(vllm:num_requests_waiting) / 2", None),
        ("sum(my_queue_depth)", None),
        ('sum(llm_d_epp_flow_control_queue_size{inference_pool=~"a|b"})', None),  # which pool is not said
    ],
    ids=[
        "vllm",
        "vllm-spaced-two-labels",
        "sglang",
        "tgi",
        "triton-waiting",
        "dynamo-frontend",
        "triton-active",
        "rate-of-queue",
        "max-kept-with-a-warning",
        "sum-by-model-after",
        "sum-by-model-before",
        "bare-gauge",
        "parenthesised",
        "name-as-matcher",
        "by-pod-many-series",
        "by-model-several-models",
        "without",
        "offset",
        "topk",
        "arithmetic",
        "unknown-metric",
        "epp-no-one-pool",
    ],
)
def test_which_queries_are_an_engine_s_queue(query: str, expected: dict[str, str] | None) -> None:
    """Only a plain sum of a preset's waiting-queue metric is recognised as its queue preset."""
    found = queue_conversion(query)
    assert (found and found.metadata) == expected


def test_a_max_of_the_queue_is_the_preset_with_a_warning_that_it_sums() -> None:
    """max(QUEUE) becomes the preset, which reads the sum: the report says so."""
    triggers = QUEUE.replace("sum(vllm", "max(vllm")
    doc, conversion = converted(scaledobject(triggers))
    assert external(doc)["engine"] == "vllm"
    assert conversion.warnings == [
        "triggers[0] (prometheus): the query takes the max over the series; the vllm preset reads their"
        " sum, the queue of every replica together: check targetQueuePerReplica"
    ]


@pytest.mark.parametrize(
    ("query", "where"),
    [
        (
            "sum(rate(my_queue[1m])",
            "does not parse at character 4 ('(rate(my_queue[1m])'): unclosed left parenthesis",
        ),
        ("sum(my_queue))", "does not parse at character 14 (')'): unexpected right parenthesis ')'"),
        ('sum(my_queue{a="b})', "does not parse at character 16 ('\"b})'): unterminated quoted string \""),
        ("sum(my_queue) bye (a)", "does not parse at character 15 ('bye (a)'): invalid promql query"),
    ],
    ids=["unclosed", "unopened", "unterminated-string", "stray-word"],
)
def test_a_query_that_does_not_parse_is_refused_naming_where(query: str, where: str) -> None:
    """A query Prometheus would refuse at every poll is refused by convert, with its position,
    rather than carried as a custom queueQuery."""
    triggers = f'- type: prometheus\n  metadata: {{query: {json.dumps(query)}, threshold: "5"}}\n'
    with pytest.raises(ConvertError) as caught:
        convert_text(scaledobject(triggers))
    assert str(caught.value) == f"llm: triggers[0] (prometheus): query {query!r} {where}"


def test_another_query_becomes_a_custom_queue_query() -> None:
    """A query no preset matches becomes engine custom, with the query as queueQuery."""
    query = 'sum(max_over_time(router_pending_requests{service="llm"}[30s]))'
    triggers = f'- type: prometheus\n  metadata: {{query: {json.dumps(query)}, threshold: "5"}}\n'
    doc, conversion = converted(scaledobject(triggers))
    meta = external(doc)
    assert (meta["engine"], meta["queueQuery"], meta["targetQueuePerReplica"]) == ("custom", query, "5")
    assert parse_metadata(meta).queue_query == query
    assert any("became engine: custom with queueQuery" in c for c in conversion.changes)


def test_an_object_s_own_fallback_and_behavior_are_kept() -> None:
    """An object's own fallback and HPA behavior are kept, each with a warning."""
    spec = textwrap.dedent("""\
        minReplicaCount: 2
        maxReplicaCount: 8
        fallback: {failureThreshold: 3, replicas: 6}
        advanced:
          horizontalPodAutoscalerConfig:
            behavior:
              scaleDown: {stabilizationWindowSeconds: 600}
        """)
    doc, conversion = converted(scaledobject(QUEUE, spec=spec))
    assert doc["spec"]["fallback"] == {"failureThreshold": 3, "replicas": 6}
    assert doc["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"] == {
        "scaleDown": {"stabilizationWindowSeconds": 600}
    }
    assert [w.split(" ")[0] for w in conversion.warnings] == [
        "spec.fallback",
        "advanced.horizontalPodAutoscalerConfig.behavior",
    ]


@pytest.mark.parametrize(
    ("triggers", "spec", "message"),
    [
        (
            "- type: cron\n"
            '  metadata: {timezone: UTC, start: 0 8 * * *, end: 0 9 * * *, desiredReplicas: "4"}\n',
            None,
            "no prometheus trigger",
        ),
        (
            '- type: external\n  metadata: {scalerAddress: "s:9090", engine: vllm}\n',
            None,
            "already this scaler's trigger",
        ),
        (
            QUEUE
            + "- type: cron\n"
            + '  metadata: {timezone: UTC, start: 0 8 * * *, end: 0 9 * * *, desiredReplicas: "40"}\n',
            None,
            r"triggers\[1\] \(cron\): desiredReplicas='40' is above maxReplicaCount \(12\)",
        ),
        (
            QUEUE,
            "minReplicaCount: two\n",
            r"spec.minReplicaCount: 'two' is not an integer >= 0 \(KEDA's CRD\)",
        ),
    ],
    ids=["no-prometheus-trigger", "already-converted", "cron-above-max", "bad-min-replicas"],
)
def test_what_cannot_be_converted_says_why(triggers: str, spec: str | None, message: str) -> None:
    """Objects that cannot be converted raise ConvertError naming the problem."""
    text = scaledobject(triggers) if spec is None else scaledobject(triggers, spec=spec)
    with pytest.raises(ConvertError, match=message):
        convert_text(text)


def test_other_documents_are_kept_and_a_file_without_a_scaledobject_is_an_error() -> None:
    """Other documents pass through unchanged; a file without a ScaledObject is an error."""
    deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: vllm}\n"
    out, _ = convert_text(deployment + "---\n" + scaledobject(QUEUE))
    kinds = [d["kind"] for d in yaml.safe_load_all(out)]
    assert kinds == ["Deployment", "ScaledObject"]
    with pytest.raises(ConvertError, match="no object of kind ScaledObject"):
        convert_text(deployment)


def hpa_document(
    name: str, target: str = "vllm", namespace: str = "inference", kind: str = "Deployment"
) -> str:
    """An HPA on the CPU of ``kind`` ``target``, as a workload was scaled before KEDA (YAML, one document)."""
    return textwrap.dedent(f"""\
        apiVersion: autoscaling/v2
        kind: HorizontalPodAutoscaler
        metadata: {{name: {name}, namespace: {namespace}}}
        spec:
          scaleTargetRef: {{apiVersion: apps/v1, kind: {kind}, name: {target}}}
          minReplicas: 2
          maxReplicas: 12
          metrics:
            - type: Resource
              resource: {{name: cpu, target: {{type: Utilization, averageUtilization: 80}}}}
        """)


def test_an_hpa_on_the_target_is_taken_over_by_name_and_annotation(
    validator: jsonschema.protocols.Validator,
) -> None:
    """An HPA in the input on the ScaledObject's target: the ScaledObject names it as its HPA and
    carries KEDA's transfer annotation (KEDA 2.21.1 manages only the HPAs it owns), the HPA leaves the
    output (KEDA owns it), and the result is a ScaledObject KEDA's CRD accepts. An HPA on another
    Deployment (or a StatefulSet of its name), or in another namespace, is kept and not named."""
    text = "---\n".join(
        [
            hpa_document("elsewhere-cpu", namespace="research"),
            hpa_document("other-cpu", target="other"),
            hpa_document("statefulset-cpu", kind="StatefulSet"),
            hpa_document("vllm-cpu"),
            scaledobject(QUEUE),
        ]
    )
    out, (conversion,) = convert_text(text)
    docs = list(yaml.safe_load_all(out))
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("HorizontalPodAutoscaler", "elsewhere-cpu"),
        ("HorizontalPodAutoscaler", "other-cpu"),
        ("HorizontalPodAutoscaler", "statefulset-cpu"),
        ("ScaledObject", "llm"),
    ]
    so = docs[-1]
    assert so["metadata"]["annotations"] == {"scaledobject.keda.sh/transfer-hpa-ownership": "true"}
    assert so["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["name"] == "vllm-cpu"
    assert crd_errors(validator, so) == []
    said = "\n".join(conversion.changes)
    assert "kedacore/keda#8374" in said
    assert "HorizontalPodAutoscaler vllm-cpu left out of the output" in said
    assert conversion.warnings == []  # the others are not on its target
    alone, _ = converted(scaledobject(QUEUE))  # no HPA beside it: nothing of this written
    assert "annotations" not in alone["metadata"]
    assert "name" not in alone["spec"]["advanced"]["horizontalPodAutoscalerConfig"]


def test_the_command_prints_the_yaml_alone_on_stdout_and_the_changes_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """scaler convert prints only YAML on stdout and the changes on stderr; a missing file exits 2."""
    old = tmp_path / "old.yaml"
    old.write_text(PUBLISHED.read_text())
    assert main(["convert", str(old), "--scaler-address", "scaler.example:9090"]) == 0
    captured = capsys.readouterr()
    assert external(yaml.safe_load(captured.out))["scalerAddress"] == "scaler.example:9090"
    lines = captured.err.splitlines()
    assert lines[0].startswith("llama-70b-published: changed triggers[0] (prometheus): became engine: vllm")
    assert len(lines) == 11  # one per change and per field kept, as docs/convert.md shows
    assert main(["convert", str(tmp_path / "missing.yaml")]) == 2
    assert "scaler convert: error:" in capsys.readouterr().err


def test_the_command_replays_old_and_new_side_by_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """scaler convert --replay reports the old, new and clairvoyant scalers on the same trace."""
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text((ROOT / "scaler" / "examples" / "baseline.yaml").read_text())
    assert main(["convert", str(old), "--out", str(new), "--replay", str(AZURE)]) == 0
    report = capsys.readouterr().out
    rows = {
        line.split("  ")[0]: line
        for line in report.splitlines()
        if line.startswith(("new ", "old ", "old, ", "clairvoyant"))
    }
    retuned = [name for name in rows if name.startswith("old, threshold ")]
    assert set(rows) - set(retuned) == {"new (this scaler)", "old (as written)", "clairvoyant"}
    assert all(" 19,366 " in row for row in rows.values())  # every request of the trace, in each

    def attainment(row: str) -> float:
        return float(next(cell for cell in row.split() if cell.endswith("%"))[:-1])

    if attainment(rows["old (as written)"]) < attainment(rows["new (this scaler)"]):
        # the old object again, its queue threshold lowered until it attains as much, or why not
        if retuned:
            assert len(retuned) == 1
            assert attainment(rows[retuned[0]]) >= attainment(rows["new (this scaler)"])
            assert "the third row is the old object at equal attainment" in report
        else:
            assert "no lower queue threshold lets the old object attain what the new one does" in report
    else:
        assert retuned == []
    assert f"wrote {new}" in report
    assert external(yaml.safe_load(new.read_text()))["engine"] == "vllm"


def test_retuning_lowers_only_the_queue_threshold_and_leaves_the_original() -> None:
    """The equal-attainment run halves the queue trigger's threshold, not the GPU one's."""
    doc = yaml.safe_load(PUBLISHED.read_text())
    retuned, thresholds = retuned_queue_triggers(doc, 0.5)
    assert thresholds == [25.0]
    assert [t["metadata"]["threshold"] for t in retuned["spec"]["triggers"][:2]] == ["25", "85"]
    assert doc["spec"]["triggers"][0]["metadata"]["threshold"] == "50"
    assert retuned_queue_triggers(doc, 0.001)[1] == [1.0]  # never below one waiting request
    no_queue = yaml.safe_load(PUBLISHED.read_text())
    del no_queue["spec"]["triggers"][0]
    assert retuned_queue_triggers(no_queue, 0.5)[1] == []


def test_equal_attainment_takes_the_cheapest_threshold_that_attains() -> None:
    """The search halves until a run attains, tries three factors above it, keeps the cheapest."""
    from types import SimpleNamespace

    from scaler.adoption.convert.compare import cheapest_attaining

    tried: list[float] = []

    def attempt(factor: float) -> tuple[Any, bool, float]:
        tried.append(factor)
        between = 0.17 < factor < 0.19  # 0.125 * 2 ** 0.5: attains, and cheaper than 0.125
        run = SimpleNamespace(name=f"x{factor:g}", gpu_seconds=6.0 if between else 10 - 10 * factor)
        return run, factor <= 0.125 or between, 50 * factor

    found = cheapest_attaining(attempt)
    assert tried[:3] == [0.5, 0.25, 0.125]
    assert tried[3:] == pytest.approx([0.125 * 2**0.75, 0.125 * 2**0.5, 0.125 * 2**0.25])
    assert found is not None
    assert found.name == "x0.176777"  # 0.125 * 2 ** 0.5 attains and costs less than 0.125


def test_equal_attainment_gives_up_at_a_threshold_of_one() -> None:
    """When no threshold down to one waiting request attains, there is no equal-attainment run."""
    from types import SimpleNamespace

    from scaler.adoption.convert.compare import cheapest_attaining

    def attempt(factor: float) -> tuple[Any, bool, float]:
        return SimpleNamespace(name="x", gpu_seconds=1.0), False, max(1.0, 8 * factor)

    assert cheapest_attaining(attempt) is None
    assert cheapest_attaining(lambda factor: None) is None


def _with_utilisation_threshold(*thresholds: str) -> str:
    triggers = "".join(
        f"""
    - type: prometheus
      metadata:
        serverAddress: http://prometheus:9090
        query: avg(DCGM_FI_DEV_GPU_UTIL{{pod=~"vllm-.*"}})
        threshold: "{threshold}"
"""
        for threshold in thresholds
    )
    return f"""
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {{name: llm, namespace: inference}}
spec:
  scaleTargetRef: {{name: vllm}}
  minReplicaCount: 1
  maxReplicaCount: 8
  triggers:
    - type: prometheus
      metadata:
        serverAddress: http://prometheus:9090
        query: sum(vllm:num_requests_waiting)
        threshold: "10"{triggers}"""


@pytest.mark.parametrize("thresholds", [("85",), ("0.9",), ("70", "90"), ("high",)])
def test_a_utilisation_threshold_is_reported_not_carried(thresholds: tuple[str, ...]) -> None:
    """A utilisation trigger's threshold does not become a key: the report says so, once per trigger."""
    out, (conversion,) = convert_text(_with_utilisation_threshold(*thresholds))
    metadata = external(yaml.safe_load(out))
    assert "targetUtilization" not in metadata
    reported = [c for c in conversion.changes if "not carried" in c]
    assert [c.split("threshold ")[1].split(" ")[0] for c in reported] == list(thresholds)


# ---- every key carried, dropped with its reason, or refused ------------------------------

CRON = (
    "- type: cron\n"
    '  metadata: {timezone: Asia/Shanghai, start: 0 9 * * 1-5, end: 0 12 * * 1-5, desiredReplicas: "8"}\n'
)
GPU = (
    "- type: prometheus\n  metadata:\n    serverAddress: http://prometheus:9090\n"
    '    query: avg(DCGM_FI_DEV_GPU_UTIL{pod=~"vllm-.*"})\n    threshold: "85"\n'
)
# Keys only the conversion writes: an error about what the user wrote never names them.
WRITTEN_BY_CONVERT = (
    "targetQueuePerReplica",
    "prewarmStart",
    "prewarmEnd",
    "prewarmReplicas",
    "prewarmWindows",
)


def convert_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, *flags: str
) -> tuple[int, str, str]:
    """``scaler convert`` on ``text`` written to a file: exit status, stdout and stderr."""
    old = tmp_path / "old.yaml"
    old.write_text(text)
    code = main(["convert", str(old), *flags])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("triggers", "line"),
    [
        (
            QUEUE.replace("threshold:", "treshold:") + CRON,
            "triggers[0] (prometheus): treshold is not a key of KEDA's prometheus scaler;"
            " did you mean threshold?",
        ),
        (
            QUEUE + CRON.replace("timezone:", "timeZone:"),
            "triggers[1] (cron): timeZone is not a key of KEDA's cron scaler; did you mean timezone?",
        ),
        (
            QUEUE + CRON.replace("desiredReplicas:", "desiredReplica:"),
            "triggers[1] (cron): desiredReplica is not a key of KEDA's cron scaler;"
            " did you mean desiredReplicas?",
        ),
        (
            QUEUE + GPU.replace("threshold:", "thresold:"),
            "triggers[1] (prometheus): thresold is not a key of KEDA's prometheus scaler;"
            " did you mean threshold?",
        ),
    ],
    ids=["prometheus-treshold", "cron-timeZone", "cron-desiredReplica", "gpu-utilisation-thresold"],
)
def test_a_misspelled_trigger_key_is_refused_with_the_key_meant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], triggers: str, line: str
) -> None:
    """A key KEDA's scaler of that type does not accept exits 2, one line naming it and the key meant."""
    code, out, err = convert_cli(tmp_path, capsys, scaledobject(triggers))
    assert code == 2
    assert out == ""  # no half-converted object
    assert err.splitlines() == [f"scaler convert: error: llm: {line} (--force drops it)"]
    assert not any(key in err for key in WRITTEN_BY_CONVERT)


def test_force_drops_a_refused_key_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With --force a refused key is dropped from the output and reported as dropped, with the key meant."""
    queue = QUEUE + '    activationTreshold: "5"\n'
    text = scaledobject(queue + CRON, spec="minReplicaCount: 2\nmaxReplicaCount: 12\nmaxReplicaCont: 20\n")
    code, out, _ = convert_cli(tmp_path, capsys, text)
    assert code == 2
    code, out, err = convert_cli(tmp_path, capsys, text, "--force")
    assert code == 0
    assert "activationTreshold" not in out
    assert "maxReplicaCont" not in out
    doc = yaml.safe_load(out)
    assert doc["spec"]["maxReplicaCount"] == 12
    assert external(doc)["targetQueuePerReplica"] == "20"
    assert (
        "llm: changed spec.maxReplicaCont dropped (--force): not a field of KEDA's ScaledObject;"
        " did you mean spec.maxReplicaCount?"
    ) in err.splitlines()
    assert (
        "llm: changed triggers[0] (prometheus): activationTreshold dropped (--force): not a key of KEDA's"
        " prometheus scaler; did you mean activationThreshold?"
    ) in err.splitlines()


def test_force_never_fills_a_dropped_required_key_with_a_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A misspelled threshold dropped by --force leaves none: an error, not the default queue target."""
    code, out, err = convert_cli(
        tmp_path, capsys, scaledobject(QUEUE.replace("threshold:", "treshold:")), "--force"
    )
    assert code == 2
    assert out == ""
    assert err.splitlines() == [
        "scaler convert: error: llm: triggers[0] (prometheus): threshold is missing: KEDA's prometheus"
        " scaler requires serverAddress, query and threshold"
        " (--force dropped triggers[0] (prometheus): treshold)"
    ]


def test_unknown_scaledobject_fields_are_refused_at_every_level(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fields the ScaledObject CRD lacks (spec, a trigger, advanced) are refused, one line each."""
    spec = textwrap.dedent("""\
        minReplicaCont: 2
        maxReplicaCount: 12
        advanced:
          horizontalPodAutoscalerConfig:
            behaviour: {scaleDown: {stabilizationWindowSeconds: 60}}
        """)
    triggers = QUEUE.replace("  metadata:", "  authentificationRef: {name: prom}\n  metadata:")
    code, out, err = convert_cli(tmp_path, capsys, scaledobject(triggers, spec=spec))
    assert code == 2
    assert out == ""
    assert err.splitlines() == [
        f"scaler convert: error: llm: {field} is not a field of KEDA's ScaledObject; did you mean {meant}?"
        " (--force drops it)"
        for field, meant in [
            ("spec.minReplicaCont", "spec.minReplicaCount"),
            (
                "spec.advanced.horizontalPodAutoscalerConfig.behaviour",
                "spec.advanced.horizontalPodAutoscalerConfig.behavior",
            ),
            ("spec.triggers[0].authentificationRef", "spec.triggers[0].authenticationRef"),
        ]
    ]


def test_every_key_of_the_queue_trigger_is_carried_or_dropped_with_a_reason() -> None:
    """Each prometheus key KEDA documents gets a report line for its trigger: where it went, or why not."""
    from scaler.adoption.convert import PROMETHEUS_KEYS

    values = {
        "serverAddress": "http://prometheus:9090",
        "query": "sum(vllm:num_requests_waiting)",
        "threshold": "20",
    }
    meta = "".join(f"    {key}: {json.dumps(values.get(key, 'x'))}\n" for key in PROMETHEUS_KEYS)
    triggers = f"- type: prometheus\n  name: queue\n  useCachedMetrics: true\n  metadata:\n{meta}"
    doc, conversion = converted(scaledobject(triggers))
    where = "triggers[0] (prometheus, queue): "
    lines = [c for c in conversion.changes + conversion.warnings if c.startswith(where)]
    for key in [*PROMETHEUS_KEYS, "name", "useCachedMetrics"]:
        assert any(key in line for line in lines), f"{key} is not reported"
    dropped = {line[len(where) :].split(" dropped: ")[0] for line in lines if " dropped: " in line}
    assert dropped == {k for k, why in PROMETHEUS_KEYS.items() if why is not None} | {"name"}
    (trigger,) = doc["spec"]["triggers"]
    assert trigger["useCachedMetrics"] is True  # carried to the external trigger


def test_a_cron_trigger_without_a_key_kedas_cron_scaler_requires_is_an_error() -> None:
    """A cron trigger missing timezone is refused (KEDA requires it), not read as UTC."""
    cron = CRON.replace("timezone: Asia/Shanghai, ", "")
    with pytest.raises(ConvertError, match=r"triggers\[1\] \(cron\): timezone is missing") as info:
        convert_text(scaledobject(QUEUE + cron))
    assert not any(key in str(info.value) for key in WRITTEN_BY_CONVERT)


@pytest.mark.parametrize(
    ("cron_metadata", "message"),
    [
        ('{timezone: UTC, start: 0 9 * * *, end: 0 12 * * *, desiredReplicas: "0"}', "desiredReplicas='0': "),
        (
            '{timezone: Mars/Olympus, start: 0 9 * * *, end: 0 12 * * *, desiredReplicas: "2"}',
            "timezone='Mars/Olympus': ",
        ),
        (
            '{timezone: UTC, start: 0 25 * * *, end: 0 12 * * *, desiredReplicas: "2"}',
            "start='0 25 \\* \\* \\*': .*hour \"25\"",
        ),
    ],
    ids=["zero-replicas", "unknown-timezone", "bad-cron"],
)
def test_a_bad_cron_value_is_named_by_the_key_the_user_wrote(cron_metadata: str, message: str) -> None:
    """A cron value the window cannot take is reported under its cron key, never a prewarm key."""
    with pytest.raises(ConvertError, match=r"triggers\[1\] \(cron\): " + message) as info:
        convert_text(scaledobject(QUEUE + f"- type: cron\n  metadata: {cron_metadata}\n"))
    assert not any(key in str(info.value) for key in WRITTEN_BY_CONVERT)


@pytest.mark.e2e  # runs the command in a subprocess
def test_the_issue_s_three_keys_through_the_installed_command(tmp_path: Path) -> None:
    """python -m scaler convert refuses treshold, timeZone and desiredReplica: one line each, no traceback."""
    import subprocess
    import sys

    old = tmp_path / "old.yaml"
    old.write_text(
        scaledobject(
            QUEUE.replace("threshold:", "treshold:")
            + CRON.replace("timezone:", "timeZone:").replace("desiredReplicas:", "desiredReplica:")
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "scaler", "convert", str(old)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"scaler convert: error: llm: {where}: {key} is not a key of KEDA's {kind} scaler;"
        f" did you mean {meant}? (--force drops it)"
        for where, key, kind, meant in [
            ("triggers[0] (prometheus)", "treshold", "prometheus", "threshold"),
            ("triggers[1] (cron)", "timeZone", "cron", "timezone"),
            ("triggers[1] (cron)", "desiredReplica", "cron", "desiredReplicas"),
        ]
    ]
    assert "Traceback" not in done.stderr


def queue_trigger(query: str) -> str:
    """A prometheus trigger (YAML list item) on ``query`` over 10."""
    return f'- type: prometheus\n  metadata:\n    query: {json.dumps(query)}\n    threshold: "10"\n'


@pytest.mark.parametrize(
    ("query", "metadata", "said"),
    [
        (
            'sum(llm_d_epp_flow_control_queue_size{inference_pool="llama-pool", model_name="llama"})',
            {
                "engine": "vllm",
                "router": "llm-d",
                "inferencePool": "llama-pool",
                "labelSelector": 'model_name="llama"',
            },
            "became engine: vllm, router: llm-d, inferencePool: llama-pool,"
            ' labelSelector: model_name="llama": the query is the llm-d router\'s queue, which router: llm-d'
            " reads beside the servers' own queue; engine: vllm (the default: set the engine the servers"
            " behind it run)",
        ),
        (
            'sum(inference_extension_flow_control_queue_size{inference_pool="llama-pool", priority="0"})',
            {"engine": "vllm", "router": "llm-d", "inferencePool": "llama-pool"},
            "the query is the llm-d router's queue under an older name"
            " (llm_d_epp_flow_control_queue_size is read first)",
        ),
        (
            'sum(dynamo_frontend_router_queue_pending_requests{model="llama"})',
            {"engine": "dynamo", "router": "dynamo", "labelSelector": 'model="llama"'},
            "the query is the dynamo router's queue, which router: dynamo reads beside the servers' own"
            " queue; engine: dynamo",
        ),
    ],
    ids=["epp", "epp-older-name", "dynamo-kv-router"],
)
def test_a_trigger_on_a_routers_queue_becomes_the_router_preset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], query: str, metadata: dict[str, str], said: str
) -> None:
    """scaler convert turns a KEDA trigger on the EPP's queue (either name) or Dynamo's KV router
    queue into router (and inferencePool from the query's pool) and says so; the result parses."""
    code, out, err = convert_cli(tmp_path, capsys, scaledobject(queue_trigger(query)))
    assert code == 0
    meta = external(yaml.safe_load(out))
    assert {
        k: meta[k] for k in ("engine", "router", "inferencePool", "labelSelector") if k in meta
    } == metadata
    assert said in err
    policy = parse_metadata(meta)
    assert policy.router == metadata["router"]


def test_a_router_matcher_no_server_series_has_is_dropped_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A matcher on the router's own labels (priority) is not carried to labelSelector: reported dropped."""
    query = 'sum(llm_d_epp_flow_control_queue_size{inference_pool="p", priority="0"})'
    _, out, err = convert_cli(tmp_path, capsys, scaledobject(queue_trigger(query)))
    assert "labelSelector" not in external(yaml.safe_load(out))
    assert (
        'triggers[0] (prometheus): matcher priority="0" dropped: a label of the router\'s queue only' in err
    )


def test_the_epp_queue_without_one_pool_stays_a_custom_query_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No inference_pool="NAME" matcher: no inferencePool to write, so engine custom, and a warning
    saying to write router and inferencePool by hand."""
    query = "sum(llm_d_epp_flow_control_queue_size)"
    _, out, err = convert_cli(tmp_path, capsys, scaledobject(queue_trigger(query)))
    meta = external(yaml.safe_load(out))
    assert (meta["engine"], meta["queueQuery"]) == ("custom", query)
    assert "warning: triggers[0] (prometheus): the query reads a router's queue but names no one pool" in err


def test_a_removed_vllm_name_in_the_query_is_warned_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A query on vLLM's removed ITL name converts (to custom) with a warning naming the name to read."""
    query = "histogram_quantile(0.9, sum by (le) (rate(vllm:time_per_output_token_seconds_bucket[1m])))"
    _, _, err = convert_cli(tmp_path, capsys, scaledobject(queue_trigger(query)))
    assert (
        "warning: triggers[0] (prometheus): the query reads vllm:time_per_output_token_seconds, removed"
        " by vLLM PR #32661 (deprecated in 0.11 by PR #24110): on a current server it returns nothing; read"
        " vllm:inter_token_latency_seconds"
    ) in err


def test_a_misspelled_trigger_type_is_named_with_its_path_and_the_type_meant() -> None:
    """type: promethues is named as triggers[0].type with a did-you-mean, not as a missing queue."""
    with pytest.raises(ConvertError) as caught:
        convert_text(scaledobject(QUEUE.replace("type: prometheus", "type: promethues")))
    assert str(caught.value) == (
        "llm: triggers[0].type: 'promethues' is not a type of KEDA's scalers; did you mean prometheus?"
    )


def test_another_type_is_kept_not_guessed() -> None:
    """A real KEDA type unlike any the conversion reads (kafka) is kept, with the usual warning."""
    kafka = "- type: kafka\n  metadata: {topic: t, lagThreshold: '5'}\n"
    _, conversion = converted(scaledobject(QUEUE + kafka))
    assert any(w.startswith("triggers[1] (kafka): kept as it is") for w in conversion.warnings)


def test_kept_fields_say_what_they_do_here() -> None:
    """cooldownPeriod and pollingInterval are kept, each with what it does under this scaler."""
    _, conversion = converted(
        scaledobject(QUEUE, "cooldownPeriod: 300\npollingInterval: 30\nmaxReplicaCount: 8\n")
    )
    assert conversion.kept == [
        "spec.pollingInterval: 30: KEDA's scale loop polls this scaler every 30 s for activity and status"
        " only (KEDA 2.21: not at all while the HPA is active); the HPA reads the target at each of its"
        " syncs (15 s), from the latest decision of the scaler's own grid (scaler serve --refresh-interval)",
        "spec.cooldownPeriod: 300: KEDA uses it only to scale to zero, which this scaler never does (its"
        " floor is minReplicas): it has no effect here",
    ]


def test_an_unquoted_number_is_quoted_and_said() -> None:
    """threshold: 50 and desiredReplicas: 8 unquoted are written as strings, and the report says so."""
    cron = (
        "- type: cron\n  metadata: {timezone: UTC, start: 0 9 * * *, end: 0 10 * * *, desiredReplicas: 4}\n"
    )
    doc, conversion = converted(scaledobject(QUEUE.replace('threshold: "20"', "threshold: 20") + cron))
    assert external(doc)["targetQueuePerReplica"] == "20"
    assert (
        "triggers[0] (prometheus): threshold 20 became targetQueuePerReplica '20' (quoted: trigger"
        " metadata values are strings, and KEDA refuses a number): the same waiting requests per replica"
        " the HPA divided the query by (AverageValue)"
    ) in conversion.changes
    assert (
        "triggers[1] (cron): desiredReplicas 4 written as '4' (quoted: trigger metadata values are"
        " strings, and KEDA refuses a number)"
    ) in conversion.changes


# ---- what KEDA would refuse, or read otherwise than written, is said -----------------------


@pytest.mark.parametrize(
    ("triggers", "says"),
    [
        (QUEUE.replace("    serverAddress: http://prometheus:9090\n", ""), "serverAddress is missing"),
        (
            QUEUE.replace("serverAddress: http://prometheus:9090", 'serverAddress: ""'),
            "serverAddress is empty",
        ),
    ],
    ids=["missing", "empty"],
)
def test_a_queue_trigger_without_server_address_is_converted_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], triggers: str, says: str
) -> None:
    """No serverAddress: converted without prometheusAddress, and a warning naming the key says so."""
    code, out, err = convert_cli(tmp_path, capsys, scaledobject(triggers))
    assert code == 0
    assert "prometheusAddress" not in external(yaml.safe_load(out))
    (warning,) = [line for line in err.splitlines() if "serverAddress" in line]
    assert warning.startswith(
        f"llm: warning: triggers[0] (prometheus): {says}, which KEDA's prometheus scaler"
    )
    assert "no prometheusAddress is written" in warning


@pytest.mark.parametrize(
    ("api_version", "says"),
    [
        ("keda.k8s.io/v1alpha1", "apiVersion keda.k8s.io/v1alpha1 is KEDA 1's"),
        ("keda.sh/v1beta1", "apiVersion keda.sh/v1beta1 is not KEDA's: a ScaledObject is keda.sh/v1alpha1"),
        (None, "apiVersion is missing: a ScaledObject is keda.sh/v1alpha1"),
    ],
)
def test_an_api_version_keda_2_does_not_serve_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], api_version: str | None, says: str
) -> None:
    """A ScaledObject written for KEDA 1 (or no KEDA) exits 2 with one line naming apiVersion, never kept."""
    text = scaledobject(QUEUE)
    text = text.replace(
        "apiVersion: keda.sh/v1alpha1\n", f"apiVersion: {api_version}\n" if api_version else ""
    )
    code, out, err = convert_cli(tmp_path, capsys, text)
    assert code == 2
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith(f"scaler convert: error: llm: {says}")


@pytest.mark.parametrize(
    ("start", "end", "hours"),
    [
        ("0 9 * * *", "0 8 * * *", "open 23 h from each start, 96% of the week"),
        ("0 9 * * 1-5", "0 8 * * 1-5", "open 23-71 h"),
    ],
)
def test_a_cron_window_whose_end_comes_before_its_start_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], start: str, end: str, hours: str
) -> None:
    """A window ending before it starts in the day converts, with a warning naming it and its hours open."""
    cron = CRON.replace("start: 0 9 * * 1-5", f"start: {start}").replace("end: 0 12 * * 1-5", f"end: {end}")
    code, out, err = convert_cli(tmp_path, capsys, scaledobject(QUEUE + cron))
    assert code == 0
    assert external(yaml.safe_load(out))["prewarmEnd"] == end  # kept as written: KEDA reads it so too
    (warning,) = [line for line in err.splitlines() if "warning: triggers[1] (cron)" in line]
    assert f"end {end} comes before start {start} in the day" in warning
    assert hours in warning


def test_a_window_that_closes_the_day_it_opens_gets_no_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 09:00-12:00 window converts without a word about its hours."""
    code, _, err = convert_cli(tmp_path, capsys, scaledobject(QUEUE + CRON))
    assert code == 0
    assert "comes before start" not in err


@pytest.mark.parametrize(
    ("query", "warned"),
    [
        ("sum(vllm:num_requests_waiting)", True),
        ('sum(vllm:num_requests_waiting{namespace="inference"})', True),
        ('sum(vllm:num_requests_waiting{model_name="llama"})', False),
        ('sum(llm_d_epp_flow_control_queue_size{inference_pool="p"})', True),
        ('sum(llm_d_epp_flow_control_queue_size{inference_pool="p", model_name="llama"})', False),
    ],
)
def test_a_queue_query_naming_no_model_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], query: str, warned: bool
) -> None:
    """A queue query with no matcher on the model label converts, with a warning naming the label."""
    code, _, err = convert_cli(
        tmp_path,
        capsys,
        scaledobject(QUEUE.replace('sum(vllm:num_requests_waiting{model_name="llama"})', query)),
    )
    assert code == 0
    lines = [line for line in err.splitlines() if "the query names no model (no model_name matcher)" in line]
    assert len(lines) == warned
    assert all(line.startswith("llm: warning: triggers[0] (prometheus): ") for line in lines)


@pytest.mark.parametrize("out", ["nodir/x.yaml", "."])
def test_an_out_file_that_cannot_be_written_is_refused_before_anything_is_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], out: str
) -> None:
    """--out in a folder that is not there (or a folder) exits 2 with one line naming --out, no report."""
    code, stdout, err = convert_cli(tmp_path, capsys, scaledobject(QUEUE), "--out", str(tmp_path / out))
    assert code == 2
    assert stdout == ""
    (line,) = err.splitlines()
    assert line.startswith(f"scaler convert: error: --out {tmp_path / out}: ")
