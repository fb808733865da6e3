"""Finding the ScaledObject in a manifest: the one YAML loader every reader uses. Pure.

    first_scaledobject(text) -> the first document whose kind is ScaledObject

A manifest may hold several documents (a Deployment, a Service, the ScaledObject); the
first ScaledObject is the one read. *Example*: ``kubectl get scaledobject -o yaml`` output,
or the example's ``scaler/examples/scaledobject.yaml``, give the same mapping pyyaml does.
``ManifestError`` says what is wrong: not YAML (with the parser's line), or no ScaledObject.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml


class ManifestError(ValueError):
    """The text is not YAML, or holds no ScaledObject."""


def first_scaledobject(text: str, where: str = "the manifest") -> Mapping[str, Any]:
    """The first ScaledObject in (multi-document) YAML ``text``; ``where`` names it in errors."""
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise ManifestError(f"cannot read {where}: {exc}") from None
    for doc in docs:
        if isinstance(doc, Mapping) and doc.get("kind") == "ScaledObject":
            return doc
    raise ManifestError(f"{where} holds no object of kind ScaledObject")
