"""``scaler doctor``: read a cluster and name the pitfalls that make LLM latency bad.

Read-only: it lists Nodes, Deployments, ScaledObjects, HorizontalPodAutoscalers and
Ingresses (``get``/``list``, the scaler's ClusterRole plus ``ingresses`` in
``networking.k8s.io``) and reads ``/version``; with ``--prometheus`` it also runs one
instant query per ScaledObject of this scaler. Each finding is a row: severity, object,
what is wrong, the fix. ``error`` findings make the exit status 1.

The checks (``CHECKS``; every one is a pure function of the API's JSON):

========================  ========  ===================================================
check                     severity  finding
========================  ========  ===================================================
several-triggers          error     a ScaledObject with this scaler's trigger and others:
                                    the HPA takes the largest metric, so the GPU check
                                    cannot hold a scale-up (warning with gpuCheck false)
utilisation-trigger       error     an inference workload scaled on CPU, memory or GPU
                                    utilisation (a ScaledObject trigger or an HPA metric)
scale-to-zero             error     ``minReplicaCount`` 0 (KEDA's default) on an inference
                                    workload: a cold start on the next request
bounds-disagree           error     ``minReplicaCount``/``maxReplicaCount`` differ from the
                                    trigger's ``minReplicas``/``maxReplicas``
no-prestop                warning   an inference container without a ``preStop`` hook: a
                                    scale-down cuts requests in flight
short-grace-period        warning   ``terminationGracePeriodSeconds`` below the longest
                                    generation (``--max-generation-seconds``, 300)
gpu-node-untainted        warning   a GPU node with no NoSchedule taint: other workloads
                                    take the GPUs a scale-up needs
ingress-read-timeout      error     an ingress-nginx Ingress in front of inference with a
                                    proxy read or send timeout of 60 s or less (the
                                    default is 60): long generations are cut
ingress-buffering         warning   ``proxy-buffering: "on"``: streamed tokens arrive in
                                    lumps and TTFT as the client sees it grows
hpa-tolerance             warning   Kubernetes 1.35+ (per-HPA tolerance on by default),
                                    ``maxReplicaCount`` of 10 or more and no
                                    ``scaleUp.tolerance``: the HPA's 10 % swallows a step
                                    of one replica
not-scraped               error     Prometheus has no series of the ScaledObject's engine
                                    for its ``labelSelector`` (info when not checked)
========================  ========  ===================================================

An *inference workload* is a Deployment that requests a GPU, runs an image of a known
inference server (vLLM, SGLang, TGI, Triton, TensorRT-LLM), or is scaled by this scaler.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from scaler.config import ALIASES, FROM_ENV_SUFFIX, KEDA_KEYS, MetadataError, TargetPolicy, parse_metadata
from scaler.hpa import SEVERAL_TRIGGERS
from scaler.inventory import deployment_from_json, is_gpu_resource, node_from_json, scaledobject_from_json
from scaler.inventory.objects import KEDA_MAX_REPLICA_COUNT, KEDA_MIN_REPLICA_COUNT
from scaler.sources.presets import GPU_UTILISATION, preset_for

Severity = Literal["error", "warning", "info"]
DEFAULT_MAX_GENERATION_S = 300.0
INGRESS_NGINX = "nginx.ingress.kubernetes.io/"
INGRESS_NGINX_DEFAULT_TIMEOUT_S = 60.0  # ingress-nginx's proxy-read/send-timeout default
TOLERANCE_DEFAULT_ON = (1, 35)  # KEP-4951: beta, on by default (alpha behind a gate in 1.33)
_INFERENCE_IMAGE = re.compile(r"vllm|sglang|text-generation-inference|tritonserver|tensorrt", re.I)


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
    """What the checks read: the API's JSON, as listed."""

    nodes: Sequence[Mapping[str, Any]] = ()
    deployments: Sequence[Mapping[str, Any]] = ()
    scaledobjects: Sequence[Mapping[str, Any]] = ()
    hpas: Sequence[Mapping[str, Any]] = ()
    ingresses: Sequence[Mapping[str, Any]] = ()
    version: tuple[int, int] | None = None  # the API server's major.minor
    # Per ScaledObject of this scaler ("ns/name"): pods with its engine's series for its
    # labelSelector, or None when Prometheus was not asked.
    scraped: Mapping[str, int | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Options:
    """Settings of the checks: the longest generation served, for grace periods and timeouts."""

    max_generation_s: float = DEFAULT_MAX_GENERATION_S


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _key(obj: Mapping[str, Any]) -> str:
    meta = _meta(obj)
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def is_this_scaler(trigger: Mapping[str, Any]) -> bool:
    """An external trigger whose metadata is this scaler's keys (and KEDA's) only."""
    if trigger.get("type") not in ("external", "external-push"):
        return False
    keys = {k.removesuffix(FROM_ENV_SUFFIX) for k in (trigger.get("metadata") or {})}
    return bool(keys & set(ALIASES)) and keys <= set(ALIASES) | KEDA_KEYS


def _ours(so: Mapping[str, Any]) -> tuple[int, Mapping[str, Any]] | None:
    for index, trigger in enumerate((so.get("spec") or {}).get("triggers") or []):
        if is_this_scaler(trigger):
            return index, trigger
    return None


def _policy(trigger: Mapping[str, Any]) -> TargetPolicy | None:
    meta = {str(k): str(v) for k, v in (trigger.get("metadata") or {}).items()}
    try:
        return parse_metadata({k: v for k, v in meta.items() if not k.endswith(FROM_ENV_SUFFIX)})
    except MetadataError:
        return None


def _containers(deployment: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    return list(spec.get("containers") or [])


def _targets(scaledobjects: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """ "ns/deployment" -> the ScaledObject that scales it (apps/v1 Deployments only)."""
    out = {}
    for so in scaledobjects:
        parsed = scaledobject_from_json(so)  # KEDA's defaults for scaleTargetRef, read once
        if parsed.unsupported_target() is None:
            out[f"{parsed.namespace}/{parsed.target_name}"] = so
    return out


def inference_deployments(cluster: Cluster) -> dict[str, Mapping[str, Any]]:
    """ "ns/name" -> Deployment, for every inference workload (module docstring)."""
    targets = _targets(cluster.scaledobjects)
    out = {}
    for deployment in cluster.deployments:
        key = _key(deployment)
        gpus = deployment_from_json(deployment).requirement.gpus_per_replica > 0
        image = any(_INFERENCE_IMAGE.search(str(c.get("image", ""))) for c in _containers(deployment))
        scaled_by_us = key in targets and _ours(targets[key]) is not None
        if gpus or image or scaled_by_us:
            out[key] = deployment
    return out


# ---- the checks --------------------------------------------------------------------------


def check_triggers(cluster: Cluster, options: Options) -> Iterable[Finding]:
    """several-triggers and utilisation-trigger findings from the ScaledObjects' triggers."""
    inference = inference_deployments(cluster)
    targets = {id(so): key for key, so in _targets(cluster.scaledobjects).items()}
    for so in cluster.scaledobjects:
        spec = so.get("spec") or {}
        triggers = list(spec.get("triggers") or [])
        where = f"ScaledObject {_key(so)}"
        ours = _ours(so)
        if ours is not None and len(triggers) > 1:
            policy = _policy(ours[1])
            others = ", ".join(str(t.get("type")) for i, t in enumerate(triggers) if i != ours[0])
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
            kind = trigger.get("type")
            query = str((trigger.get("metadata") or {}).get("query", ""))
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
    for key, so in _targets(cluster.scaledobjects).items():
        spec = so.get("spec") or {}
        where = f"ScaledObject {_key(so)}"
        low = int(spec.get("minReplicaCount", KEDA_MIN_REPLICA_COUNT))
        high = int(spec.get("maxReplicaCount", KEDA_MAX_REPLICA_COUNT))
        if key in inference and low == 0:
            yield Finding(
                "error",
                "scale-to-zero",
                where,
                "minReplicaCount is 0"
                + ("" if "minReplicaCount" in spec else " (KEDA's default)")
                + ": the next request after a lull waits a whole cold start",
                "set minReplicaCount to 1 or more (and minReplicas to the same)",
            )
        ours = _ours(so)
        policy = _policy(ours[1]) if ours is not None else None
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
        if f"{_meta(hpa).get('namespace', '')}/{ref.get('name', '')}" not in inference:
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
                    f"HorizontalPodAutoscaler {_key(hpa)}",
                    f"scales the inference Deployment {ref.get('name')} on {kind} metric {name}:"
                    " utilisation lags the queue and cannot see requests waiting",
                    "scale it with a ScaledObject and this scaler's trigger instead",
                )


def check_pods(cluster: Cluster, options: Options) -> Iterable[Finding]:
    """no-prestop and short-grace-period findings from inference Deployments' pod templates."""
    for key, deployment in inference_deployments(cluster).items():
        where = f"Deployment {key}"
        pod_spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
        bare = [
            str(c.get("name"))
            for c in _containers(deployment)
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
        meta = _meta(ingress)
        annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
        klass = str(
            (ingress.get("spec") or {}).get("ingressClassName")
            or annotations.get("kubernetes.io/ingress.class", "")
        )
        nginx = "nginx" in klass or any(k.startswith(INGRESS_NGINX) for k in annotations)
        if not nginx or meta.get("namespace") not in namespaces:
            continue
        where = f"Ingress {_key(ingress)}"
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


def check_tolerance(cluster: Cluster, options: Options) -> Iterable[Finding]:
    """hpa-tolerance findings: Kubernetes 1.35+, maxReplicaCount 10+ and no scaleUp tolerance."""
    if cluster.version is None or cluster.version < TOLERANCE_DEFAULT_ON:
        return
    for so in cluster.scaledobjects:
        if _ours(so) is None:
            continue
        spec = so.get("spec") or {}
        behavior = ((spec.get("advanced") or {}).get("horizontalPodAutoscalerConfig") or {}).get(
            "behavior"
        ) or {}
        high = int(spec.get("maxReplicaCount", KEDA_MAX_REPLICA_COUNT))
        if high >= 10 and "tolerance" not in (behavior.get("scaleUp") or {}):
            yield Finding(
                "warning",
                "hpa-tolerance",
                f"ScaledObject {_key(so)}",
                f"Kubernetes {cluster.version[0]}.{cluster.version[1]} takes a per-HPA tolerance but none is"
                " set: from 10 replicas the HPA's default 10 % swallows a step of one (the scaler then"
                " steps further than it needs to)",
                "set advanced.horizontalPodAutoscalerConfig.behavior.scaleUp.tolerance: 0 (KEDA 2.18+)",
            )


def check_scraped(cluster: Cluster, options: Options) -> Iterable[Finding]:
    """not-scraped findings from the pod counts Prometheus gave (info when it was not asked)."""
    for so in cluster.scaledobjects:
        if _ours(so) is None:
            continue
        key = _key(so)
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
        elif count == 0:
            yield Finding(
                "error",
                "not-scraped",
                where,
                "Prometheus holds no series of its engine for its labelSelector: the scaler sees no"
                " queue and no token load, only its floor",
                "scrape the pods (a PodMonitor or prometheus.io annotations) and check labelSelector",
            )


CHECKS: tuple[Callable[[Cluster, Options], Iterable[Finding]], ...] = (
    check_triggers,
    check_bounds,
    check_hpas,
    check_pods,
    check_nodes,
    check_ingresses,
    check_tolerance,
    check_scraped,
)
_ORDER = {"error": 0, "warning": 1, "info": 2}


def diagnose(cluster: Cluster, options: Options | None = None) -> list[Finding]:
    """Every finding, errors first."""
    chosen = options or Options()
    found = [f for check in CHECKS for f in check(cluster, chosen)]
    return sorted(found, key=lambda f: (_ORDER[f.severity], f.check, f.object))


# ---- I/O: the cluster and Prometheus -----------------------------------------------------


def read_cluster(kubeconfig: str | None, namespace: str | None) -> Cluster:
    """List what the checks read, through the real client (raw JSON, no models)."""
    from kubernetes import client

    from scaler.sources.kubernetes import api_client

    api = api_client(kubeconfig)
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    autoscaling, networking = client.AutoscalingV2Api(api), client.NetworkingV1Api(api)
    custom = client.CustomObjectsApi(api)

    def raw(call: Callable[..., Any], *args: Any) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(call(*args, _preload_content=False).data)
        return body

    def items(namespaced: Callable[..., Any], everywhere: Callable[..., Any], *args: Any) -> list[Any]:
        body = raw(namespaced, *args, namespace) if namespace else raw(everywhere, *args)
        return list(body.get("items") or [])

    version = raw(client.VersionApi(api).get_code)
    major = int(re.sub(r"\D", "", str(version.get("major", ""))) or 0)
    minor = int(re.sub(r"\D", "", str(version.get("minor", ""))) or 0)
    keda = ("keda.sh", "v1alpha1")
    return Cluster(
        nodes=list(raw(core.list_node).get("items") or []),
        deployments=items(apps.list_namespaced_deployment, apps.list_deployment_for_all_namespaces),
        scaledobjects=items(
            lambda ns, **kw: custom.list_namespaced_custom_object(*keda, ns, "scaledobjects", **kw),
            lambda **kw: custom.list_cluster_custom_object(*keda, "scaledobjects", **kw),
        ),
        hpas=items(
            autoscaling.list_namespaced_horizontal_pod_autoscaler,
            autoscaling.list_horizontal_pod_autoscaler_for_all_namespaces,
        ),
        ingresses=items(networking.list_namespaced_ingress, networking.list_ingress_for_all_namespaces),
        version=(major, minor),
    )


def scraped_pods(cluster: Cluster, prometheus: str | None) -> dict[str, int | None]:
    """Per ScaledObject of this scaler: pods with its engine's series for its labelSelector (and role)."""
    from scaler.sources.prometheus import PrometheusClient

    out: dict[str, int | None] = {}
    prom = PrometheusClient(prometheus) if prometheus else None
    for so in cluster.scaledobjects:
        ours = _ours(so)
        policy = _policy(ours[1]) if ours is not None else None
        preset = preset_for(policy.engine) if policy is not None else None
        family = preset.family("replicas_reporting") if preset is not None else None
        if policy is None or family is None:
            continue  # engine: custom (or invalid metadata): nothing to count by
        if prom is None:
            out[_key(so)] = None
            continue
        matchers = policy.series_matchers  # the labelSelector's and, with a role, the role's
        by = tuple(sorted({m.name for m in matchers}))
        address = policy.prometheus_address
        client_ = PrometheusClient(address) if address else prom
        samples = client_.instant(family.render(by, "1m"))
        out[_key(so)] = int(sum(s.value for s in samples if all(m.matches(s.labels) for m in matchers)))
    return out


# ---- the command -------------------------------------------------------------------------


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``scaler doctor`` subcommand and its options."""
    p = subparsers.add_parser(
        "doctor",
        help="check a cluster, read-only, for what makes LLM latency bad",
        description="Read Nodes, Deployments, ScaledObjects, HPAs and Ingresses (read-only) and print"
        " one row per pitfall found: severity, object, what is wrong, the fix. Exit 1 on an error.",
    )
    p.add_argument(
        "--kubeconfig",
        default=None,
        help="kubeconfig file (default: in-cluster inside a pod, else $KUBECONFIG or ~/.kube/config)",
    )
    p.add_argument("--namespace", default=None, help="only this namespace (Nodes are always read)")
    p.add_argument("--output", choices=["text", "json"], default="text", help="a table, or one JSON array")
    p.add_argument("--prometheus", default=None, help="also check that Prometheus scrapes each workload")
    p.add_argument(
        "--max-generation-seconds",
        type=float,
        default=DEFAULT_MAX_GENERATION_S,
        help="the longest generation you serve, in seconds, for grace periods and timeouts"
        f" (default {DEFAULT_MAX_GENERATION_S:g})",
    )


def format_text(findings: Sequence[Finding]) -> str:
    """The findings as an aligned table with a count line, or ``no findings``."""
    if not findings:
        return "no findings"
    rows = [(f.severity, f.object, f.problem, f.fix) for f in findings]
    width = max(len(r[1]) for r in rows)
    lines = [f"{'SEVERITY':<8}  {'OBJECT':<{width}}  PROBLEM -> FIX"]
    lines += [f"{s:<8}  {o:<{width}}  {p} -> {x}" for s, o, p, x in rows]
    errors = sum(f.severity == "error" for f in findings)
    lines.append(f"{len(findings)} findings, {errors} errors")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run ``scaler doctor``: print the findings; exit 1 on an error, 2 when the cluster is unreadable."""
    try:
        cluster = read_cluster(args.kubeconfig, args.namespace)
        scraped = scraped_pods(cluster, args.prometheus)
    except Exception as exc:  # noqa: BLE001 - the client's errors have no common base; say what failed
        from scaler.sources.kubernetes import KubernetesConfigError

        # A kubeconfig that cannot be used says so itself (the file, or what is wrong in it).
        what = str(exc) if isinstance(exc, KubernetesConfigError) else f"{type(exc).__name__}: {exc}"
        print(f"scaler doctor: error: cannot read the cluster: {what}", file=sys.stderr)
        return 2
    cluster = dataclasses.replace(cluster, scraped=scraped)
    findings = diagnose(cluster, Options(max_generation_s=args.max_generation_seconds))
    if args.output == "json":
        print(json.dumps([asdict(f) for f in findings], indent=2))
    else:
        print(format_text(findings))
    return 1 if any(f.severity == "error" for f in findings) else 0
