"""The checks of how a workload is scaled: triggers, replica bounds, HPAs, tolerance, scraping."""

from __future__ import annotations

from collections.abc import Iterable

from scaler.adoption.doctor.objects import (
    Cluster,
    Finding,
    Options,
    inference_deployments,
    key_of,
    meta_of,
    our_trigger,
    policy_of,
    so_key,
    targets_of,
)
from scaler.hpa import SEVERAL_TRIGGERS
from scaler.manifest import TRANSFER_HPA_OWNERSHIP
from scaler.presets import GPU_UTILISATION

TOLERANCE_DEFAULT_ON = (1, 35)  # KEP-4951: beta, on by default (alpha behind a gate in 1.33)


def check_triggers(cluster: Cluster, options: Options) -> Iterable[Finding]:
    """several-triggers and utilisation-trigger findings from the ScaledObjects' triggers."""
    inference = inference_deployments(cluster)
    targets = {id(so): key for key, so in targets_of(cluster.scaledobjects).items()}
    for so in cluster.scaledobjects:
        triggers = so.triggers
        where = f"ScaledObject {so_key(so)}"
        ours = our_trigger(so)
        if ours is not None and len(triggers) > 1:
            policy = policy_of(ours[1])
            others = ", ".join(t.type for i, t in enumerate(triggers) if i != ours[0])
            gate = policy is None or policy.gpu_check
            yield Finding(
                "error" if gate else "warning",
                "several-triggers",
                where,
                f"this scaler's trigger plus {others}: {SEVERAL_TRIGGERS}",
                "keep only this scaler's trigger (scaler convert folds cron and queue triggers into it)",
            )
        if targets.get(id(so)) not in inference:
            continue
        for trigger in triggers:
            kind = trigger.type
            query = str(trigger.metadata.get("query", ""))
            if kind in ("cpu", "memory") or (kind == "prometheus" and GPU_UTILISATION.search(query)):
                what = "GPU utilisation" if kind == "prometheus" else f"{kind} utilisation"
                yield Finding(
                    "error",
                    "utilisation-trigger",
                    where,
                    f"scales an inference workload on {what}: it lags the queue and cannot see"
                    " requests waiting",
                    "scale on the queue and token load with this scaler's trigger (scaler convert)",
                )


def check_bounds(cluster: Cluster, options: Options) -> Iterable[Finding]:
    """scale-to-zero and bounds-disagree findings from the ScaledObjects' replica bounds."""
    inference = inference_deployments(cluster)
    for key, so in targets_of(cluster.scaledobjects).items():
        where = f"ScaledObject {so_key(so)}"
        low, high = so.min_replica_count, so.max_replica_count
        if key in inference and low == 0:
            yield Finding(
                "error",
                "scale-to-zero",
                where,
                "minReplicaCount is 0"
                + ("" if so.sets("minReplicaCount") else " (KEDA's default)")
                + ": the next request after a lull waits a whole cold start",
                "set minReplicaCount to 1 or more (and minReplicas to the same)",
            )
        ours = our_trigger(so)
        policy = policy_of(ours[1]) if ours is not None else None
        if policy is not None and (policy.min_replicas, policy.max_replicas) != (low, high):
            yield Finding(
                "error",
                "bounds-disagree",
                where,
                f"minReplicaCount/maxReplicaCount {low}/{high} but the trigger's minReplicas/maxReplicas"
                f" {policy.min_replicas}/{policy.max_replicas}: KEDA clamps what the scaler decides,"
                " so its floor, pre-warm and GPU check reason about bounds that do not hold",
                "write the same numbers in both places",
            )


def check_hpas(cluster: Cluster, options: Options) -> Iterable[Finding]:
    """utilisation-trigger findings: HPAs scaling inference on CPU, memory or GPU utilisation."""
    inference = inference_deployments(cluster)
    for hpa in cluster.hpas:
        spec = hpa.get("spec") or {}
        ref = spec.get("scaleTargetRef") or {}
        if f"{meta_of(hpa).get('namespace', '')}/{ref.get('name', '')}" not in inference:
            continue
        for metric in spec.get("metrics") or []:
            kind = str(metric.get("type") or "")
            # autoscaling/v2 keeps each metric's source under its type's camelCase key.
            body = (metric.get(kind[:1].lower() + kind[1:]) or {}) if kind else {}
            name = str(body.get("name") or (body.get("metric") or {}).get("name") or "")
            if (kind in ("Resource", "ContainerResource") and name in ("cpu", "memory")) or (
                GPU_UTILISATION.search(name)
            ):
                yield Finding(
                    "error",
                    "utilisation-trigger",
                    f"HorizontalPodAutoscaler {key_of(hpa)}",
                    f"scales the inference Deployment {ref.get('name')} on {kind} metric {name}:"
                    " utilisation lags the queue and cannot see requests waiting",
                    "scale it with a ScaledObject and this scaler's trigger instead",
                )


