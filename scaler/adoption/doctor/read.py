"""The I/O: the cluster through the real Kubernetes client, and Prometheus for the pods it scrapes.

Read-only: ``get``/``list`` of Nodes, Pods, Deployments, ScaledObjects, HPAs and Ingresses, and
``/version``; the Services, Deployments and PodDisruptionBudgets of the namespaces the
ScaledObjects' ``scalerAddress`` names (the scaler's own); DRA's ResourceSlices, DeviceClasses
and ResourceClaimTemplates and Kueue's ClusterQueues and LocalQueues where the cluster serves
them (a 404 or 403 is noted, not fatal); with ``--prometheus``, one instant query per
ScaledObject of this scaler (the pods scraped), one per router and Prometheus address (the
routers' queue series), the series probe of the inert reasons (``scaler.sources.probe``: a few
queries per Prometheus address and engine, at Prometheus' own time) and the reasons a running
scaler exports (``llm_scaler_inert``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from scaler.adoption.doctor.availability import scaler_namespaces as scaler_namespaces_of
from scaler.adoption.doctor.objects import Cluster, our_trigger, policy_of, so_key
from scaler.adoption.doctor.stacks import engine_queue_only
from scaler.cli.args import prometheus_over
from scaler.inert import Pods, layout_reasons
from scaler.inventory import ScaledObject, Unknown, deployment_from_json, pod_from_json, workload_state
from scaler.model import Inert
from scaler.presets import RouterQueue, preset_for


def read_cluster(kubeconfig: str | None, namespace: str | None) -> Cluster:
    """List what the checks read, through the real client (raw JSON; ScaledObjects parsed once)."""
    from kubernetes import client

    from scaler.inventory import scaledobject_from_json
    from scaler.sources.kubeprobe import check_reachable
    from scaler.sources.kubernetes import KUEUE_GROUP, KUEUE_VERSIONS, ServedVersion, api_client

    api = api_client(kubeconfig)
    check_reachable(
        api, f"kubeconfig {kubeconfig}" if kubeconfig else "the default kubeconfig or in-cluster account"
    )
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    autoscaling, networking = client.AutoscalingV2Api(api), client.NetworkingV1Api(api)
    custom = client.CustomObjectsApi(api)

    def raw(call: Callable[..., Any], *args: Any) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(call(*args, _preload_content=False).data)
        return body

    def items(namespaced: Callable[..., Any], everywhere: Callable[..., Any], *args: Any) -> list[Any]:
        body = raw(namespaced, *args, namespace) if namespace else raw(everywhere, *args)
        return list(body.get("items") or [])

    unread: dict[str, str] = {}

    def optional(plural: str, call: Callable[..., Any], *args: Any) -> list[Any]:
        from kubernetes.client.exceptions import ApiException

        from scaler.sources.reflector import describe

        try:
            return list(raw(call, *args).get("items") or [])
        except ApiException as exc:
            if exc.status not in (403, 404):
                raise
            unread[plural] = describe(exc)
            return []

    resource = client.ResourceV1Api(api)
    # Kueue's queues at the first version served (v1beta2, else v1beta1), as the inventory reads them.
    queues, local = (
        ServedVersion(custom, KUEUE_GROUP, p, KUEUE_VERSIONS) for p in ("clusterqueues", "localqueues")
    )
    version = raw(client.VersionApi(api).get_code)
    major = int(re.sub(r"\D", "", str(version.get("major", ""))) or 0)
    minor = int(re.sub(r"\D", "", str(version.get("minor", ""))) or 0)
    keda = ("keda.sh", "v1alpha1")
    scaledobjects = [
        scaledobject_from_json(so)
        for so in items(
            lambda ns, **kw: custom.list_namespaced_custom_object(*keda, ns, "scaledobjects", **kw),
            lambda **kw: custom.list_cluster_custom_object(*keda, "scaledobjects", **kw),
        )
    ]
    # The scaler's own namespaces, whichever --namespace says: its Services, Deployments, budgets.
    policy = client.PolicyV1Api(api)
    scaler_namespaces = scaler_namespaces_of(scaledobjects)
    services, scaler_deployments, pdbs = (
        [obj for ns in scaler_namespaces for obj in optional(plural, call, ns)]
        for plural, call in (
            ("services", core.list_namespaced_service),
            ("deployments", apps.list_namespaced_deployment),
            ("poddisruptionbudgets", policy.list_namespaced_pod_disruption_budget),
        )
    )
    return Cluster(
        nodes=list(raw(core.list_node).get("items") or []),
        deployments=items(apps.list_namespaced_deployment, apps.list_deployment_for_all_namespaces),
        pods=items(core.list_namespaced_pod, core.list_pod_for_all_namespaces),
        scaledobjects=scaledobjects,
        services=services,
        scaler_deployments=scaler_deployments,
        pdbs=pdbs,
        hpas=items(
            autoscaling.list_namespaced_horizontal_pod_autoscaler,
            autoscaling.list_horizontal_pod_autoscaler_for_all_namespaces,
        ),
        ingresses=items(networking.list_namespaced_ingress, networking.list_ingress_for_all_namespaces),
        version=(major, minor),
        resourceslices=optional("resourceslices", resource.list_resource_slice),
        deviceclasses=optional("deviceclasses", resource.list_device_class),
        resourceclaimtemplates=optional(
            "resourceclaimtemplates", resource.list_resource_claim_template_for_all_namespaces
        ),
        clusterqueues=optional("clusterqueues", queues),
        localqueues=optional("localqueues", local),
        unread=unread,
    )


def scraped_pods(cluster: Cluster, prometheus: str | None) -> dict[str, int | None]:
    """Per ScaledObject of this scaler: pods with its engine's series for its labelSelector (and role)."""
    from scaler.sources.prometheus import PrometheusClient

    out: dict[str, int | None] = {}
    prom = PrometheusClient(prometheus) if prometheus else None
    for so in cluster.scaledobjects:
        ours = our_trigger(so)
        policy = policy_of(ours[1]) if ours is not None else None
        preset = preset_for(policy.engine) if policy is not None else None
        family = preset.family("replicas_reporting") if preset is not None else None
        if policy is None or family is None:
            continue  # engine: custom (or invalid metadata): nothing to count by
        if prom is None:
            out[so_key(so)] = None
            continue
        matchers = policy.series_matchers  # the labelSelector's and, with a role, the role's
        by = tuple(sorted({m.name for m in matchers}))
        # --prometheus wins over the trigger's prometheusAddress (scaler.cli.args, every command's rule).
        prometheus_over("scaler doctor", prometheus, policy.prometheus_address, so_key(so))
        samples = prom.instant(family.render(by, "1m"))
        out[so_key(so)] = int(sum(s.value for s in samples if all(m.matches(s.labels) for m in matchers)))
    return out


