"""Query presets per inference engine: which PromQL gives each input the signals need.

Every template aggregates *by* a set of label names (``{by}``) that the scaler chooses
from the ``labelSelector``s of the targets sharing a Prometheus and an engine; the
selectors themselves are applied to the returned series in Python
(``scaler.matchers``). So one query per family serves every ScaledObject, and no
user-written text reaches PromQL. ``{window}`` is the rate window (default ``1m``).

Metric names are checked against each server's own source or documentation; see the
comment above each preset.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from scaler.inputs import Input, Key, Reading
from scaler.matchers import LABEL_NAME


class Combine(StrEnum):
    """How series from several groups are combined for one target."""

    SUM = "sum"
    MEAN = "mean"  # each group's value is already a mean over its pods: averaged over the groups
    HISTOGRAM = "histogram"  # per-bucket rates, summed, then a quantile in Python


class Select(StrEnum):
    """Which of a target's matchers pick its series of a family."""

    TARGET = "target"  # the labelSelector (the servers' own series)
    POOL = "pool"  # the router's pool: inference_pool="<inferencePool>"
    MODEL = "model"  # the labelSelector's matchers on the family's model label, if any
    ANY = "any"  # every series at the address (a router gauge that names no pool)


@dataclass(frozen=True, slots=True)
class Family:
    """One input's query template, and how a target combines the series it returns."""

    field: Key
    template: str
    combine: Combine = Combine.SUM
    le_scale: float = 1.0  # bucket bounds (or a histogram's _sum) times this give seconds (0.001 for _ms)
    select: Select = Select.TARGET
    model_label: str = "model_name"  # the label Select.MODEL keeps

    def render(self, by: tuple[str, ...], window: str) -> str:
        """The PromQL grouped by ``by`` over rate ``window``; ValueError on an invalid label name."""
        for label in by:
            if not LABEL_NAME.fullmatch(label):
                raise ValueError(f"invalid label name {label!r}")
        labels = ("le", *by) if self.combine is Combine.HISTOGRAM else by
        return self.template.format(by=", ".join(labels), window=window)


@dataclass(frozen=True, slots=True)
class Preset:
    """An engine's query families, and where their metric names were checked."""

    engine: str
    families: tuple[Family, ...]
    source: str

    def family(self, field: str) -> Family | None:
        """The family that gives ``field``, or None when the engine has none."""
        return next((f for f in self.families if f.field == field), None)


# A family reads an input (``scaler.inputs.Input``) or what inputs are derived from
# (``scaler.inputs.Reading``): a latency histogram's buckets and ``_sum``, the pods exporting
# metrics (the replicas without Kubernetes). The KV cache's usage is the mean over the pods (what
# measures a replica's batch slots, scaler.capacity).

# vLLM (V1 engine). Source: vllm-project/vllm, vllm/v1/metrics/loggers.py (PrometheusStatLogger)
# and docs/design/metrics.md: gauges vllm:num_requests_waiting / vllm:num_requests_running,
# counters vllm:prompt_tokens_total / vllm:generation_tokens_total, histogram
# vllm:time_to_first_token_seconds, all labelled model_name (and engine). The KV-cache gauge
# was renamed from vllm:gpu_cache_usage_perc (V0) to vllm:kv_cache_usage_perc; the old name is
# read where the new one is absent.
VLLM = Preset(
    "vllm",
    (
        Family(Input.QUEUE_WAITING, "sum by ({by}) (vllm:num_requests_waiting)"),
        Family(Input.REQUESTS_RUNNING, "sum by ({by}) (vllm:num_requests_running)"),
        Family(Input.PROMPT_TOKENS_PER_S, "sum by ({by}) (rate(vllm:prompt_tokens_total[{window}]))"),
        Family(Input.GENERATION_TOKENS_PER_S, "sum by ({by}) (rate(vllm:generation_tokens_total[{window}]))"),
        Family(
            Input.KV_CACHE_USAGE,
            "avg by ({by}) (vllm:kv_cache_usage_perc or vllm:gpu_cache_usage_perc)",
            Combine.MEAN,
        ),
        Family(
            Reading.TTFT,
            "sum by ({by}) (rate(vllm:time_to_first_token_seconds_bucket[{window}]))",
            Combine.HISTOGRAM,
        ),
        Family(Reading.TTFT_SUM, "sum by ({by}) (rate(vllm:time_to_first_token_seconds_sum[{window}]))"),
        # Inter-token latency: vllm:inter_token_latency_seconds replaced vllm:time_per_output_token_seconds
        # (deprecated in 0.11, PR #24110; removed by PR #32661): the older name where the newer is absent.
        Family(
            Reading.ITL,
            "sum by ({by}) (rate(vllm:inter_token_latency_seconds_bucket[{window}]))"
            " or sum by ({by}) (rate(vllm:time_per_output_token_seconds_bucket[{window}]))",
            Combine.HISTOGRAM,
        ),
        Family(
            Reading.ITL_SUM,
            "sum by ({by}) (rate(vllm:inter_token_latency_seconds_sum[{window}]))"
            " or sum by ({by}) (rate(vllm:time_per_output_token_seconds_sum[{window}]))",
        ),
        Family(Reading.REPLICAS_REPORTING, "count by ({by}) (vllm:num_requests_running)"),
    ),
    "vllm-project/vllm vllm/v1/metrics/loggers.py",
)

