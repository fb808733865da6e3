"""One YAML loader: the first ScaledObject of a manifest, or an error that says why not."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from scaler.manifest import ManifestError, first_scaledobject

TWO_DOCUMENTS = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm}
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: first}
---
kind: ScaledObject
metadata: {name: second}
"""


def test_the_first_scaledobject_of_several_documents_is_read() -> None:
    """Other kinds are skipped and the first ScaledObject wins."""
    assert first_scaledobject(TWO_DOCUMENTS)["metadata"]["name"] == "first"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: Deployment\n", "so.yaml holds no object of kind ScaledObject"),
        ("", "so.yaml holds no object of kind ScaledObject"),
        ("kind: [unclosed\n", "so.yaml:2:1: not valid YAML: expected ',' or ']'"),
    ],
    ids=["no-scaledobject", "empty", "not-yaml"],
)
def test_a_manifest_without_one_names_itself_and_why(text: str, message: str) -> None:
    """No ScaledObject, or no YAML at all, is an error naming the file."""
    with pytest.raises(ManifestError, match=message):
        first_scaledobject(text, "so.yaml")


def test_every_reader_uses_the_one_loader() -> None:
    """dry-run, replay and convert find the ScaledObject the same way (no second loader)."""
    import inspect

    from scaler.adoption.convert import compare
    from scaler.replay import keda
    from scaler.sources import files

    for module in (files, keda, compare):
        source = inspect.getsource(module)
        assert "first_scaledobject(" in source
        assert "safe_load_all" not in source


def test_the_dry_run_and_the_inventory_read_one_scaledobject_type() -> None:
    """A manifest and the API's JSON decode to the same ScaledObject type, trigger and metadata."""
    from pathlib import Path

    from scaler.inventory import ScaledObject, scaledobject_from_json
    from scaler.sources.files import scaledobject_from_dict

    example = Path(__file__).resolve().parents[1] / "scaler" / "examples" / "scaledobject.yaml"
    doc = first_scaledobject(example.read_text())
    from_manifest, from_api = scaledobject_from_dict(doc), scaledobject_from_json(doc)
    assert type(from_manifest) is ScaledObject
    assert type(from_api) is ScaledObject
    assert from_manifest.trigger_index == from_api.trigger_index == 0
    assert from_manifest.metadata == from_api.metadata
    assert from_manifest.metadata["targetQueuePerReplica"] == "10"
    assert from_manifest == from_api  # one parse, whichever reader asks


def test_a_trigger_index_picks_an_external_trigger_or_none() -> None:
    """trigger_index selects that trigger when it is external; any other index finds none."""
    from scaler.inventory import scaledobject_from_json

    doc = {
        "metadata": {"name": "x", "namespace": "n"},
        "spec": {
            "triggers": [
                {"type": "cpu", "metadata": {"value": "60"}},
                {"type": "external", "metadata": {"minReplicas": 2}},
            ]
        },
    }
    assert scaledobject_from_json(doc).trigger_index == 1
    assert scaledobject_from_json(doc).metadata == {"minReplicas": "2"}  # as KEDA sends it: strings
    assert scaledobject_from_json(doc, trigger_index=0).trigger_index is None


def _shape(schema: dict[str, Any]) -> Any:
    """The fields of a CRD schema as the loader's table writes them (objects, lists, leaves)."""
    if schema.get("type") == "array":
        inner = _shape(schema["items"])
        return None if inner is None else [inner]
    if "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
        return {key: _shape(value) for key, value in schema["properties"].items()}
    return None


def test_the_field_table_is_the_crd_s() -> None:
    """The loader's table of ScaledObject fields is exactly the fields of KEDA's CRD."""
    from scaler.manifest import SCALEDOBJECT_FIELDS
    from tests.crd import CRD

    crd = yaml.safe_load(CRD.read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1")
    schema = version["schema"]["openAPIV3Schema"]
    expected = {
        key: (_shape(value) if key == "spec" else None) for key, value in schema["properties"].items()
    }
    assert expected == SCALEDOBJECT_FIELDS


@pytest.mark.parametrize(
    ("spec", "path", "meant"),
    [
        ({"minReplicaCont": 2}, "spec.minReplicaCont", "spec.minReplicaCount"),
        ({"pollinginterval": 15}, "spec.pollinginterval", "spec.pollingInterval"),
        (
            {"fallback": {"failureTreshold": 3}},
            "spec.fallback.failureTreshold",
            "spec.fallback.failureThreshold",
        ),
        (
            {"advanced": {"horizontalPodAutoscalerConfig": {"behavior": {"scaleUp": {"policy": []}}}}},
            "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleUp.policy",
            "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleUp.policies",
        ),
        (
            {"triggers": [{"type": "cron"}, {"type": "x", "metdata": {}}]},
            "spec.triggers[1].metdata",
            "spec.triggers[1].metadata",
        ),
        ({"zzz": 1}, "spec.zzz", None),
    ],
    ids=["spec", "case", "fallback", "behavior-policy", "trigger", "no-guess"],
)
def test_a_field_the_crd_lacks_is_named_with_the_field_meant(
    spec: dict[str, Any], path: str, meant: str | None
) -> None:
    """Each unknown field, at any depth, is named by its path, with the CRD field it most resembles."""
    from scaler.manifest import unknown_fields

    text = yaml.safe_dump({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "spec": spec})
    (unknown,) = unknown_fields(first_scaledobject(text, check_fields=False))
    assert (unknown.path, unknown.guess) == (path, meant)
    with pytest.raises(ManifestError) as info:
        first_scaledobject(text, "so.yaml")
    assert str(info.value).startswith(f"so.yaml: {path} is not a field of KEDA's ScaledObject")
    assert (f"did you mean {meant}?" in str(info.value)) == (meant is not None)


def test_every_shipped_scaledobject_has_only_crd_fields() -> None:
    """The example, the baseline and the benchmarks' ScaledObjects pass the field check."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    files = [*(root / "scaler" / "examples").glob("*.yaml"), *(root / "benchmarks").glob("*.yaml")]
    checked = 0
    for path in files:
        text = path.read_text()
        if "kind: ScaledObject" in text:
            first_scaledobject(text, str(path))
            checked += 1
    assert checked >= 3
