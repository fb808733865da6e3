"""KEDA's ScaledObject CRD (tests/data, from ../shared/reference) as a strict JSON-schema validator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import yaml

CRD = Path(__file__).resolve().parent / "data" / "keda.sh_scaledobjects.yaml"


def strict(schema: Any) -> Any:
    """The CRD schema as the API server's strict field validation reads it: unknown fields fail."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def crd_validator(path: Path = CRD) -> jsonschema.protocols.Validator:
    """A strict validator for the CRD's v1alpha1 ScaledObject schema."""
    crd = yaml.safe_load(path.read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1")
    schema = strict(version["schema"]["openAPIV3Schema"])
    validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    validator: jsonschema.protocols.Validator = validator_class(schema)
    return validator


def crd_errors(validator: jsonschema.protocols.Validator, obj: Any) -> list[str]:
    """Every schema error for ``obj``, each as ``field.path: message``."""
    return [f"{'.'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(obj)]
