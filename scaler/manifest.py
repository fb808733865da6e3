"""Finding the ScaledObject in a manifest: the one YAML loader every reader uses. Pure.

    first_scaledobject(text) -> the first document whose kind is ScaledObject
    unknown_fields(doc)      -> every field KEDA's ScaledObject CRD does not have, with a guess

A manifest may hold several documents (a Deployment, a Service, the ScaledObject); the
first ScaledObject is the one read. *Example*: ``kubectl get scaledobject -o yaml`` output,
or the example's ``scaler/examples/scaledobject.yaml``, give the same mapping pyyaml does.
``ManifestError`` says what is wrong: not YAML (with the parser's line), no ScaledObject, or
a field the CRD does not have (``spec.minReplicaCont``: the API server refuses it, and a
reader that skipped it would run with the default in its place), with the field it most
resembles.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from scaler.errors import InputError

# The fields of KEDA's ScaledObject (keda.sh/v1alpha1) at every level its CRD lists them:
# kedacore/keda config/crd/bases/keda.sh_scaledobjects.yaml, as of KEDA v2.20.2 (a copy is
# tests/data/keda.sh_scaledobjects.yaml; tests/test_manifest_loader.py checks this against it).
# A mapping is an object with those fields, a one-item list a list of such objects, None a
# value whose inside is not checked (trigger metadata, object metadata, status).
_POLICY = {"periodSeconds": None, "type": None, "value": None}
_RULES = {"policies": [_POLICY], "selectPolicy": None, "stabilizationWindowSeconds": None, "tolerance": None}
SPEC_FIELDS: Mapping[str, Any] = {
    "advanced": {
        "horizontalPodAutoscalerConfig": {"behavior": {"scaleDown": _RULES, "scaleUp": _RULES}, "name": None},
        "restoreToOriginalReplicaCount": None,
        "scalingModifiers": {"activationTarget": None, "formula": None, "metricType": None, "target": None},
    },
    "cooldownPeriod": None,
    "fallback": {"behavior": None, "failureThreshold": None, "replicas": None},
    "idleReplicaCount": None,
    "initialCooldownPeriod": None,
    "maxReplicaCount": None,
    "minReplicaCount": None,
    "pollingInterval": None,
    "scaleTargetRef": {"apiVersion": None, "envSourceContainerName": None, "kind": None, "name": None},
    "triggers": [
        {
            "authenticationRef": {"kind": None, "name": None},
            "metadata": None,
            "metricType": None,
            "name": None,
            "type": None,
            "useCachedMetrics": None,
        }
    ],
}
SCALEDOBJECT_FIELDS: Mapping[str, Any] = {
    "apiVersion": None,
    "kind": None,
    "metadata": None,
    "spec": SPEC_FIELDS,
    "status": None,
}


# The API group and version KEDA 2 serves ScaledObjects under, and KEDA 1's (which KEDA 2 does not).
KEDA_API_VERSION = "keda.sh/v1alpha1"
# The address KEDA reaches the scaler at, as manifests/ installs it (Service llm-gpu-scaler in the
# namespace llm-gpu-scaler, gRPC on 9090): what convert writes as scalerAddress unless told otherwise.
DEFAULT_SCALER_ADDRESS = "llm-gpu-scaler.llm-gpu-scaler.svc.cluster.local:9090"
KEDA_1_API_VERSION = "keda.k8s.io/v1alpha1"
# The ScaledObject annotation by which KEDA takes over an existing HPA, the one named by
# advanced.horizontalPodAutoscalerConfig.name (KEDA's ScaledObject spec, since 2.10). From 2.21.1
# KEDA manages only the HPAs it owns (kedacore/keda#8374): an HPA already on the target stays
# beside KEDA's unless the ScaledObject takes it over so.
TRANSFER_HPA_OWNERSHIP = "scaledobject.keda.sh/transfer-hpa-ownership"


def api_version_problem(doc: Mapping[str, Any]) -> str | None:
    """Why ScaledObject ``doc``'s ``apiVersion`` is not one KEDA 2 serves, or None.

    *Example*: ``keda.k8s.io/v1alpha1`` -> ``apiVersion keda.k8s.io/v1alpha1 is KEDA 1's, ...``.
    """
    written = doc.get("apiVersion")
    if written == KEDA_API_VERSION:
        return None
    if written is None:
        return f"apiVersion is missing: a ScaledObject is {KEDA_API_VERSION}"
    if written == KEDA_1_API_VERSION:
        return (
            f"apiVersion {written} is KEDA 1's, which KEDA 2 does not serve (this scaler needs KEDA 2.17"
            f" or later, where a ScaledObject is {KEDA_API_VERSION}): move the object to KEDA 2 first"
            " (keda.sh/docs/2.0/migration/: scaleTargetRef.deploymentName becomes name, among others)"
        )
    return f"apiVersion {written} is not KEDA's: a ScaledObject is {KEDA_API_VERSION}"


class ManifestError(InputError):
    """The text is not YAML, holds no ScaledObject, or a field its CRD does not have."""


def closest(key: str, known: Sequence[str]) -> str | None:
    """The known key ``key`` most resembles (case and a slip or two forgiven), or None.

    *Example*: ``minReplicaCont`` -> ``minReplicaCount``; ``timeZone`` -> ``timezone``;
    ``treshold`` -> ``threshold``; ``foo`` -> None.
    """
    lowered = {k.lower(): k for k in known}
    found = difflib.get_close_matches(key.lower(), list(lowered), n=1, cutoff=0.7)
    return lowered[found[0]] if found else None


@dataclass(frozen=True, slots=True)
class UnknownField:
    """A field the CRD does not have: where (``spec.minReplicaCont``), and the likeliest meant."""

    path: str
    location: tuple[str | int, ...]  # the keys and list indices from the document down to it
    guess: str | None
    known: tuple[str, ...]

    @property
    def why(self) -> str:
        """``not a field of KEDA's ScaledObject`` and the field meant, or the fields there are."""
        if self.guess is not None:
            return f"not a field of KEDA's ScaledObject; did you mean {self.guess}?"
        return f"not a field of KEDA's ScaledObject (it has {', '.join(self.known)})"

    def __str__(self) -> str:
        return f"{self.path} is {self.why}"