def router_queues(cluster: Cluster, prometheus: str | None) -> dict[str, tuple[RouterQueue, ...]]:
    """Per ScaledObject that reads only its servers' queue: the routers' queue series in
    ``prometheus`` (one query per router), when it is given; it wins over each trigger's
    prometheusAddress, as in ``scraped_pods``."""
    from scaler.sources.prometheus import router_queues as read_router_queues

    reading = [so_key(so) for so in cluster.scaledobjects if engine_queue_only(so) is not None]
    if prometheus is None or not reading:
        return {}
    queues = tuple(read_router_queues(prometheus))
    return dict.fromkeys(reading, queues)


def _pods(cluster: Cluster, so: ScaledObject) -> Pods | None:
    """The pods of the Deployment ``so`` scales, as the scaler's inventory counts them."""
    deployment = next(
        (
            deployment_from_json(d)
            for d in cluster.deployments
            if (d.get("metadata") or {}).get("namespace") == so.namespace
            and (d.get("metadata") or {}).get("name") == so.target_name
        ),
        None,
    )
    if deployment is None or so.unsupported_target() is not None:
        return None
    pods = [
        pod_from_json(p) for p in cluster.pods if (p.get("metadata") or {}).get("namespace") == so.namespace
    ]
    state = workload_state(so, deployment, pods, (), ())
    if isinstance(state, Unknown):
        return None
    return Pods(so.namespace, state.deployment, state.ready_pods, state.namespace_pods)


def inert_reasons(cluster: Cluster, prometheus: str | None) -> dict[str, tuple[Inert, ...]]:
    """Per ScaledObject of this scaler with an engine preset: why it is inert, from what its
    Prometheus holds of its series (``scaler.sources.probe``) and its pods, at Prometheus' own time."""
    from datetime import UTC, datetime

    from scaler.sources.probe import SeriesProbe
    from scaler.sources.prometheus import PrometheusReader, TargetQuery

    if prometheus is None:
        return {}
    reader = PrometheusReader(prometheus)
    queries, pods = [], {}
    for so in cluster.scaledobjects:
        ours = our_trigger(so)
        policy = policy_of(ours[1]) if ours is not None else None
        if policy is None or preset_for(policy.engine) is None:
            continue  # engine: custom (or invalid metadata): no preset's series to look for
        address = prometheus.rstrip("/")  # --prometheus wins over prometheusAddress, as above
        queries.append(TargetQuery(so_key(so), policy, address, so.namespace))
        pods[so_key(so)] = _pods(cluster, so)
    if not queries:
        return {}
    (now,) = reader.client(reader.default_address or prometheus).instant("vector(time())")
    at = datetime.fromtimestamp(now.value, tz=UTC)
    return {
        key: layout_reasons(layout, now.value, pods[key], key.split("/", 1)[0]).reasons
        for key, layout in SeriesProbe(reader).layouts(queries, at).items()
    }


def inert_reported(prometheus: str | None) -> dict[str, tuple[str, ...]]:
    """Per ScaledObject: the reasons a running scaler exports as ``llm_scaler_inert == 1``."""
    from scaler.sources.prometheus import PrometheusClient

    if prometheus is None:
        return {}
    out: dict[str, list[str]] = {}
    query = "max by (namespace, scaledobject, reason) (llm_scaler_inert == 1)"
    for sample in PrometheusClient(prometheus).instant(query):
        key = f"{sample.labels.get('namespace', '')}/{sample.labels.get('scaledobject', '')}"
        out.setdefault(key, []).append(sample.labels.get("reason", ""))
    return {key: tuple(sorted(reasons)) for key, reasons in out.items()}
