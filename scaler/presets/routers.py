"""The routers' presets: where requests wait before any server has them (llm-d's EPP, Dynamo's KV router).

Each metric name carries the upstream file that defines it, in the comment above its family.
"""

from __future__ import annotations

from scaler.inputs import Input, Reading
from scaler.presets.registry import Combine, Family, Kind, Preset, Select, register
from scaler.roles import DYNAMO_WORKER_TYPE

# llm-d's endpoint picker (EPP). Sources: llm-d/llm-d-router pkg/epp/metrics/llm_d_router_metrics.go
# (llm_d_epp_*, v0.9+) and pkg/epp/metrics/metrics.go (the older inference_extension_* names,
# kubernetes-sigs/gateway-api-inference-extension v1.5.0, still written beside the new ones):
# each family reads the current name, and the older one only where the current is absent
# (PromQL `or` on the aggregated series), never both summed. With flow control on
# (featureGates: flowControl) requests wait in the EPP's queue, labelled inference_pool; the
# pool saturation gauge reads 1.0 for stale endpoints, so it is read only with none stale
# (llm_d_epp_flow_control_stale_endpoints, v0.10+, labelled by detector, not pool). The request
# TTFT histogram runs from the EPP's receipt of the request: the TTFT users see, queue included;
# it carries model_name, not the pool.
LLM_D = register(
    Preset(
        "llm-d",
        (
            # pkg/epp/metrics/llm_d_router_metrics.go: gauge llm_d_epp_flow_control_queue_size;
            # pkg/epp/metrics/metrics.go: the older inference_extension_flow_control_queue_size
            Family(
                Input.ROUTER_QUEUE_WAITING,
                "sum by ({by}) (llm_d_epp_flow_control_queue_size)"
                " or sum by ({by}) (inference_extension_flow_control_queue_size)",
                select=Select.POOL,
            ),
            # pkg/epp/metrics/llm_d_router_metrics.go: gauge llm_d_epp_flow_control_pool_saturation;
            # pkg/epp/metrics/metrics.go: the older inference_extension_flow_control_pool_saturation
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
        ),
        "llm-d/llm-d-router pkg/epp/metrics/llm_d_router_metrics.go, pkg/epp/metrics/metrics.go",
        kind=Kind.ROUTER,
        both_generations=True,
        pool_label="inference_pool",
        # pkg/epp/framework/plugins/requestcontrol/dataproducer/inflightload/metrics.go: gauges
        # llm_d_epp_inflight_requests, llm_d_epp_inflight_tokens (labels endpoint_name, namespace,
        # producer_name, fairness_id, priority; only with the in-flight-load producer plugin). Their
        # series stay after a pod goes, so a fleet scaled on them scales up and never down.
        endpoint_series=("llm_d_epp_inflight_requests", "llm_d_epp_inflight_tokens"),
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
