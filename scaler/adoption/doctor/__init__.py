"""``scaler doctor``: read a cluster and name the pitfalls that make LLM latency bad.

Read-only: it lists Nodes, Pods, Deployments, ScaledObjects, HorizontalPodAutoscalers and
Ingresses (``get``/``list``, the scaler's ClusterRole plus ``ingresses`` in
``networking.k8s.io``), DRA's ResourceSlices, DeviceClasses and ResourceClaimTemplates and
Kueue's ClusterQueues and LocalQueues where served, and reads ``/version``; with
``--prometheus`` it also runs one instant query per ScaledObject of this scaler, one per router
of the registry and Prometheus address for the ScaledObjects that read only their servers'
queue, the probe of the series the inert reasons come from (``scaler.sources.probe``), and one
query for the reasons a running scaler exports (``llm_scaler_inert``). Each finding
is a row: severity, object, what is wrong, the fix. ``error`` findings make the exit
status 1.

The checks (``CHECKS``; every one is a pure function of the API's JSON and what Prometheus
answered):

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
                                    for its ``labelSelector`` (info when not checked; where
                                    the series were probed, the inert-* checks say why)
inert-no-series           error     the labelSelector matches no series while the Deployment
                                    has Ready pods: the values that exist, a did-you-mean
inert-stale               error     its series exist, the last sample older than two scrape
                                    intervals
inert-not-scraped         error     ``up == 0`` for its series' target, or Ready pods with
                                    no series (``scaler.adoption.doctor.inert``)
inert-stranded            warning   a router's per-endpoint series (llm-d's in-flight gauges)
                                    for pods that are gone
inert-held, -not-landed   warning   what a running scaler reports (``llm_scaler_inert``)
router-queue-unread       error     a router's queue series exist for the model (llm-d's
                                    EPP with flow control on) and the ScaledObject reads
                                    only the servers' queue (``--prometheus``)
pd-one-scaledobject       error     one Deployment selector over prefill and decode pods
                                    (``llm-d.ai/role``); warning when the model's other
                                    role runs in a Deployment no ScaledObject scales
removed-metric            warning   a user's query reads a name its upstream removed
                                    (``vllm:time_per_output_token_seconds``)
gpu-uncounted             warning   an inference workload whose GPUs the GPU check cannot
                                    count, DRA-only GPU nodes its request cannot reach
                                    (no DeviceClass ``extendedResourceName``), DRA objects
                                    that cannot be read
kueue-quota               warning   ``maxReplicaCount`` beyond what the ScaledObject's
                                    ClusterQueue can ever admit (error: its LocalQueue or
                                    ClusterQueue does not exist)
========================  ========  ===================================================

An *inference workload* is a Deployment that requests a GPU, runs an image of an engine in
the preset registry (``scaler.presets``: vLLM, SGLang, TGI, Triton or TensorRT-LLM, Dynamo),
or is scaled by this scaler.

The modules: ``objects`` (what the checks read and give), ``scaling``, ``workloads``,
``stacks``, ``gpus`` and ``inert`` (the checks), ``diagnose`` (the table of checks), ``read`` (the
cluster and Prometheus) and ``command`` (the CLI).
"""

from __future__ import annotations

from scaler.adoption.doctor.command import add_parser, format_text, run
from scaler.adoption.doctor.diagnose import CHECKS, diagnose
from scaler.adoption.doctor.objects import Cluster, Finding, Options

__all__ = ["CHECKS", "Cluster", "Finding", "Options", "add_parser", "diagnose", "format_text", "run"]
