"""The checks of what serves: pod templates, GPU nodes, and ingress-nginx in front of inference."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scaler.adoption.doctor.objects import (
    Cluster,
    Finding,
    Options,
    containers,
    inference_deployments,
    key_of,
    meta_of,
)
from scaler.inventory import is_gpu_resource, node_from_json

INGRESS_NGINX = "nginx.ingress.kubernetes.io/"
INGRESS_NGINX_DEFAULT_TIMEOUT_S = 60.0  # ingress-nginx's proxy-read/send-timeout default


def check_pods(cluster: Cluster, options: Options) -> Iterable[Finding]:
    """no-prestop and short-grace-period findings from inference Deployments' pod templates."""
    for key, deployment in inference_deployments(cluster).items():
        where = f"Deployment {key}"
        pod_spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
        bare = [
            str(c.get("name"))
            for c in containers(deployment)
            if not (c.get("lifecycle") or {}).get("preStop")
        ]
        if bare:
            yield Finding(
                "warning",
                "no-prestop",
                where,
                f"container {', '.join(bare)} has no preStop hook: on scale-down the pod leaves the"
                " Service's endpoints while it is already stopping, and requests in flight are cut",
                "add lifecycle.preStop (e.g. sleep 10, then let the server drain on SIGTERM)",
            )
        grace = float(pod_spec.get("terminationGracePeriodSeconds", 30))
        if grace < options.max_generation_s:
            yield Finding(
                "warning",
                "short-grace-period",
                where,
                f"terminationGracePeriodSeconds {grace:g} is below the longest generation"
                f" ({options.max_generation_s:g} s): a scale-down kills generations mid-stream",
                f"set terminationGracePeriodSeconds to at least {options.max_generation_s:g}",
            )


def check_nodes(cluster: Cluster, options: Options) -> Iterable[Finding]:
    """gpu-node-untainted findings: GPU nodes without a taint that keeps other pods off."""
    for raw in cluster.nodes:
        node = node_from_json(raw)
        gpus = {r: n for r, n in node.allocatable.items() if is_gpu_resource(r) and n > 0}
        if gpus and not any(t.blocks_scheduling for t in node.taints):
            yield Finding(
                "warning",
                "gpu-node-untainted",
                f"Node {node.name}",
                f"{', '.join(f'{n} {r}' for r, n in sorted(gpus.items()))} and no NoSchedule taint: pods"
                " that need no GPU land here and take the room a scale-up needs",
                "taint it (e.g. nvidia.com/gpu=present:NoSchedule) and tolerate that in inference pods",
            )


def _seconds(value: Any, default: float) -> float:
    try:
        return float(str(value).strip().removesuffix("s"))
    except ValueError:
        return default


def check_ingresses(cluster: Cluster, options: Options) -> Iterable[Finding]:
    """ingress-read-timeout and ingress-buffering findings for ingress-nginx in front of inference."""
    namespaces = {key.split("/")[0] for key in inference_deployments(cluster)}
    for ingress in cluster.ingresses:
        meta = meta_of(ingress)
        annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
        klass = str(
            (ingress.get("spec") or {}).get("ingressClassName")
            or annotations.get("kubernetes.io/ingress.class", "")
        )
        nginx = "nginx" in klass or any(k.startswith(INGRESS_NGINX) for k in annotations)
        if not nginx or meta.get("namespace") not in namespaces:
            continue
        where = f"Ingress {key_of(ingress)}"
        for which in ("read", "send"):
            raw = annotations.get(f"{INGRESS_NGINX}proxy-{which}-timeout")
            timeout = (
                INGRESS_NGINX_DEFAULT_TIMEOUT_S
                if raw is None
                else _seconds(raw, INGRESS_NGINX_DEFAULT_TIMEOUT_S)
            )
            if timeout <= INGRESS_NGINX_DEFAULT_TIMEOUT_S:
                yield Finding(
                    "error",
                    "ingress-read-timeout",
                    where,
                    f"proxy-{which}-timeout {timeout:g} s"
                    + (" (ingress-nginx's default)" if raw is None else "")
                    + ": a generation longer than that is cut with a 504",
                    f'annotate {INGRESS_NGINX}proxy-{which}-timeout: "{options.max_generation_s:g}" or more',
                )
        if annotations.get(f"{INGRESS_NGINX}proxy-buffering", "off").lower() == "on":
            yield Finding(
                "warning",
                "ingress-buffering",
                where,
                "proxy-buffering is on: streamed tokens are held until a buffer fills, so clients see"
                " the first token late and the rest in lumps",
                f'annotate {INGRESS_NGINX}proxy-buffering: "off"',
            )
