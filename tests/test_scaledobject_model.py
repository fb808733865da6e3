"""The one ScaledObject model: every field its readers use, KEDA's defaults, the CRD's rules."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.hpa import DEFAULT_SCALE_DOWN, Behavior
from scaler.inventory import Fallback, ScaledObjectError, scaledobject_from_json
from scaler.inventory.scaledobject import (
    FALLBACK_BEHAVIORS,
    KEDA_COOLDOWN_PERIOD_S,
    KEDA_MAX_REPLICA_COUNT,
    KEDA_MIN_REPLICA_COUNT,
    KEDA_POLLING_INTERVAL_S,
)
from tests.crd import CRD

ROOT = Path(__file__).resolve().parents[1]
EXTERNAL = {"type": "external", "metadata": {"scalerAddress": "s:9090", "engine": "vllm"}}


def doc(**spec: Any) -> dict[str, Any]:
    """A ScaledObject manifest with this scaler's trigger and the given spec fields."""
    return {
        "kind": "ScaledObject",
        "metadata": {"name": "llama", "namespace": "inference"},
        "spec": {"scaleTargetRef": {"name": "vllm"}, "triggers": [EXTERNAL], **spec},
    }


def test_what_is_left_out_takes_keda_s_defaults() -> None:
    """An object with only a target and a trigger reads as KEDA runs it."""
    so = scaledobject_from_json(doc(), strict=True)
    assert (so.min_replica_count, so.max_replica_count) == (0, 100)
    assert (so.polling_interval_s, so.cooldown_period_s) == (30, 300)
    assert so.idle_replica_count is None
    assert so.fallback is None
    assert so.behavior == Behavior()
    assert so.behavior.scale_down.stabilization_window_s == DEFAULT_SCALE_DOWN.stabilization_window_s == 300
    assert so.hpa_name == "keda-hpa-llama"
    assert (so.target_kind, so.target_name, so.target_api_version) == ("Deployment", "vllm", "apps/v1")
    assert so.written == {"scaleTargetRef", "scaleTargetRef.name", "triggers"}
    assert not so.sets("minReplicaCount")
    assert so.problems == ()


def test_the_defaults_are_the_crd_s_field_set() -> None:
    """Each defaulted count is a field of KEDA's CRD, and its default meets the CRD's minimum."""
    crd = yaml.safe_load(CRD.read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    for key, default in (
        ("minReplicaCount", KEDA_MIN_REPLICA_COUNT),
        ("maxReplicaCount", KEDA_MAX_REPLICA_COUNT),
        ("pollingInterval", KEDA_POLLING_INTERVAL_S),
        ("cooldownPeriod", KEDA_COOLDOWN_PERIOD_S),
    ):
        assert spec[key]["type"] == "integer"
        assert default >= spec[key]["minimum"]
    assert tuple(spec["fallback"]["properties"]["behavior"]["enum"]) == FALLBACK_BEHAVIORS


def test_every_field_the_readers_use_is_read_once() -> None:
    """Bounds, intervals, fallback, the HPA's name and behavior, scaling modifiers and triggers."""
    so = scaledobject_from_json(
        doc(
            minReplicaCount=2,
            maxReplicaCount=16,
            pollingInterval=15,
            cooldownPeriod=120,
            idleReplicaCount=0,
            fallback={"failureThreshold": 4, "replicas": 3, "behavior": "currentReplicasIfHigher"},
            advanced={
                "horizontalPodAutoscalerConfig": {
                    "name": "my-hpa",
                    "behavior": {
                        "scaleUp": {"tolerance": "0"},
                        "scaleDown": {"stabilizationWindowSeconds": 60},
                    },
                },
                "scalingModifiers": {"formula": "trig_a + 1"},
            },
        ),
        strict=True,
    )
    assert (so.min_replica_count, so.max_replica_count, so.polling_interval_s, so.cooldown_period_s) == (
        2,
        16,
        15,
        120,
    )
    assert so.idle_replica_count == 0
    assert so.fallback == Fallback(4, 3, "currentReplicasIfHigher")
    assert so.hpa_name == "my-hpa"
    assert so.behavior.scale_up.tolerance == 0.0
    assert so.behavior.scale_down.stabilization_window_s == 60
    assert so.scaling_formula == "trig_a + 1"
    assert so.sets("advanced.horizontalPodAutoscalerConfig.behavior.scaleUp.tolerance")
    assert not so.sets("advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.tolerance")
    assert so.trigger is not None
    assert so.trigger.type == "external"
    assert so.metadata == {"scalerAddress": "s:9090", "engine": "vllm"}


def test_status_names_the_hpa_and_fallback() -> None:
    """status.hpaName wins over the configured name; the Fallback condition is read."""
    raw = doc(advanced={"horizontalPodAutoscalerConfig": {"name": "configured"}})
    raw["status"] = {"hpaName": "from-status", "conditions": [{"type": "Fallback", "status": "True"}]}
    so = scaledobject_from_json(raw)
    assert so.hpa_name == "from-status"
    assert so.fallback_active


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({"minReplicaCount": "two"}, "spec.minReplicaCount: 'two' is not an integer >= 0 (KEDA's CRD)"),
        ({"minReplicaCount": "2"}, "spec.minReplicaCount: '2' is not an integer >= 0 (KEDA's CRD)"),
        ({"maxReplicaCount": 0}, "spec.maxReplicaCount: 0 is below 1 (KEDA's CRD: an integer >= 1)"),
        ({"pollingInterval": True}, "spec.pollingInterval: True is not an integer >= 1 (KEDA's CRD)"),
        ({"cooldownPeriod": -5}, "spec.cooldownPeriod: -5 is below 0 (KEDA's CRD: an integer >= 0)"),
        (
            {"minReplicaCount": 120},
            "spec.minReplicaCount: 120 is above maxReplicaCount 100 (KEDA's default)"
            " (KEDA's CRD: minReplicaCount <= maxReplicaCount)",
        ),
        ({"fallback": {"replicas": 2}}, "spec.fallback.failureThreshold is required (KEDA's CRD)"),
        (
            {"fallback": {"replicas": 2, "failureThreshold": 3, "behavior": "always"}},
            "spec.fallback.behavior: 'always' is not one of static, currentReplicas",
        ),
        (
            {
                "advanced": {
                    "horizontalPodAutoscalerConfig": {"behavior": {"scaleUp": {"selectPolicy": "Most"}}}
                }
            },
            "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleUp.selectPolicy must be Max, Min"
            " or Disabled, got 'Most'",
        ),
        ({"triggers": [{"metadata": {}}]}, "spec.triggers[0].type is required (KEDA's CRD)"),
    ],
    ids=[
        "min-not-int",
        "min-a-string",
        "max-below-1",
        "polling-bool",
        "cooldown-negative",
        "min-above-default-max",
        "fallback-incomplete",
        "fallback-behavior",
        "hpa-behavior",
        "trigger-type",
    ],
)
def test_a_bad_field_is_named_with_its_rule(spec: dict[str, Any], problem: str) -> None:
    """Leniently the field keeps KEDA's default and the problem is listed; strictly it is raised."""
    lenient = scaledobject_from_json(doc(**spec))
    assert len(lenient.problems) == 1
    assert lenient.problems[0].startswith(problem)
    with pytest.raises(ScaledObjectError) as caught:
        scaledobject_from_json(doc(**spec), strict=True)
    assert str(caught.value) == lenient.problems[0]


