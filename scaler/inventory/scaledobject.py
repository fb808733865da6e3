"""KEDA's ScaledObject: the one model every reader uses, parsed once, with KEDA's defaults. Pure.

The scaler's inventory, the dry-run, the doctor, convert, the replay and the demo read a
ScaledObject only through ``ScaledObject``; nothing else walks its dictionary. Field by field
(spec path, attribute, KEDA's default when unset, the rule KEDA's CRD sets; the CRD is
``keda.sh_scaledobjects.yaml`` of KEDA v2.20.2, a copy in tests/data/)::

    minReplicaCount        min_replica_count    0                integer >= 0, <= maxReplicaCount
    maxReplicaCount        max_replica_count    100              integer >= 1
    pollingInterval        polling_interval_s   30 s             integer >= 1
    cooldownPeriod         cooldown_period_s    300 s            integer >= 0
    idleReplicaCount       idle_replica_count   None (unset)     integer >= 0
    fallback               fallback             None (none)      failureThreshold, replicas: integers >= 0;
                                                                 behavior: one of FALLBACK_BEHAVIORS
    advanced.horizontalPodAutoscalerConfig
      .name                hpa_name             keda-hpa-<name>  (status.hpaName wins)
      .behavior            behavior             the HPA's        scaler.hpa.Behavior's rules
    advanced.scalingModifiers
      .formula             scaling_formula      "" (none)        a string
    scaleTargetRef         target_kind, _name,  Deployment,
                           _api_version         apps/v1
    triggers               triggers (Trigger)   (required)       each a mapping with a type
                           trigger_index, metadata: this scaler's trigger, its metadata as strings

``written`` holds the dotted path of every spec field the object sets (``minReplicaCount``,
``advanced.horizontalPodAutoscalerConfig.behavior.scaleUp.tolerance``), for the readers that
say "not set: KEDA's default" or keep what the user wrote.

*Example*: ``spec: {maxReplicaCount: 16, triggers: [{type: external, metadata: {engine:
vllm}}]}`` gives ``min_replica_count == 0``, ``max_replica_count == 16``,
``polling_interval_s == 30``, ``cooldown_period_s == 300``, ``behavior == Behavior()`` (the
HPA's defaults: scale-down window 300 s, tolerance 0.1), ``trigger_index == 0`` and
``metadata == {"engine": "vllm"}``.

A value that breaks a rule is a problem naming the field, what was written and the rule
(``spec.minReplicaCount: 'two' is not an integer >= 0 (KEDA's CRD)``), and the field keeps
KEDA's default. ``scaledobject_from_json(..., strict=True)`` raises ``ScaledObjectError`` with
every problem (manifests a user hands in); the inventory decodes leniently, since the API
server has validated the object against the CRD already.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from scaler.errors import InputError
from scaler.hpa import Behavior, BehaviorError
from scaler.kubejson import as_items, as_mapping, as_str, frozen

# KEDA's defaults for what a ScaledObject leaves out (keda.sh/docs "ScaledObject specification"),
# written once: every reader takes them from the model.
KEDA_MIN_REPLICA_COUNT = 0
KEDA_MAX_REPLICA_COUNT = 100
KEDA_POLLING_INTERVAL_S = 30  # seconds between KEDA's polls of each trigger
KEDA_COOLDOWN_PERIOD_S = 300  # seconds after the last active trigger before scaling to zero
KEDA_TRIGGER_METRIC_TYPE = "AverageValue"  # a trigger's metricType when unset
EXTERNAL_TRIGGER_TYPES = ("external", "external-push")
# fallback.behavior's values in KEDA's CRD; "static" (serve fallback.replicas) is the default.
FALLBACK_BEHAVIORS = (
    "static",
    "currentReplicas",
    "currentReplicasIfHigher",
    "currentReplicasIfLower",
    "scalingModifiers",
)
HPA_CONFIG = "advanced.horizontalPodAutoscalerConfig"


class ScaledObjectError(InputError):
    """A ScaledObject that breaks KEDA's rules, or that a reader cannot use; the message says what."""


def _plain(value: Any) -> Any:
    return dict(value) if isinstance(value, MappingProxyType) else value


def _reduce(record: Any) -> tuple[Any, tuple[Any, ...]]:
    """Pickle a frozen record by its fields, read-only mappings as dicts (pickle refuses
    ``MappingProxyType``; ``__post_init__`` freezes them again): the replay sends the model to
    its worker processes."""
    return type(record), tuple(_plain(getattr(record, f.name)) for f in fields(record))


@dataclass(frozen=True, slots=True)
class Trigger:
    """One trigger as written: its type, name, metricType (KEDA's default when unset) and metadata.

    ``metadata`` keeps the values as the YAML gave them: KEDA's CRD takes strings only, and
    the dry-run names a number or a bool it finds there.
    """

    type: str
    name: str = ""
    metric_type: str = KEDA_TRIGGER_METRIC_TYPE
    metadata: Mapping[str, Any] = field(default_factory=dict)
    # useCachedMetrics: KEDA answers the HPA from the scale loop's last poll, not a call then
    use_cached_metrics: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", frozen(self.metadata))

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return _reduce(self)

    @property
    def external(self) -> bool:
        """Whether KEDA sends this trigger to an external scaler (``external``, ``external-push``)."""
        return self.type in EXTERNAL_TRIGGER_TYPES


