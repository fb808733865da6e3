"""What the checks read and give: the cluster's JSON, the options, a finding; and which objects matter.

An *inference workload* (``inference_deployments``) is a Deployment that requests a GPU,
runs an image of a known inference server, or is scaled by this scaler's trigger.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from scaler.config import ALIASES, FROM_ENV_SUFFIX, KEDA_KEYS, MetadataError, TargetPolicy, parse_metadata
from scaler.inventory import ScaledObject, Trigger, deployment_from_json
from scaler.model import Inert
from scaler.presets import PRESETS, RouterQueue

Severity = Literal["error", "warning", "info"]
DEFAULT_MAX_GENERATION_S = 300.0  # the longest generation served, s (--max-generation-seconds)


@dataclass(frozen=True, slots=True)
class Finding:
    """One pitfall found: severity, check name, object (Kind namespace/name), problem and fix."""

    severity: Severity
    check: str
    object: str  # Kind namespace/name
    problem: str
    fix: str


@dataclass(frozen=True)
class Cluster:
    """What the checks read: the API's JSON as listed, the ScaledObjects as the one model."""

    nodes: Sequence[Mapping[str, Any]] = ()
    deployments: Sequence[Mapping[str, Any]] = ()
    pods: Sequence[Mapping[str, Any]] = ()
    scaledobjects: Sequence[ScaledObject] = ()  # parsed once into the one model
    hpas: Sequence[Mapping[str, Any]] = ()
    ingresses: Sequence[Mapping[str, Any]] = ()
    version: tuple[int, int] | None = None  # the API server's major.minor
    # Per ScaledObject of this scaler ("ns/name"): pods with its engine's series for its
    # labelSelector, or None when Prometheus was not asked.
    scraped: Mapping[str, int | None] = field(default_factory=dict)
    # Per ScaledObject reading only its servers' queue ("ns/name"): the routers' queue series at
    # the Prometheus it reads (absent when Prometheus was not asked).
    router_queues: Mapping[str, tuple[RouterQueue, ...]] = field(default_factory=dict)
    # DRA's and Kueue's objects (resource.k8s.io/v1, kueue.x-k8s.io), as listed
    resourceslices: Sequence[Mapping[str, Any]] = ()
    deviceclasses: Sequence[Mapping[str, Any]] = ()
    resourceclaimtemplates: Sequence[Mapping[str, Any]] = ()
    clusterqueues: Sequence[Mapping[str, Any]] = ()
    localqueues: Sequence[Mapping[str, Any]] = ()
    # Resources that could not be listed (plural -> why: "HTTP 404 ..." when not served, 403 for RBAC)
    unread: Mapping[str, str] = field(default_factory=dict)
    # Per ScaledObject of this scaler with an engine preset ("ns/name"): why it is inert, from its
    # series in Prometheus and its pods (scaler.inert); absent when Prometheus was not asked.
    inert: Mapping[str, tuple[Inert, ...]] = field(default_factory=dict)
    # Per ScaledObject: the reasons a running scaler exports as llm_scaler_inert == 1 at that Prometheus.
    inert_reported: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # The namespaces the ScaledObjects' scalerAddress names (the scaler's own): their Services,
    # Deployments and PodDisruptionBudgets, as listed (scaler.adoption.doctor.availability).
    services: Sequence[Mapping[str, Any]] = ()
    scaler_deployments: Sequence[Mapping[str, Any]] = ()
    pdbs: Sequence[Mapping[str, Any]] = ()


@dataclass(frozen=True)
class Options:
    """Settings of the checks: the longest generation served, for grace periods and timeouts."""

    max_generation_s: float = DEFAULT_MAX_GENERATION_S


def runs_an_engine(image: str) -> bool:
    """Whether a container image runs the servers of an engine in the registry (its image pattern)."""
    return any(preset.reads_image(image) for preset in PRESETS.values())


def meta_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """An object's ``metadata`` (empty when it has none)."""
    return obj.get("metadata") or {}


def key_of(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` of an object."""
    meta = meta_of(obj)
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def so_key(so: ScaledObject) -> str:
    """``namespace/name`` of a ScaledObject."""
    return f"{so.namespace}/{so.name}"


def is_this_scaler(trigger: Trigger) -> bool:
    """An external trigger whose metadata is this scaler's keys (and KEDA's) only."""
    if not trigger.external:
        return False
    keys = {k.removesuffix(FROM_ENV_SUFFIX) for k in trigger.metadata}
    return bool(keys & set(ALIASES)) and keys <= set(ALIASES) | KEDA_KEYS


def our_trigger(so: ScaledObject) -> tuple[int, Trigger] | None:
    """This scaler's trigger in a ScaledObject, with its index, or None."""
    for index, trigger in enumerate(so.triggers):
        if is_this_scaler(trigger):
            return index, trigger
    return None


def policy_of(trigger: Trigger) -> TargetPolicy | None:
    """The trigger's metadata parsed, or None when it is invalid (``*FromEnv`` keys left out)."""
    meta = {k: str(v) for k, v in trigger.metadata.items()}
    try:
        return parse_metadata({k: v for k, v in meta.items() if not k.endswith(FROM_ENV_SUFFIX)})
    except MetadataError:
        return None


def containers(deployment: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The containers of a Deployment's pod template."""
    spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    return list(spec.get("containers") or [])


def targets_of(scaledobjects: Iterable[ScaledObject]) -> dict[str, ScaledObject]:
    """ "ns/deployment" -> the ScaledObject that scales it (apps/v1 Deployments only)."""
    return {f"{so.namespace}/{so.target_name}": so for so in scaledobjects if so.unsupported_target() is None}


def inference_deployments(cluster: Cluster) -> dict[str, Mapping[str, Any]]:
    """ "ns/name" -> Deployment, for every inference workload (module docstring)."""
    targets = targets_of(cluster.scaledobjects)
    out = {}
    for deployment in cluster.deployments:
        key = key_of(deployment)
        gpus = deployment_from_json(deployment).requirement.gpus_per_replica > 0
        image = any(runs_an_engine(str(c.get("image", ""))) for c in containers(deployment))
        scaled_by_us = key in targets and our_trigger(targets[key]) is not None
        if gpus or image or scaled_by_us:
            out[key] = deployment
    return out
