"""The checks of the scaler's own availability, which every ScaledObject it serves depends on.

KEDA's ``fallback`` does not fire when an external scaler is unreachable (kedacore/keda#8056,
open: ``GetMetricSpec`` fails before the failure counter is incremented), so every fleet's
replica count freezes while no replica of the scaler answers. These checks find the scaler from
the ScaledObjects' ``scalerAddress`` (``SERVICE.NAMESPACE[.svc...]:PORT``), the Deployment whose
pods its Service selects, and say whether two replicas are Ready, a PodDisruptionBudget keeps one
through a drain and the replicas are spread over nodes; and whether each ScaledObject sets
``fallback`` for the case it does cover (``GetMetrics`` answering ``UNAVAILABLE`` on stale inputs).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scaler.adoption.doctor.objects import Cluster, Finding, Options, key_of, meta_of, our_trigger, so_key
from scaler.inventory import ScaledObject, SelectorError, label_selector_from_json

MIN_READY = 2  # one replica restarting must leave one answering KEDA
UNREACHABLE = (
    "KEDA's fallback does not fire for an unreachable scaler (kedacore/keda#8056): while no replica"
    " answers, every ScaledObject it serves keeps the replicas it has"
)


@dataclass(frozen=True, slots=True)
class ScalerService:
    """Where ScaledObjects reach the scaler: a Service by namespace and name, and who points there."""

    namespace: str
    name: str
    scaledobjects: tuple[str, ...]  # "ns/name" of each ScaledObject whose scalerAddress names it

    @property
    def key(self) -> str:
        """``namespace/name`` of the Service."""
        return f"{self.namespace}/{self.name}"


def service_of(address: str, namespace: str) -> tuple[str, str] | None:
    """The Service (namespace, name) a ``scalerAddress`` names in-cluster, or None when it is not
    a Service's DNS name (an IP address, a name outside the cluster's ``svc`` domain).

    *Example*: ``llm-gpu-scaler.llm-gpu-scaler.svc.cluster.local:9090`` is
    ``("llm-gpu-scaler", "llm-gpu-scaler")``; ``llm-gpu-scaler:9090`` from a ScaledObject in
    ``inference`` is ``("inference", "llm-gpu-scaler")``.
    """
    host = address.split("://", 1)[-1].lstrip("/")
    if host.startswith("["):  # [IPv6]:PORT
        host = host[1 : host.find("]")]
    elif host.count(":") == 1:
        host = host.rsplit(":", 1)[0]
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return None
    labels = host.split(".")
    if len(labels) == 1:
        return namespace, labels[0]
    if len(labels) == 2 or labels[2] == "svc":
        return labels[1], labels[0]
    return None


def scaler_services(scaledobjects: Iterable[ScaledObject]) -> tuple[list[ScalerService], list[str]]:
    """The Services this scaler's ScaledObjects name in their ``scalerAddress``, and the ScaledObjects
    whose address names none (an IP address, a name outside the cluster)."""
    found: dict[tuple[str, str], list[str]] = {}
    elsewhere = []
    for so in scaledobjects:
        ours = our_trigger(so)
        if ours is None:
            continue
        address = str(ours[1].metadata.get("scalerAddress", ""))
        service = service_of(address, so.namespace) if address else None
        if service is None:
            elsewhere.append(so_key(so))
        else:
            found.setdefault(service, []).append(so_key(so))
    services = [ScalerService(ns, name, tuple(keys)) for (ns, name), keys in sorted(found.items())]
    return services, elsewhere


def scaler_namespaces(scaledobjects: Iterable[ScaledObject]) -> list[str]:
    """The namespaces of the Services the ScaledObjects reach the scaler through (read for these checks)."""
    return sorted({s.namespace for s in scaler_services(scaledobjects)[0]})


def _template_labels(deployment: Mapping[str, Any]) -> dict[str, str]:
    template = (deployment.get("spec") or {}).get("template") or {}
    return {str(k): str(v) for k, v in ((template.get("metadata") or {}).get("labels") or {}).items()}


def _selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether a LabelSelector's JSON (``matchLabels``, ``matchExpressions``) selects ``labels``; an
    unreadable or empty one selects nothing here."""
    try:
        parsed = label_selector_from_json(selector)
    except SelectorError:
        return False
    return not parsed.empty and parsed.matches(labels)


def _protects(pdb: Mapping[str, Any], replicas: int) -> bool:
    """Whether a PodDisruptionBudget keeps at least one of ``replicas`` pods through a drain."""
    spec = pdb.get("spec") or {}
    low, high = spec.get("minAvailable"), spec.get("maxUnavailable")
    if low is not None:
        return str(low) not in ("0", "0%")
    if high is not None:
        if isinstance(high, str) and high.endswith("%"):
            return high != "100%"
        return int(high) < replicas
    return False


def _spread(deployment: Mapping[str, Any]) -> bool:
    """Whether a Deployment's pods are kept apart: a topology spread constraint or pod anti-affinity."""
    spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    return bool(spec.get("topologySpreadConstraints")) or bool(
        (spec.get("affinity") or {}).get("podAntiAffinity")
    )


