"""The ScaledObject rewritten: triggers folded into one external trigger, bounds and safety set.

``convert`` rewrites one ScaledObject (a copy; comments kept), ``convert_text`` every one of
a multi-document YAML text, and ``dump`` writes a document back as YAML.
"""

from __future__ import annotations

import copy
import io
import textwrap
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from scaler.adoption.convert.keys import unknown_keys
from scaler.adoption.convert.report import Conversion, ConvertError, RefusedKeysError
from scaler.adoption.convert.triggers import Triggers
from scaler.config import MetadataError, parse_metadata
from scaler.inventory import ScaledObject, ScaledObjectError, scaledobject_from_json
from scaler.manifest import DEFAULT_SCALER_ADDRESS, TRANSFER_HPA_OWNERSHIP, api_version_problem, yaml_problem


def example_document() -> CommentedMap:
    """The packaged example ScaledObject (``scaler/examples/scaledobject.yaml``), parsed."""
    yaml = YAML()
    text = (resources.files("scaler") / "examples" / "scaledobject.yaml").read_text()
    doc: CommentedMap = yaml.load(text)
    return doc


def convert(
    source: CommentedMap,
    scaler_address: str = DEFAULT_SCALER_ADDRESS,
    force: bool = False,
    hpas: Sequence[Mapping[str, Any]] = (),
) -> Conversion:
    """The ScaledObject ``source`` rewritten for this scaler (``source`` is not changed); ``hpas``
    are the HorizontalPodAutoscalers beside it, of which one on its target is taken over.

    A key KEDA does not accept raises ``RefusedKeysError``, or with ``force`` is dropped and reported.
    """
    if not isinstance(source, Mapping) or source.get("kind") != "ScaledObject":
        raise ConvertError("not a ScaledObject (kind: ScaledObject)")
    wrong_api = api_version_problem(source)
    if wrong_api is not None:  # before its fields: KEDA 1's are not KEDA 2's, and it would be kept as written
        raise ConvertError(wrong_api)
    doc: CommentedMap = copy.deepcopy(source)
    out = Conversion(doc)
    refused = unknown_keys(doc, force, out)
    if refused:
        raise RefusedKeysError(refused)
    forced = [line.split(" dropped (--force)")[0] for line in out.changes]
    try:
        _convert(doc, scaler_address, out, hpas)
    except ConvertError as exc:
        if not forced:
            raise
        raise ConvertError(f"{exc} (--force dropped {'; '.join(forced)})") from None
    return out


def _convert(
    doc: CommentedMap, scaler_address: str, out: Conversion, hpas: Sequence[Mapping[str, Any]]
) -> None:
    spec = doc.get("spec")
    if not isinstance(spec, CommentedMap):
        raise ConvertError("the ScaledObject has no spec")
    try:
        so = scaledobject_from_json(doc, strict=True)  # what the object sets, read once
    except ScaledObjectError as exc:
        raise ConvertError(str(exc)) from None
    triggers = spec.get("triggers")
    if not isinstance(triggers, list) or not triggers:
        raise ConvertError("the ScaledObject has no triggers")
    walk = Triggers(out, {"scalerAddress": scaler_address})
    walk.walk(triggers)
    metadata = walk.metadata
    _replica_bounds(so, spec, metadata, out, walk.origin)
    high = int(metadata["maxReplicas"])
    for where, window, written in walk.windows:
        if window["replicas"] > high:
            raise ConvertError(
                f"{where}: desiredReplicas={written!r} is above maxReplicaCount ({high}), which"
                " the HPA never exceeds: lower it, or raise maxReplicaCount"
            )
    try:
        parse_metadata(metadata)
    except MetadataError as exc:
        raise ConvertError("; ".join(walk.explain(p) for p in exc.problems)) from None

    external = CommentedMap()
    external["type"] = "external"
    external.update(walk.external)
    external["metadata"] = CommentedMap(metadata)
    new_triggers = CommentedSeq([external, *walk.kept])
    spec["triggers"] = new_triggers
    if walk.dropped:
        note = (
            "Converted by `scaler convert`. Dropped: " + "; ".join(walk.dropped) + ": utilisation lags the"
            " queue and cannot see requests waiting; the load signal replaces it."
        )
        spec.yaml_set_comment_before_after_key(
            "triggers", before="\n".join(textwrap.wrap(note, 86)), indent=2
        )
    _add_example_safety(so, spec, out)
    _take_over_hpa(so, doc, spec, hpas, out)
    _kept(so, spec, out)


def _on_target(so: ScaledObject, namespace: object, hpa: Mapping[str, Any]) -> bool:
    """Whether ``hpa`` scales the target of ScaledObject ``so`` (written in ``namespace``, or None):
    the same kind and name, and the same namespace where both write one."""
    theirs = (hpa.get("metadata") or {}).get("namespace")
    ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
    return (
        str(ref.get("name", "")) == so.target_name
        and str(ref.get("kind") or "Deployment") == so.target_kind
        and (theirs is None or namespace is None or str(theirs) == str(namespace))
    )


