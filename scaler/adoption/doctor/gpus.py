"""The checks of how GPUs are handed out: GPUs the gate cannot count (DRA), and Kueue quotas below the bounds.

``gpu-uncounted``: an inference workload whose GPUs no node offers in a way the GPU check can
count (no allocatable, no ResourceSlice device of a DeviceClass serving its request), so the
check cannot hold a scale-up; nodes that publish GPUs only through DRA which its request cannot
reach (no DeviceClass declares ``extendedResourceName`` for it: the scheduler cannot use them
either); and DRA objects the doctor could not read. ``kueue-quota``: a ScaledObject whose
Deployment Kueue admits and whose ``maxReplicaCount`` its ClusterQueue's quota can never hold
(nominal plus what it may borrow), or whose LocalQueue or ClusterQueue does not exist.
"""

from __future__ import annotations

from collections.abc import Iterable

from scaler.adoption.doctor.objects import (
    Cluster,
    Finding,
    Options,
    inference_deployments,
    so_key,
    targets_of,
)
from scaler.inventory import deployment_from_json, node_from_json, schedulable_replicas
from scaler.inventory.dra import (
    claimtemplate_from_json,
    deviceclass_from_json,
    dra_inventory,
    resourceslice_from_json,
)
from scaler.inventory.kueue import (
    ADMISSION_GATE,
    clusterqueue_from_json,
    localqueue_from_json,
    most_replicas,
)

DRA_RESOURCES = ("resourceslices", "deviceclasses", "resourceclaimtemplates")


def check_gpu_counted(cluster: Cluster, options: Options) -> Iterable[Finding]:
    """gpu-uncounted findings: GPUs the GPU check cannot count, and DRA GPUs a request cannot reach."""
    unread = {r: why for r, why in cluster.unread.items() if r in DRA_RESOURCES and "404" not in why}
    for resource, why in sorted(unread.items()):
        yield Finding(
            "warning",
            "gpu-uncounted",
            f"resource.k8s.io/{resource}",
            f"cannot be read ({why}): GPUs handed out through DRA are not counted, so on nodes that"
            " publish them only as ResourceSlices the GPU check cannot see them",
            f"grant get, list and watch on {resource} (manifests/base/rbac.yaml)",
        )
    nodes = [node_from_json(n) for n in cluster.nodes]
    dra = dra_inventory(
        [resourceslice_from_json(s) for s in cluster.resourceslices],
        [deviceclass_from_json(c) for c in cluster.deviceclasses],
        [],
        "; ".join(unread.values()) or None,
    )
    templates = {
        (t.namespace, t.name): t.requests
        for t in map(claimtemplate_from_json, cluster.resourceclaimtemplates)
    }
    dra_only = sorted(name for name, devices in dra.devices.items() if devices)
    for key, raw in inference_deployments(cluster).items():
        deployment = deployment_from_json(raw)
        requirement = deployment.requirement
        claims = [
            r for name in requirement.claim_templates for r in templates.get((deployment.namespace, name), ())
        ]
        requirement = requirement.with_claims(tuple(claims))
        if not requirement.requests_gpus or deployment.problem:
            continue
        fit = schedulable_replicas(nodes, [], requirement, dra)
        where = f"Deployment {key}"
        unserved = [r for r in requirement.gpus if dra.class_for(r) is None]
        missed = [
            n.name
            for n in nodes
            if n.name in dra_only and any(n.allocatable.get(r, 0) <= 0 for r in unserved)
        ]
        if not fit.countable:
            yield Finding(
                "warning",
                "gpu-uncounted",
                where,
                f"{fit.uncounted}: the GPU check cannot hold a scale-up of it (it fails open, and says so)",
                _fix(unserved, missed),
            )
        elif missed:
            yield Finding(
                "warning",
                "gpu-uncounted",
                where,
                f"{_nodes(missed)} GPUs only through DRA (ResourceSlices) and no DeviceClass serves"
                f" {', '.join(sorted(unserved))}: neither the scheduler nor the GPU check can use them for"
                " this workload",
                _fix(unserved, missed),
            )


def _nodes(names: list[str]) -> str:
    """``node dra-a publishes`` or ``nodes dra-a, dra-b publish`` (the first eight named)."""
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    return f"node {shown} publishes" if len(names) == 1 else f"nodes {shown} publish"


def _fix(unserved: list[str], missed: list[str]) -> str:
    if unserved and missed:
        names = ", ".join(sorted(unserved))
        return (
            f"set extendedResourceName: {names} on the DeviceClass of those devices (Kubernetes 1.36,"
            " DRAExtendedResource), or request them through a ResourceClaimTemplate in resourceClaims"
        )
    return "check that the device plugin or the DRA driver runs on the GPU nodes, and that they are Ready"


def check_kueue_quota(cluster: Cluster, options: Options) -> Iterable[Finding]:
    """kueue-quota findings: maxReplicaCount beyond what the ScaledObject's queue can ever admit."""
    if any(r in cluster.unread for r in ("clusterqueues", "localqueues")):
        return
    locals_ = {(q.namespace, q.name): q for q in map(localqueue_from_json, cluster.localqueues)}
    queues = {q.name: q for q in map(clusterqueue_from_json, cluster.clusterqueues)}
    deployments = {f"{d.namespace}/{d.name}": d for d in map(deployment_from_json, cluster.deployments)}
    for key, so in targets_of(cluster.scaledobjects).items():
        deployment = deployments.get(key)
        if deployment is None or deployment.queue_name is None:
            continue
        where = f"ScaledObject {so_key(so)}"
        local = locals_.get((deployment.namespace, deployment.queue_name))
        queue = queues.get(local.cluster_queue) if local is not None else None
        if queue is None:
            missing = (
                f"LocalQueue {deployment.namespace}/{deployment.queue_name}"
                if local is None
                else f"ClusterQueue {local.cluster_queue}"
            )
            yield Finding(
                "error",
                "kueue-quota",
                where,
                f"its pods name Kueue queue {deployment.queue_name} and {missing} does not exist: every new"
                f" replica waits behind {ADMISSION_GATE}",
                f"create {missing}, or fix the kueue.x-k8s.io/queue-name label",
            )
            continue
        need = dict(deployment.requirement.gpus)
        if not need:
            continue
        most = most_replicas(queue, queues.values(), need)
        if so.max_replica_count > most:
            per = " + ".join(f"{n} {r}" for r, n in sorted(need.items()))
            yield Finding(
                "warning",
                "kueue-quota",
                where,
                f"maxReplicaCount {so.max_replica_count} exceeds what ClusterQueue {queue.name} can ever"
                f" admit: {most} replicas of {per} (nominal quota plus what it may borrow); the replicas"
                f" past it wait behind {ADMISSION_GATE}, and the scaler clamps to the quota (kueue_quota)",
                f"set maxReplicaCount (and maxReplicas) to {most}, or raise the ClusterQueue's nominalQuota"
                " or borrowingLimit",
            )