# SGLang. Source: sgl-project/sglang python/sglang/srt/metrics/collector.py and
# docs.sglang.io/references/production_metrics.html (needs --enable-metrics). Labels: model_name
# (plus tp_rank/pp_rank/dp_rank on scheduler gauges, hence sum/max by the selector's labels).
# The token counters advance when a request finishes, so their rate lags long requests.
SGLANG = Preset(
    "sglang",
    (
        Family(Input.QUEUE_WAITING, "sum by ({by}) (sglang:num_queue_reqs)"),
        Family(Input.REQUESTS_RUNNING, "sum by ({by}) (sglang:num_running_reqs)"),
        Family(Input.PROMPT_TOKENS_PER_S, "sum by ({by}) (rate(sglang:prompt_tokens_total[{window}]))"),
        Family(
            Input.GENERATION_TOKENS_PER_S,
            "sum by ({by}) (rate(sglang:generation_tokens_total[{window}]))",
        ),
        Family(Input.KV_CACHE_USAGE, "avg by ({by}) (sglang:token_usage)", Combine.MEAN),
        Family(
            Reading.TTFT,
            "sum by ({by}) (rate(sglang:time_to_first_token_seconds_bucket[{window}]))",
            Combine.HISTOGRAM,
        ),
        Family(Reading.TTFT_SUM, "sum by ({by}) (rate(sglang:time_to_first_token_seconds_sum[{window}]))"),
        Family(
            Reading.ITL,
            "sum by ({by}) (rate(sglang:inter_token_latency_seconds_bucket[{window}]))",
            Combine.HISTOGRAM,
        ),
        Family(Reading.ITL_SUM, "sum by ({by}) (rate(sglang:inter_token_latency_seconds_sum[{window}]))"),
        Family(Reading.REPLICAS_REPORTING, "count by ({by}) (sglang:num_running_reqs)"),
    ),
    "sgl-project/sglang python/sglang/srt/metrics/collector.py",
)

# Hugging Face TGI. Source: huggingface/text-generation-inference docs/source/reference/metrics.md
# and backends/v3/src/backend.rs. TGI series carry no model label: select on the labels service
# discovery adds (namespace, pod, job). Token rates come from the per-request histograms' _sum
# (input length at admission, generated tokens at completion). TGI exports no time-to-first-token
# histogram and no KV-cache gauge, so those inputs are unknown for this engine.
TGI = Preset(
    "tgi",
    (
        Family(Input.QUEUE_WAITING, "sum by ({by}) (tgi_queue_size)"),
        Family(Input.REQUESTS_RUNNING, "sum by ({by}) (tgi_batch_current_size)"),
        Family(Input.PROMPT_TOKENS_PER_S, "sum by ({by}) (rate(tgi_request_input_length_sum[{window}]))"),
        Family(
            Input.GENERATION_TOKENS_PER_S,
            "sum by ({by}) (rate(tgi_request_generated_tokens_sum[{window}]))",
        ),
        Family(Reading.REPLICAS_REPORTING, "count by ({by}) (tgi_queue_size)"),
    ),
    "huggingface/text-generation-inference docs/source/reference/metrics.md",
)