def _walk(value: Any, shape: Any, path: str, location: tuple[str | int, ...]) -> Iterator[UnknownField]:
    if isinstance(shape, list) and isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, shape[0], f"{path}[{index}]", (*location, index))
    elif isinstance(shape, Mapping) and isinstance(value, Mapping):
        known = tuple(shape)
        parent = f"{path}." if path else ""
        for key, inner in value.items():
            if key in shape:
                yield from _walk(inner, shape[key], f"{parent}{key}", (*location, key))
            else:
                guess = closest(str(key), known)
                yield UnknownField(
                    f"{parent}{key}", (*location, key), None if guess is None else parent + guess, known
                )


def unknown_fields(doc: Mapping[str, Any]) -> list[UnknownField]:
    """Every field of ScaledObject ``doc`` its CRD does not have, in the document's order.

    *Example*: ``spec: {minReplicaCont: 2}`` gives one, at ``spec.minReplicaCont``, meant as
    ``spec.minReplicaCount``.
    """
    return list(_walk(doc, SCALEDOBJECT_FIELDS, "", ()))


def yaml_problem(exc: Exception, where: str) -> str:
    """A YAML parser's error (pyyaml's or ruamel's) as one line naming the file's line and column.

    *Example*: ``so.yaml:3:1: expected ',' or ']', but got '<stream end>' (while parsing a
    flow sequence at line 2)``.
    """
    problem, mark = getattr(exc, "problem", None), getattr(exc, "problem_mark", None)
    if problem is None or mark is None:
        return f"{where}: not valid YAML: {' '.join(str(exc).split())}"
    context, context_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    during = f" ({context} at line {context_mark.line + 1})" if context and context_mark else ""
    return f"{where}:{mark.line + 1}:{mark.column + 1}: not valid YAML: {problem}{during}"


def first_scaledobject(
    text: str, where: str = "the manifest", check_fields: bool = True
) -> Mapping[str, Any]:
    """The first ScaledObject in (multi-document) YAML ``text``; ``where`` names it in errors.

    With ``check_fields`` (the default) a field KEDA's CRD does not have is an error naming
    it and the field it most resembles.
    """
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise ManifestError(yaml_problem(exc, where)) from None
    for doc in docs:
        if isinstance(doc, Mapping) and doc.get("kind") == "ScaledObject":
            unknown = unknown_fields(doc) if check_fields else []
            if unknown:
                raise ManifestError(f"{where}: " + "; ".join(str(u) for u in unknown))
            return doc
    raise ManifestError(f"{where} holds no object of kind ScaledObject")
