"""The routers' presets: where requests wait before any server has them (llm-d's EPP, Dynamo's KV router).

Each metric name carries the upstream file that defines it, in the comment above its family.
"""

from __future__ import annotations

from scaler.inputs import Input, Reading
from scaler.presets.registry import Combine, Family, Kind, Preset, Removal, Select, register
from scaler.roles import DYNAMO_WORKER_TYPE

# llm-d's endpoint picker (EPP). Sources: llm-d/llm-d-router pkg/epp/metrics/llm_d_router_metrics.go
# (llm_d_epp_*, v0.9.0+) and pkg/epp/metrics/metrics.go (the older inference_extension_* names of
# kubernetes-sigs/gateway-api-inference-extension, whose last release with an EPP is v1.5.0; written
# beside the new ones by llm-d-router v0.9.0 and v0.10.0, and, after PR #2826 removed the rest, still
# for the flow-control queue on main): each family reads the current name, and the older one only
# where the current is absent (PromQL `or` on the aggregated series), never both summed; an older name
# is read only where a released version exports it alone (docs/engines.md has the versions). With
# flow control on (featureGates: flowControl; off by default, PR #2180) requests wait in the EPP's
# queue, labelled inference_pool; the pool saturation gauge reads 1.0 for stale endpoints, so it is
# read only with none stale (llm_d_epp_flow_control_stale_endpoints, v0.10+, labelled by detector,
# not pool). With flow control off the EPP holds no queue and writes none of those series: its
# in-flight gauges (v0.10+) then say that it runs, and only then is the absent queue read as empty
# (scaler.readings). The request TTFT histogram runs from the EPP's receipt of the request: the TTFT
# users see, queue included; it carries model_name, not the pool.
# Names llm-d-router removed after v0.10.0, each with the name that replaces it (both written by
# v0.9.0 and v0.10.0): what doctor flags in a user's query. PR #2826 (merged 2026-09-13) removed
# inference_extension_* but for the flow-control queue's size and bytes and the scheduler attempts;
# PR #2821 the predicted-latency inference_objective_* series; PR #2675, said to remove
# inference_pool_*, is in no stored copy (the stored main, ebab6879, still writes them): unverified.
_UNVERIFIED = "llm-d-router PR #2675 (after v0.10.0; not in the stored copies, unverified)"
LLM_D_REMOVED = {
    "inference_extension_flow_control_pool_saturation": Removal(
        "llm-d-router PR #2826 (after v0.10.0; GIE v1.5.0 writes only it)",
        "llm_d_epp_flow_control_pool_saturation",
    ),
    "inference_extension_flow_control_request_queue_duration_seconds": Removal(
        "llm-d-router PR #2826 (after v0.10.0)", "llm_d_epp_flow_control_request_queue_duration_seconds"
    ),
    "inference_objective_request_predicted_ttft_seconds": Removal(
        "llm-d-router PR #2821 (after v0.10.0)", "llm_d_epp_request_predicted_ttft_seconds"
    ),
    "inference_pool_average_queue_size": Removal(_UNVERIFIED, "llm_d_epp_average_queue_size"),
    "inference_pool_average_kv_cache_utilization": Removal(
        _UNVERIFIED, "llm_d_epp_average_kv_cache_utilization"
    ),
    "inference_pool_average_running_requests": Removal(_UNVERIFIED, "llm_d_epp_average_running_requests"),
    "inference_pool_ready_pods": Removal(_UNVERIFIED, "llm_d_epp_ready_endpoints"),
    "inference_pool_per_pod_queue_size": Removal(_UNVERIFIED, "llm_d_epp_per_endpoint_queue_size"),
}

