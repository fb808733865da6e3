"""GPU inventory and workload state, computed from Kubernetes objects as plain data.

Pure: no I/O, no clock, no logging. ``scaler.sources.kubernetes`` keeps the caches and
calls in here; tests call in here with tables. One module per thing:

=================  ======================================================================
``quantities``     which resources are GPUs; Kubernetes quantities; a pod's effective requests
``fields``         typed reads of the API's untyped JSON
``selectors``      label selectors, node selector terms, taints and tolerations
``objects``        Nodes, Pods, Deployments and the replica requirement, decoded
``scaledobject``   KEDA's ScaledObject: the one model of it, with KEDA's defaults and the CRD's rules
``cel``            DRA's CEL device selectors, evaluated (cel-python plus Kubernetes' quantities)
``dra``            ResourceSlices, DeviceClasses, ResourceClaims and templates: the GPUs DRA hands out
``kueue``          ClusterQueues and LocalQueues: the quota a pod behind Kueue's admission gate waits for
``fit``            how many more replicas fit on the nodes, allocatable or DRA (``schedulable_replicas``)
``workload``       one workload's replica counts, GPU room and Kueue admission (``workload_state``)
=================  ======================================================================

The arithmetic, node by node (``fit``)::

    free(node, r)  = allocatable(node, r) - sum(requests(pod, r) for non-terminal pods bound to node)
    fits(node)     = min over the replica's GPU resources r of  free(node, r) // need(r)
    schedulable    = sum(fits(node) for nodes the replica may land on)

A replica needs all its GPUs on one node, so free GPUs on different nodes do not add up.
The rules follow the Kubernetes scheduler's NodeUnschedulable, TaintToleration,
NodeAffinity and NodeResourcesFit plugins for extended resources.
"""

from scaler.inventory.fit import MAX_LISTED_NODES, NodeFit, Schedulable, schedulable_replicas, used_gpus
from scaler.inventory.objects import (
    TERMINAL_PHASES,
    Deployment,
    Node,
    Pod,
    ReplicaRequirement,
    deployment_from_json,
    node_from_json,
    pod_from_json,
    requirement_from_pod_spec,
)
from scaler.inventory.quantities import (
    DEFAULT_GPU_RESOURCE,
    GPU_RESOURCE_PATTERNS,
    container_requests,
    is_extended_resource,
    is_gpu_resource,
    parse_count,
    pod_requests,
)
from scaler.inventory.scaledobject import (
    Fallback,
    ScaledObject,
    ScaledObjectError,
    Trigger,
    scaledobject_from_json,
)
from scaler.inventory.selectors import (
    BLOCKING_EFFECTS,
    UNSCHEDULABLE_TAINT_KEY,
    LabelSelector,
    NodeSelectorTerm,
    Requirement,
    SelectorError,
    Taint,
    Toleration,
    label_selector_from_json,
    tolerated,
)
from scaler.inventory.workload import Unknown, WorkloadState, workload_state

__all__ = [
    "BLOCKING_EFFECTS",
    "DEFAULT_GPU_RESOURCE",
    "GPU_RESOURCE_PATTERNS",
    "MAX_LISTED_NODES",
    "TERMINAL_PHASES",
    "UNSCHEDULABLE_TAINT_KEY",
    "Deployment",
    "Fallback",
    "LabelSelector",
    "Node",
    "NodeFit",
    "NodeSelectorTerm",
    "Pod",
    "ReplicaRequirement",
    "Requirement",
    "ScaledObject",
    "ScaledObjectError",
    "Schedulable",
    "SelectorError",
    "Taint",
    "Toleration",
    "Trigger",
    "Unknown",
    "WorkloadState",
    "container_requests",
    "deployment_from_json",
    "is_extended_resource",
    "is_gpu_resource",
    "label_selector_from_json",
    "node_from_json",
    "parse_count",
    "pod_from_json",
    "pod_requests",
    "requirement_from_pod_spec",
    "scaledobject_from_json",
    "schedulable_replicas",
    "tolerated",
    "used_gpus",
    "workload_state",
]