@dataclass(frozen=True, slots=True)
class Fallback:
    """``spec.fallback``: after ``failure_threshold`` failed polls KEDA serves ``replicas`` (or,
    by ``behavior``, the current replicas)."""

    failure_threshold: int
    replicas: int
    behavior: str = "static"


@dataclass(frozen=True, slots=True)
class ScaledObject:
    """A KEDA ScaledObject, the one type every reader uses (the module's table).

    ``trigger_index`` is this scaler's trigger (the first external one, or the one asked
    for; None when it has none) and ``metadata`` that trigger's metadata as KEDA sends it, as
    strings. ``problems`` lists every rule broken, each field then holding KEDA's default.
    """

    namespace: str
    name: str
    target_kind: str = "Deployment"
    target_name: str = ""
    target_api_version: str = "apps/v1"
    hpa_name: str = (
        ""  # status.hpaName, else advanced.horizontalPodAutoscalerConfig.name, else keda-hpa-<name>
    )
    fallback_active: bool = False  # the Fallback condition is True: KEDA serves fallback replicas
    min_replica_count: int = KEDA_MIN_REPLICA_COUNT
    max_replica_count: int = KEDA_MAX_REPLICA_COUNT
    polling_interval_s: int = KEDA_POLLING_INTERVAL_S
    cooldown_period_s: int = KEDA_COOLDOWN_PERIOD_S
    idle_replica_count: int | None = None
    fallback: Fallback | None = None
    behavior: Behavior = field(default_factory=Behavior)
    scaling_formula: str = ""
    triggers: tuple[Trigger, ...] = ()
    trigger_index: int | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    written: frozenset[str] = frozenset()
    problems: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", frozen(self.metadata))

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return _reduce(self)

    def sets(self, path: str) -> bool:
        """Whether the object writes spec field ``path`` (dotted), rather than taking KEDA's default."""
        return path in self.written

    @property
    def trigger(self) -> Trigger | None:
        """This scaler's trigger, or None."""
        return None if self.trigger_index is None else self.triggers[self.trigger_index]

    def unsupported_target(self) -> str | None:
        """Why the scale target cannot be read, or None for an apps/v1 Deployment."""
        if not self.target_name:
            return f"ScaledObject {self.namespace}/{self.name} has no spec.scaleTargetRef.name"
        group = self.target_api_version.split("/")[0] if "/" in self.target_api_version else ""
        if self.target_kind != "Deployment" or group != "apps":
            return (
                f"ScaledObject {self.namespace}/{self.name} scales {self.target_kind}"
                f" {self.target_name} ({self.target_api_version}); only apps/v1 Deployments are supported"
            )
        return None