LLM_D = register(
    Preset(
        "llm-d",
        (
            # pkg/epp/metrics/llm_d_router_metrics.go: gauge llm_d_epp_flow_control_queue_size
            # (llm-d-router v0.9.0+); pkg/epp/metrics/metrics.go: the older
            # inference_extension_flow_control_queue_size (GIE v1.x, the only name there; still
            # written by llm-d-router main, PR #2826 keeps it for the workload-variant autoscaler).
            # Written from a request's first enqueue: absent on an EPP that never queued.
            Family(
                Input.ROUTER_QUEUE_WAITING,
                "sum by ({by}) (llm_d_epp_flow_control_queue_size)"
                " or sum by ({by}) (inference_extension_flow_control_queue_size)",
                select=Select.POOL,
            ),
            # pkg/epp/metrics/llm_d_router_metrics.go: gauge llm_d_epp_flow_control_pool_saturation
            # (v0.9.0+; from main, a stage label: prefill, decode, effective = the larger, so the
            # max); pkg/epp/metrics/metrics.go: the older inference_extension_flow_control_pool_saturation,
            # read for GIE v1.5.0, which writes only it (removed from llm-d-router main by PR #2826).
            # Written every dispatch cycle while flow control runs.
            Family(
                Input.ROUTER_SATURATION,
                "max by ({by}) (llm_d_epp_flow_control_pool_saturation)"
                " or max by ({by}) (inference_extension_flow_control_pool_saturation)",
                Combine.MEAN,
                select=Select.POOL,
            ),
            # pkg/epp/metrics/llm_d_router_metrics.go: gauge llm_d_epp_flow_control_stale_endpoints
            # (v0.10+, no older name)
            Family(
                Reading.ROUTER_STALE_ENDPOINTS,
                "max by ({by}) (llm_d_epp_flow_control_stale_endpoints)",
                select=Select.ANY,
            ),
            # pkg/epp/metrics/llm_d_router_metrics.go: histogram llm_d_epp_request_ttft_seconds
            # (no older name)
            Family(
                Reading.ROUTER_TTFT,
                "sum by ({by}) (rate(llm_d_epp_request_ttft_seconds_bucket[{window}]))",
                Combine.HISTOGRAM,
                select=Select.MODEL,
            ),
            # pkg/epp/framework/plugins/requestcontrol/dataproducer/inflightload/metrics.go: gauge
            # llm_d_epp_inflight_requests (v0.10.0+; labels endpoint_name, namespace, producer_name,
            # fairness_id, priority; written while the in-flight-load producer runs, which the
            # default scorers consume). Read per namespace, never as demand.
            Family(
                Reading.ROUTER_INFLIGHT,
                "sum by ({by}) (llm_d_epp_inflight_requests)",
                select=Select.NAMESPACE,
            ),
        ),
        "llm-d/llm-d-router pkg/epp/metrics/llm_d_router_metrics.go, pkg/epp/metrics/metrics.go,"
        " pkg/epp/framework/plugins/requestcontrol/dataproducer/inflightload/metrics.go",
        kind=Kind.ROUTER,
        both_generations=True,
        pool_label="inference_pool",
        # pkg/epp/framework/plugins/requestcontrol/dataproducer/inflightload/metrics.go: gauges
        # llm_d_epp_inflight_requests, llm_d_epp_inflight_tokens (labels endpoint_name, namespace,
        # producer_name, fairness_id, priority; only with the in-flight-load producer plugin). Their
        # series stay after a pod goes, so a fleet scaled on them scales up and never down.
        endpoint_series=("llm_d_epp_inflight_requests", "llm_d_epp_inflight_tokens"),
        removed=LLM_D_REMOVED,
    )
)

# Dynamo's KV router queue (the analogue of the EPP's flow control) and the frontend's TTFT.
# Source: ai-dynamo/dynamo lib/runtime/src/metrics/prometheus_names.rs. The queue gauge carries
# model (lower-cased) in current versions; older ones label it by worker_type only, and then it
# cannot be told apart per model and stays unknown.
DYNAMO_ROUTER = register(
    Preset(
        "dynamo",
        (
            # lib/runtime/src/metrics/prometheus_names.rs: gauge
            # dynamo_frontend_router_queue_pending_requests
            Family(
                Input.ROUTER_QUEUE_WAITING,
                "sum by ({by}) (dynamo_frontend_router_queue_pending_requests)",
                select=Select.MODEL,
                model_label="model",
                role_label=DYNAMO_WORKER_TYPE,  # prefill or decode: the workers it routes to
            ),
            # lib/runtime/src/metrics/prometheus_names.rs, lib/llm/src/http/service/metrics.rs:
            # histogram dynamo_frontend_time_to_first_token_seconds
            Family(
                Reading.ROUTER_TTFT,
                "sum by ({by}) (rate(dynamo_frontend_time_to_first_token_seconds_bucket[{window}]))",
                Combine.HISTOGRAM,
                select=Select.MODEL,
                model_label="model",
            ),
        ),
        "ai-dynamo/dynamo lib/runtime/src/metrics/prometheus_names.rs",
        kind=Kind.ROUTER,
        model_label="model",
        lowercases_model=True,
        labels={"worker_type": "decode", "policy_class": "default"},
    )
)