def _take_over_hpa(
    so: ScaledObject,
    doc: CommentedMap,
    spec: CommentedMap,
    hpas: Sequence[Mapping[str, Any]],
    out: Conversion,
) -> None:
    """Where an HPA in the input already scales the target: the annotation by which KEDA takes it
    over, and its name as the ScaledObject's HPA. KEDA 2.21.1 manages only the HPAs it owns
    (kedacore/keda#8374): without them, the old HPA stays beside KEDA's."""
    written_namespace = (doc.get("metadata") or {}).get("namespace")
    found = [h for h in hpas if _on_target(so, written_namespace, h)]
    if not found:
        return
    names = [str((h.get("metadata") or {}).get("name", "")) for h in found]
    name = names[0]
    configured = so.sets("advanced.horizontalPodAutoscalerConfig.name")
    if configured and so.hpa_name != name:
        out.warnings.append(
            f"HorizontalPodAutoscaler {name} scales {so.target_kind} {so.target_name} too, but"
            f" advanced.horizontalPodAutoscalerConfig.name is {so.hpa_name}, kept as written: KEDA 2.21.1"
            " manages only the HPAs it owns (kedacore/keda#8374), so delete it or name it there"
        )
        return
    metadata = doc.get("metadata")
    if not isinstance(metadata, CommentedMap):
        metadata = CommentedMap()
        doc["metadata"] = metadata
    annotations = metadata.get("annotations")
    if not isinstance(annotations, CommentedMap):
        annotations = CommentedMap(annotations or {})
        metadata["annotations"] = annotations
    annotations[TRANSFER_HPA_OWNERSHIP] = "true"
    out.hpa_taken = found[0]
    hpa_config = spec["advanced"]["horizontalPodAutoscalerConfig"]  # _add_example_safety made it
    if not configured:
        hpa_config.insert(0, "name", name)
    out.changes.append(
        f'metadata.annotations {TRANSFER_HPA_OWNERSHIP}: "true" and'
        f" advanced.horizontalPodAutoscalerConfig.name: {name} written: HorizontalPodAutoscaler {name}"
        f" (in the input) already scales {so.target_kind} {so.target_name}, and KEDA 2.21.1 manages only"
        " the HPAs it owns (kedacore/keda#8374); KEDA takes it over and rewrites its metrics"
    )
    out.changes.append(
        f"HorizontalPodAutoscaler {name} left out of the output: KEDA owns it once the ScaledObject is"
        " applied, and applying the old one again would undo what KEDA writes (leave it in the cluster)"
    )
    for other in names[1:]:
        out.warnings.append(
            f"HorizontalPodAutoscaler {other} scales {so.target_kind} {so.target_name} too: KEDA takes over"
            f" only {name}; delete {other}, or two HPAs scale one Deployment"
        )


# The ScaledObject's fields kept as written that do something else, or nothing, under this
# scaler: what each does here. KEDA's ScaledObject spec (keda.sh/docs/2.17/reference/scaledobject-spec).
KEPT_FIELDS = {
    "pollingInterval": "KEDA's scale loop polls this scaler every {value} s for activity and status only"
    " (KEDA 2.21: not at all while the HPA is active); the HPA reads the target at each of its syncs"
    " (15 s), from the latest decision of the scaler's own grid (scaler serve --refresh-interval)",
    "cooldownPeriod": "KEDA uses it only to scale to zero, which this scaler never does (its floor is"
    " minReplicas): it has no effect here",
    "initialCooldownPeriod": "KEDA uses it only before a first scale to zero, which this scaler never"
    " does: it has no effect here",
}


def _kept(so: ScaledObject, spec: CommentedMap, out: Conversion) -> None:
    """A line for each field kept as written whose meaning changes under this scaler."""
    for key, does in KEPT_FIELDS.items():
        if key in spec:
            out.kept.append(f"spec.{key}: {spec[key]}: {does.format(value=spec[key])}")


def _replica_bounds(
    so: ScaledObject,
    spec: CommentedMap,
    metadata: dict[str, str],
    out: Conversion,
    origin: dict[str, tuple[str, Any]],
) -> None:
    low, high = so.min_replica_count, so.max_replica_count
    for key, written, value in (
        ("minReplicas", "minReplicaCount", low),
        ("maxReplicas", "maxReplicaCount", high),
    ):
        if so.sets(written):
            origin[key] = (f"spec.{written}", value)
    if low < 1:
        was = f"Was {low}" if so.sets("minReplicaCount") else "Not set (KEDA's default is 0)"
        spec["minReplicaCount"] = 1
        spec.yaml_set_comment_before_after_key(
            "minReplicaCount",
            before=f"{was}: scaling an inference workload to zero means a cold start (minutes) on\n"
            "the next request; this scaler keeps a floor of at least one replica.",
            indent=2,
        )
        out.changes.append(
            f"spec.minReplicaCount: {was[0].lower() + was[1:]}, became 1: a cold start on the next request"
            " is avoided"
        )
        low = 1  # maxReplicaCount is at least 1 (KEDA's CRD): the bounds still hold
    if not so.sets("maxReplicaCount"):
        spec["maxReplicaCount"] = high
        out.changes.append(
            f"spec.maxReplicaCount: written as {high} (KEDA's default), so the trigger can match it"
        )
    if so.idle_replica_count is not None:
        del spec["idleReplicaCount"]
        out.changes.append(
            "spec.idleReplicaCount dropped: this scaler is always active, its floor is minReplicas"
        )
    metadata["minReplicas"] = str(low)
    metadata["maxReplicas"] = str(high)
    out.changes.append(
        f"metadata minReplicas/maxReplicas: {low}/{high}, equal to minReplicaCount/maxReplicaCount:"
        " the HPA keeps replicas within the latter, the scaler decides within the former"
    )