def _paths(value: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    """The dotted path of every field set (not null) in nested mappings; lists are not entered."""
    for key, inner in value.items():
        if inner is None:
            continue  # the API server prunes a null: the field is unset
        path = f"{prefix}{key}"
        yield path
        if isinstance(inner, Mapping):
            yield from _paths(inner, f"{path}.")


class _Reader:
    """Typed reads of one spec, collecting a problem per broken rule."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.spec = spec
        self.problems: list[str] = []

    def count(self, where: Mapping[str, Any], path: str, default: int, minimum: int) -> int:
        value = where.get(path.rsplit(".", 1)[-1])
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.problems.append(f"spec.{path}: {value!r} is not an integer >= {minimum} (KEDA's CRD)")
            return default
        if value < minimum:
            self.problems.append(
                f"spec.{path}: {value} is below {minimum} (KEDA's CRD: an integer >= {minimum})"
            )
            return default
        return value

    def fallback(self) -> Fallback | None:
        raw = self.spec.get("fallback")
        if raw is None:
            return None
        if not isinstance(raw, Mapping):
            self.problems.append(
                f"spec.fallback: {raw!r} is not a mapping (failureThreshold, replicas, behavior)"
            )
            return None
        before = len(self.problems)
        for key in ("failureThreshold", "replicas"):
            if raw.get(key) is None:
                self.problems.append(f"spec.fallback.{key} is required (KEDA's CRD)")
        threshold = self.count(raw, "fallback.failureThreshold", 0, 0)
        replicas = self.count(raw, "fallback.replicas", 0, 0)
        behavior = raw.get("behavior")
        if behavior is None:
            behavior = FALLBACK_BEHAVIORS[0]
        elif behavior not in FALLBACK_BEHAVIORS:
            self.problems.append(
                f"spec.fallback.behavior: {behavior!r} is not one of"
                f" {', '.join(FALLBACK_BEHAVIORS)} (KEDA's CRD)"
            )
            behavior = FALLBACK_BEHAVIORS[0]
        return None if len(self.problems) > before else Fallback(threshold, replicas, str(behavior))

    def behavior(self) -> Behavior:
        raw = as_mapping(as_mapping(self.spec.get("advanced")).get("horizontalPodAutoscalerConfig")).get(
            "behavior"
        )
        where = f"spec.{HPA_CONFIG}.behavior"
        try:
            return Behavior.from_spec(raw)
        except BehaviorError as exc:
            # BehaviorError names the field below behavior (scaleUp.selectPolicy ...) and its rule.
            text = str(exc)
            self.problems.append(f"{where}.{text}" if text.startswith("scale") else f"{where}: {text}")
        except (TypeError, ValueError) as exc:
            self.problems.append(f"{where}: not an HPA behavior ({exc})")
        return Behavior()

    def triggers(self) -> tuple[Trigger, ...]:
        raw = self.spec.get("triggers")
        if raw is not None and not isinstance(raw, list):
            self.problems.append(f"spec.triggers: {raw!r} is not a list of triggers")
            return ()
        out = []
        for index, trigger in enumerate(raw or []):
            where = f"spec.triggers[{index}]"
            if not isinstance(trigger, Mapping):
                self.problems.append(f"{where}: {trigger!r} is not a mapping with a type and metadata")
                continue
            kind = trigger.get("type")
            if not isinstance(kind, str) or not kind:
                self.problems.append(f"{where}.type is required (KEDA's CRD)")
            metadata = trigger.get("metadata")
            if metadata is not None and not isinstance(metadata, Mapping):
                self.problems.append(f"{where}.metadata: {metadata!r} is not a mapping (KEDA's CRD)")
            out.append(
                Trigger(
                    as_str(kind),
                    as_str(trigger.get("name")),
                    as_str(trigger.get("metricType")) or KEDA_TRIGGER_METRIC_TYPE,
                    {str(k): v for k, v in as_mapping(metadata).items()},
                    trigger.get("useCachedMetrics") is True,
                )
            )
        return tuple(out)


def scaledobject_from_json(
    obj: Mapping[str, Any],
    trigger_index: int | None = None,
    namespace_default: str = "",
    name_default: str = "",
    *,
    strict: bool = False,
) -> ScaledObject:
    """A ScaledObject from the API's JSON or a manifest, with KEDA's defaults (the module's table).

    This scaler's trigger is the first external one, or the one at ``trigger_index`` if that
    one is external; the defaults name a manifest that leaves namespace or name out. With
    ``strict`` a broken rule raises ScaledObjectError naming every one.
    """
    meta, spec, status = (
        as_mapping(obj.get("metadata")),
        as_mapping(obj.get("spec")),
        as_mapping(obj.get("status")),
    )
    read = _Reader(spec)
    name = as_str(meta.get("name")) or name_default
    ref = as_mapping(spec.get("scaleTargetRef"))
    configured_hpa = as_str(
        as_mapping(as_mapping(spec.get("advanced")).get("horizontalPodAutoscalerConfig")).get("name")
    )
    low = read.count(spec, "minReplicaCount", KEDA_MIN_REPLICA_COUNT, 0)
    high = read.count(spec, "maxReplicaCount", KEDA_MAX_REPLICA_COUNT, 1)
    if low > high:
        unset = "" if spec.get("maxReplicaCount") is not None else " (KEDA's default)"
        read.problems.append(
            f"spec.minReplicaCount: {low} is above maxReplicaCount {high}{unset}"
            " (KEDA's CRD: minReplicaCount <= maxReplicaCount)"
        )
    idle = spec.get("idleReplicaCount")
    triggers = read.triggers()
    external = [i for i, t in enumerate(triggers) if t.external and trigger_index in (None, i)]
    index = external[0] if external else None
    formula = as_mapping(as_mapping(spec.get("advanced")).get("scalingModifiers")).get("formula")
    so = ScaledObject(
        namespace=as_str(meta.get("namespace")) or namespace_default,
        name=name,
        # KEDA's defaults for scaleTargetRef: kind Deployment, apiVersion apps/v1.
        target_kind=as_str(ref.get("kind")) or "Deployment",
        target_name=as_str(ref.get("name")),
        target_api_version=as_str(ref.get("apiVersion")) or "apps/v1",
        hpa_name=as_str(status.get("hpaName")) or configured_hpa or f"keda-hpa-{name}",
        fallback_active=any(
            as_str(c.get("type")) == "Fallback" and as_str(c.get("status")) == "True"
            for c in as_items(status.get("conditions"))
        ),
        min_replica_count=low,
        max_replica_count=high,
        polling_interval_s=read.count(spec, "pollingInterval", KEDA_POLLING_INTERVAL_S, 1),
        cooldown_period_s=read.count(spec, "cooldownPeriod", KEDA_COOLDOWN_PERIOD_S, 0),
        idle_replica_count=None if idle is None else read.count(spec, "idleReplicaCount", 0, 0),
        fallback=read.fallback(),
        behavior=read.behavior(),
        scaling_formula=as_str(formula),
        triggers=triggers,
        trigger_index=index,
        metadata={} if index is None else {k: str(v) for k, v in triggers[index].metadata.items()},
        written=frozenset(_paths(spec)),
        problems=tuple(read.problems),
    )
    if strict and so.problems:
        raise ScaledObjectError("; ".join(so.problems))
    return so