# NVIDIA Triton with the TensorRT-LLM backend. Sources: triton-inference-server/tensorrtllm_backend
# inflight_batcher_llm/src/custom_metrics_reporter/custom_metrics_reporter.cc (request and
# KV-cache gauges, nv_llm_*_token_len histograms in newer builds) and Triton's metrics guide
# (nv_inference_first_response_histogram_ms: milliseconds, needs
# --metrics-config histogram_latencies=true, first *response* of a decoupled model). Labels:
# model, version. The "waiting" request type and the KV "fraction" exist in newer backends only.
TRITON = Preset(
    "triton",
    (
        Family(Input.QUEUE_WAITING, 'sum by ({by}) (nv_trt_llm_request_metrics{{request_type="waiting"}})'),
        Family(Input.REQUESTS_RUNNING, 'sum by ({by}) (nv_trt_llm_request_metrics{{request_type="active"}})'),
        Family(Input.PROMPT_TOKENS_PER_S, "sum by ({by}) (rate(nv_llm_input_token_len_sum[{window}]))"),
        Family(Input.GENERATION_TOKENS_PER_S, "sum by ({by}) (rate(nv_llm_output_token_len_sum[{window}]))"),
        Family(
            Input.KV_CACHE_USAGE,
            'avg by ({by}) (nv_trt_llm_kv_cache_block_metrics{{kv_cache_block_type="fraction"}})',
            Combine.MEAN,
        ),
        Family(
            Reading.TTFT,
            "sum by ({by}) (rate(nv_inference_first_response_histogram_ms_bucket[{window}]))",
            Combine.HISTOGRAM,
            le_scale=0.001,
        ),
        Family(
            Reading.TTFT_SUM,
            "sum by ({by}) (rate(nv_inference_first_response_histogram_ms_sum[{window}]))",
            le_scale=0.001,
        ),
        Family(
            Reading.REPLICAS_REPORTING,
            'count by ({by}) (nv_trt_llm_request_metrics{{request_type="active"}})',
        ),
    ),
    "triton-inference-server/tensorrtllm_backend custom_metrics_reporter.cc; Triton metrics guide",
)

# NVIDIA Dynamo's frontend, read as the engine: one HTTP frontend in front of its workers, whose
# series sum the model's traffic. Source: ai-dynamo/dynamo lib/runtime/src/metrics/prometheus_names.rs
# (names) and lib/llm/src/http/service/metrics.rs (definitions). Label: model, lower-cased by the
# frontend. queued_requests counts requests with no first response yet; the older names ended in
# _total (gauges despite it) and are read where the current ones are absent, never both. Prompt
# tokens come from the input-sequence histogram's _sum. Unlike vLLM, Dynamo exports max_num_seqs.
# No per-worker series carries the model label, so replicas come from Kubernetes only.
DYNAMO = Preset(
    "dynamo",
    (
        Family(
            Input.QUEUE_WAITING,
            "sum by ({by}) (dynamo_frontend_queued_requests)"
            " or sum by ({by}) (dynamo_frontend_queued_requests_total)",
        ),
        Family(
            Input.REQUESTS_RUNNING,
            "sum by ({by}) (dynamo_frontend_inflight_requests)"
            " or sum by ({by}) (dynamo_frontend_inflight_requests_total)",
        ),
        Family(
            Input.PROMPT_TOKENS_PER_S,
            "sum by ({by}) (rate(dynamo_frontend_input_sequence_tokens_sum[{window}]))",
        ),
        Family(
            Input.GENERATION_TOKENS_PER_S,
            "sum by ({by}) (rate(dynamo_frontend_output_tokens_total[{window}]))",
        ),
        Family(
            Reading.TTFT,
            "sum by ({by}) (rate(dynamo_frontend_time_to_first_token_seconds_bucket[{window}]))",
            Combine.HISTOGRAM,
        ),
        Family(
            Reading.TTFT_SUM,
            "sum by ({by}) (rate(dynamo_frontend_time_to_first_token_seconds_sum[{window}]))",
        ),
        Family(
            Reading.ITL,
            "sum by ({by}) (rate(dynamo_frontend_inter_token_latency_seconds_bucket[{window}]))",
            Combine.HISTOGRAM,
        ),
        Family(
            Reading.ITL_SUM,
            "sum by ({by}) (rate(dynamo_frontend_inter_token_latency_seconds_sum[{window}]))",
        ),
        Family(Input.SLOTS_PER_REPLICA, "max by ({by}) (dynamo_frontend_model_max_num_seqs)", Combine.MEAN),
    ),
    "ai-dynamo/dynamo lib/runtime/src/metrics/prometheus_names.rs, lib/llm/src/http/service/metrics.rs",
)

