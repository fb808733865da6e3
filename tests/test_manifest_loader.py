"""One YAML loader: the first ScaledObject of a manifest, or an error that says why not."""

from __future__ import annotations

import pytest

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
        ("kind: [unclosed\n", "cannot read so.yaml: "),
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

    from scaler import convert
    from scaler.replay import keda
    from scaler.sources import files

    for module in (files, keda, convert):
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
    assert from_manifest.raw == doc  # a manifest keeps its document for the dry-run's warnings
    assert from_api.raw == {}


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