def _serving(service: ScalerService) -> str:
    count = len(service.scaledobjects)
    return f"{count} ScaledObject{'s' if count != 1 else ''} ({', '.join(service.scaledobjects)})"


def check_scaler(cluster: Cluster, options: Options) -> Iterable[Finding]:
    """scaler-missing, scaler-replicas, scaler-disruption-budget, scaler-spread and (info)
    scaler-availability findings, for each Service the ScaledObjects reach the scaler through."""
    services, elsewhere = scaler_services(cluster.scaledobjects)
    for key in elsewhere:
        yield Finding(
            "info",
            "scaler-availability",
            f"ScaledObject {key}",
            "not checked: its scalerAddress names no Service in the cluster, so whether the scaler runs"
            " two replicas cannot be seen",
            "point scalerAddress at the scaler's Service (SERVICE.NAMESPACE.svc:PORT)",
        )
    unread = [p for p in ("services", "deployments", "poddisruptionbudgets") if p in cluster.unread]
    for service in services:
        where = f"Service {service.key}"
        if unread:
            yield Finding(
                "info",
                "scaler-availability",
                where,
                "not checked: " + "; ".join(f"{p} could not be listed ({cluster.unread[p]})" for p in unread),
                "let doctor's account list services, deployments and poddisruptionbudgets in the scaler's"
                " namespace",
            )
            continue
        found = next((s for s in cluster.services if key_of(s) == service.key), None)
        if found is None:
            yield Finding(
                "error",
                "scaler-missing",
                where,
                f"the scalerAddress of {_serving(service)} names this Service, which does not exist:"
                f" {UNREACHABLE}",
                "deploy the scaler (manifests/) or correct scalerAddress",
            )
            continue
        selector = {"matchLabels": (found.get("spec") or {}).get("selector") or {}}
        deployments = [
            d
            for d in cluster.scaler_deployments
            if meta_of(d).get("namespace") == service.namespace and _selects(selector, _template_labels(d))
        ]
        if not deployments:
            yield Finding(
                "error",
                "scaler-missing",
                where,
                f"no Deployment's pods are selected by this Service, which {_serving(service)} reach the"
                f" scaler through: {UNREACHABLE}",
                "deploy the scaler (manifests/) or correct the Service's selector",
            )
        for deployment in deployments:
            yield from _deployment_findings(cluster, deployment, service)


def _deployment_findings(
    cluster: Cluster, deployment: Mapping[str, Any], service: ScalerService
) -> Iterable[Finding]:
    where = f"Deployment {key_of(deployment)}"
    ready = int((deployment.get("status") or {}).get("readyReplicas") or 0)
    wanted = int((deployment.get("spec") or {}).get("replicas", 1) or 0)
    if ready < MIN_READY:
        yield Finding(
            "error",
            "scaler-replicas",
            where,
            f"{ready} Ready replica{'s' if ready != 1 else ''} of the scaler ({wanted} wanted), which"
            f" {_serving(service)} depend on: {UNREACHABLE}, so one restart, eviction or crash"
            " freezes them all",
            f"run at least {MIN_READY} Ready replicas (manifests/base/deployment.yaml)",
        )
    labels = _template_labels(deployment)
    namespace = meta_of(deployment).get("namespace")
    budgets = [
        p
        for p in cluster.pdbs
        if meta_of(p).get("namespace") == namespace
        and _selects((p.get("spec") or {}).get("selector") or {}, labels)
    ]
    if not any(_protects(p, max(wanted, ready)) for p in budgets):
        yield Finding(
            "warning",
            "scaler-disruption-budget",
            where,
            "no PodDisruptionBudget keeps a replica of the scaler through a node drain"
            + (f" ({', '.join(key_of(p) for p in budgets)} allows every pod to go)" if budgets else "")
            + f": a drain may evict them all at once, and {UNREACHABLE}",
            "add a PodDisruptionBudget with minAvailable: 1 (manifests/base/poddisruptionbudget.yaml)",
        )
    if not _spread(deployment):
        yield Finding(
            "warning",
            "scaler-spread",
            where,
            "its pods have no topologySpreadConstraints or podAntiAffinity: the replicas may share a node,"
            f" and that node's loss takes them all; {UNREACHABLE}",
            "spread them over nodes (topologySpreadConstraints on kubernetes.io/hostname, as"
            " manifests/base/deployment.yaml does)",
        )


def check_fallback(cluster: Cluster, options: Options) -> Iterable[Finding]:
    """no-fallback findings: ScaledObjects of this scaler without ``spec.fallback``."""
    for so in cluster.scaledobjects:
        if our_trigger(so) is None or so.fallback is not None:
            continue
        yield Finding(
            "warning",
            "no-fallback",
            f"ScaledObject {so_key(so)}",
            "no spec.fallback: when the scaler's inputs are older than maxStalenessSeconds it answers"
            " UNAVAILABLE, and without fallback KEDA keeps the replicas it has through the outage",
            "set fallback (failureThreshold: 4, replicas: at least minReplicaCount, behavior:"
            " currentReplicasIfHigher; scaler convert adds it)",
        )