def test_every_problem_is_named_at_once() -> None:
    """Two bad fields give one error naming both."""
    with pytest.raises(ScaledObjectError) as caught:
        scaledobject_from_json(doc(minReplicaCount=-1, pollingInterval="30s"), strict=True)
    assert "spec.minReplicaCount: -1" in str(caught.value)
    assert "spec.pollingInterval: '30s'" in str(caught.value)


def test_a_null_field_is_unset() -> None:
    """The API server prunes a null: the field takes KEDA's default and is not written."""
    so = scaledobject_from_json(doc(minReplicaCount=None), strict=True)
    assert so.min_replica_count == 0
    assert not so.sets("minReplicaCount")


def test_the_model_crosses_to_a_worker_process() -> None:
    """The replay sends the model to worker processes: it pickles to an equal object."""
    path = ROOT / "benchmarks" / "scaledobject-70b.yaml"
    so = scaledobject_from_json(yaml.safe_load(path.read_text()), strict=True)
    again = pickle.loads(pickle.dumps(so))
    assert again == so
    assert again.metadata == so.metadata
    assert again.triggers == so.triggers


# Where the document itself is edited, not read for what it sets: convert rewrites the
# user's triggers (and drops refused keys), copies the example's fallback and behavior in,
# and retunes queue thresholds; each reads the model for what the object sets.
EDITS_THE_DOCUMENT = {
    "unknown_keys",
    "_convert",
    "_add_example_safety",
    "_take_over_hpa",
    "retuned_queue_triggers",
}
SCALEDOBJECT_KEYS = {
    "minReplicaCount",
    "maxReplicaCount",
    "pollingInterval",
    "cooldownPeriod",
    "idleReplicaCount",
    "initialCooldownPeriod",
    "fallback",
    "horizontalPodAutoscalerConfig",
    "scalingModifiers",
    "triggers",
}


def _raw_reads(tree: ast.AST) -> set[str]:
    """The ScaledObject keys a function reads from a dictionary: ``d["k"]``, ``d.get("k")``, ``"k" in d``."""
    found: set[str] = set()
    for node in ast.walk(tree):
        key: ast.expr | None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            key = node.args[0] if node.args else None
        elif isinstance(node, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
            key = node.left
        else:
            continue
        if isinstance(key, ast.Constant) and key.value in SCALEDOBJECT_KEYS:
            found.add(key.value)
    return found


def test_no_reader_walks_the_scaledobject_dictionary() -> None:
    """Outside the model (and the loader's field table) no function reads a ScaledObject's fields
    from the dictionary: each reader asks the model."""
    readers = []
    for path in sorted((ROOT / "scaler").rglob("*.py")):
        if path.relative_to(ROOT).as_posix() in ("scaler/inventory/scaledobject.py", "scaler/manifest.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and node.name not in EDITS_THE_DOCUMENT
            ):
                keys = _raw_reads(node)
                if keys:
                    readers.append(f"{path.relative_to(ROOT)}:{node.name} reads {', '.join(sorted(keys))}")
    assert readers == []
