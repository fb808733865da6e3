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