def check_foreign_hpas(cluster: Cluster, options: Options) -> Iterable[Finding]:
    """hpa-not-owned findings: an HPA on a ScaledObject's target that is not the ScaledObject's own.

    A ScaledObject's HPA is the one it names (``status.hpaName``, else
    ``advanced.horizontalPodAutoscalerConfig.name``, else ``keda-hpa-<name>``); any other HPA on the
    same Deployment is one KEDA does not own. KEDA 2.21.1 manages only the HPAs it owns
    (kedacore/keda#8374), so that one stays, scaling the same pods as KEDA's.
    """
    targets = targets_of(cluster.scaledobjects)
    for hpa in cluster.hpas:
        ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
        if str(ref.get("kind") or "Deployment") != "Deployment":
            continue
        so = targets.get(f"{meta_of(hpa).get('namespace', '')}/{ref.get('name', '')}")
        name = str(meta_of(hpa).get("name", ""))
        if so is None or name == so.hpa_name:
            continue
        yield Finding(
            "error",
            "hpa-not-owned",
            f"HorizontalPodAutoscaler {key_of(hpa)}",
            f"scales Deployment {so.namespace}/{so.target_name}, which ScaledObject {so_key(so)} scales"
            f" through its own HPA {so.hpa_name}: KEDA does not own this one (KEDA 2.21.1 manages only the"
            " HPAs it owns, kedacore/keda#8374) and two HPAs on one Deployment either fight over its"
            " replicas or, where the HPA controller sees both select the same pods, neither scales",
            f"delete it, or let the ScaledObject take it over: advanced.horizontalPodAutoscalerConfig.name:"
            f' {name} and the annotation {TRANSFER_HPA_OWNERSHIP}: "true"',
        )


def check_tolerance(cluster: Cluster, options: Options) -> Iterable[Finding]:
    """hpa-tolerance findings: Kubernetes 1.35+, maxReplicaCount 10+ and no scaleUp tolerance."""
    if cluster.version is None or cluster.version < TOLERANCE_DEFAULT_ON:
        return
    for so in cluster.scaledobjects:
        if our_trigger(so) is None:
            continue
        tolerance = so.sets("advanced.horizontalPodAutoscalerConfig.behavior.scaleUp.tolerance")
        if so.max_replica_count >= 10 and not tolerance:
            yield Finding(
                "warning",
                "hpa-tolerance",
                f"ScaledObject {so_key(so)}",
                f"Kubernetes {cluster.version[0]}.{cluster.version[1]} takes a per-HPA tolerance but none is"
                " set: from 10 replicas the HPA's default 10 % swallows a step of one (the scaler then"
                " steps further than it needs to)",
                "set advanced.horizontalPodAutoscalerConfig.behavior.scaleUp.tolerance: 0 (KEDA 2.18+)",
            )


def check_scraped(cluster: Cluster, options: Options) -> Iterable[Finding]:
    """not-scraped findings from the pod counts Prometheus gave (info when it was not asked)."""
    for so in cluster.scaledobjects:
        if our_trigger(so) is None:
            continue
        key = so_key(so)
        count = cluster.scraped.get(key)
        if key not in cluster.scraped:
            continue
        where = f"ScaledObject {key}"
        if count is None:
            yield Finding(
                "info",
                "not-scraped",
                where,
                "not checked: whether Prometheus scrapes its pods",
                "run scaler doctor --prometheus URL",
            )
        elif count == 0 and key not in cluster.inert:  # where the series were probed, inert-* says more
            yield Finding(
                "error",
                "not-scraped",
                where,
                "Prometheus holds no series of its engine for its labelSelector: the scaler sees no"
                " queue and no token load, only its floor",
                "scrape the pods (a PodMonitor or prometheus.io annotations) and check labelSelector",
            )