PRESETS: dict[str, Preset] = {p.engine: p for p in (VLLM, SGLANG, TGI, TRITON, DYNAMO)}


def preset_for(engine: str) -> Preset | None:
    """The query preset of ``engine``, or None when it has none (``custom``)."""
    return PRESETS.get(engine)


# ---- routers: where requests wait before any server has them ---------------------------

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
LLM_D = Preset(
    "llm-d",
    (
        Family(
            Input.ROUTER_QUEUE_WAITING,
            "sum by ({by}) (llm_d_epp_flow_control_queue_size)"
            " or sum by ({by}) (inference_extension_flow_control_queue_size)",
            select=Select.POOL,
        ),
        Family(
            Input.ROUTER_SATURATION,
            "max by ({by}) (llm_d_epp_flow_control_pool_saturation)"
            " or max by ({by}) (inference_extension_flow_control_pool_saturation)",
            Combine.MEAN,
            select=Select.POOL,
        ),
        Family(
            Reading.ROUTER_STALE_ENDPOINTS,
            "max by ({by}) (llm_d_epp_flow_control_stale_endpoints)",
            select=Select.ANY,
        ),
        Family(
            Reading.ROUTER_TTFT,
            "sum by ({by}) (rate(llm_d_epp_request_ttft_seconds_bucket[{window}]))",
            Combine.HISTOGRAM,
            select=Select.MODEL,
        ),
    ),
    "llm-d/llm-d-router pkg/epp/metrics/llm_d_router_metrics.go, pkg/epp/metrics/metrics.go",
)

# Dynamo's KV router queue (the analogue of the EPP's flow control) and the frontend's TTFT.
# Source: ai-dynamo/dynamo lib/runtime/src/metrics/prometheus_names.rs. The queue gauge carries
# model (lower-cased) in current versions; older ones label it by worker_type only, and then it
# cannot be told apart per model and stays unknown.
DYNAMO_ROUTER = Preset(
    "dynamo",
    (
        Family(
            Input.ROUTER_QUEUE_WAITING,
            "sum by ({by}) (dynamo_frontend_router_queue_pending_requests)",
            select=Select.MODEL,
            model_label="model",
        ),
        Family(
            Reading.ROUTER_TTFT,
            "sum by ({by}) (rate(dynamo_frontend_time_to_first_token_seconds_bucket[{window}]))",
            Combine.HISTOGRAM,
            select=Select.MODEL,
            model_label="model",
        ),
    ),
    "ai-dynamo/dynamo lib/runtime/src/metrics/prometheus_names.rs",
)

ROUTERS: dict[str, Preset] = {"llm-d": LLM_D, "dynamo": DYNAMO_ROUTER}


# GPU utilisation series, as KEDA triggers and HPAs name them: DCGM's exporter, the older
# nvidia_gpu_exporter, and the usual recording-rule names. scaler convert drops a trigger on
# one; scaler doctor reports an inference workload scaled on one.
GPU_UTILISATION = re.compile(r"dcgm_fi_dev_gpu_util|nvidia_gpu_duty_cycle|gpu_util|gpu_busy", re.I)