def _add_example_safety(so: ScaledObject, spec: CommentedMap, out: Conversion) -> None:
    """The example's ``fallback`` and HPA ``behavior``, where the object has none."""
    example = example_document()["spec"]
    if so.fallback is not None:
        out.warnings.append(
            "spec.fallback kept as written; the example uses failureThreshold 4 and"
            " behavior: currentReplicasIfHigher (KEDA 2.17+)"
        )
    else:
        fallback = copy.deepcopy(example["fallback"])
        fallback["replicas"] = max(so.min_replica_count, 1)
        spec["fallback"] = fallback
        out.changes.append(
            "spec.fallback added: after 4 failed polls KEDA keeps the current replicas (or"
            f" {fallback['replicas']}, if higher) until the scaler answers again"
        )
    if so.sets("advanced.horizontalPodAutoscalerConfig.behavior"):
        out.warnings.append(
            "advanced.horizontalPodAutoscalerConfig.behavior kept as written; the example's (scale-down"
            " window 0, 2 pods/min; scale-up at once) lets the scaler's hold do the holding (docs/deploy.md)"
        )
        return
    behavior = copy.deepcopy(example["advanced"]["horizontalPodAutoscalerConfig"]["behavior"])
    for policy in behavior["scaleUp"]["policies"]:
        if policy["type"] == "Pods":
            policy["value"] = so.max_replica_count
    # Where the behavior is written: the object's own mappings, kept with their comments.
    advanced = spec.get("advanced")
    hpa_config = advanced.get("horizontalPodAutoscalerConfig") if isinstance(advanced, Mapping) else None
    if not isinstance(advanced, CommentedMap):
        advanced = CommentedMap()
        spec["advanced"] = advanced
    if not isinstance(hpa_config, CommentedMap):
        hpa_config = CommentedMap()
        advanced["horizontalPodAutoscalerConfig"] = hpa_config
    hpa_config["behavior"] = behavior
    out.changes.append(
        "advanced.horizontalPodAutoscalerConfig.behavior added (the example's): scale-down window 0"
        " and 2 pods a minute, scale-up at once, scaleUp tolerance 0 (KEDA 2.18+, Kubernetes 1.35;"
        " delete that line on older ones)"
    )


def dump(doc: Any) -> str:
    """One document as YAML text: 2-space mappings, indented sequences, no line wrapping."""
    yaml = YAML()
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 4096
    buffer = io.StringIO()
    yaml.dump(doc, buffer)
    return buffer.getvalue()


def convert_text(
    text: str, scaler_address: str = DEFAULT_SCALER_ADDRESS, force: bool = False, where: str = "the input"
) -> tuple[str, list[Conversion]]:
    """Every ScaledObject in a (multi-document) YAML text converted; other documents kept.

    An error names the ScaledObject (``metadata.name``); ``where`` names the text in YAML errors.
    """
    yaml = YAML()
    try:
        docs = list(yaml.load_all(text))
    except Exception as exc:  # noqa: BLE001 - ruamel raises several unrelated error types
        raise ConvertError(yaml_problem(exc, where)) from None
    conversions = []
    result = []
    hpas = [d for d in docs if isinstance(d, Mapping) and d.get("kind") == "HorizontalPodAutoscaler"]
    for doc in docs:
        if isinstance(doc, Mapping) and doc.get("kind") == "ScaledObject":
            meta = doc.get("metadata")
            name = str(meta.get("name", "?")) if isinstance(meta, Mapping) else "?"
            try:
                conversion = convert(doc, scaler_address, force, hpas)  # type: ignore[arg-type]
            except RefusedKeysError as exc:
                raise RefusedKeysError([f"{name}: {line}" for line in exc.lines]) from None
            except ConvertError as exc:
                raise ConvertError(f"{name}: {exc}") from None
            conversions.append(conversion)
            result.append(conversion.document)
        elif doc is not None:
            result.append(doc)
    if not conversions:
        raise ConvertError(f"{where} holds no object of kind ScaledObject")
    taken = [c.hpa_taken for c in conversions if c.hpa_taken is not None]
    result = [d for d in result if not any(d is t for t in taken)]
    return "---\n".join(dump(d) for d in result), conversions
