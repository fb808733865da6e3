"""The inference engines' presets: vLLM, SGLang, TGI, Triton (TensorRT-LLM) and Dynamo's frontend.

Each metric name carries the upstream file that defines it, in the comment above its family
(``tests/test_presets.py`` checks that every family has one).
"""

from __future__ import annotations

from scaler.inputs import Input, Reading
from scaler.presets.registry import Combine, Family, Preset, Removal, register
from scaler.roles import LLM_D_ROLE_LABEL

# vLLM (V1 engine). Source: vllm-project/vllm, vllm/v1/metrics/loggers.py (PrometheusStatLogger)
# and docs/design/metrics.md. Labels model_name and engine (the EngineCore index). Counters are
# defined without _total (vllm:prompt_tokens) and exposed with it.
# vLLM's histogram buckets, in seconds, +Inf left out (vllm/v1/metrics/loggers.py,
# PrometheusStatLogger): vllm:time_to_first_token_seconds' and vllm:inter_token_latency_seconds'.
# The simulated exporters (scaler.sim) and the replay's TTFT histogram observe into them.
VLLM_TTFT_BUCKETS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
    2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
VLLM_ITL_BUCKETS: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
    2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip

VLLM = register(
    Preset(
        "vllm",
        (
            # vllm/v1/metrics/loggers.py: gauge vllm:num_requests_waiting
            Family(Input.QUEUE_WAITING, "sum by ({by}) (vllm:num_requests_waiting)"),
            # vllm/v1/metrics/loggers.py: gauge vllm:num_requests_running
            Family(Input.REQUESTS_RUNNING, "sum by ({by}) (vllm:num_requests_running)"),
            # vllm/v1/metrics/loggers.py: gauge vllm:num_requests_waiting_by_reason, reason="capacity"
            # (the scheduler's waiting queue) and "deferred" (its skipped_waiting queue), summing to
            # vllm:num_requests_waiting (vLLM PR #38435, merged 2026-03); absent before it: unknown
            Family(
                Input.QUEUE_WAITING_CAPACITY,
                'sum by ({by}) (vllm:num_requests_waiting_by_reason{{reason="capacity"}})',
            ),
            # vllm/v1/metrics/loggers.py: gauge vllm:num_requests_waiting_by_reason, reason="deferred"
            Family(
                Input.QUEUE_WAITING_DEFERRED,
                'sum by ({by}) (vllm:num_requests_waiting_by_reason{{reason="deferred"}})',
            ),
            # vllm/v1/metrics/loggers.py: counter vllm:prompt_tokens_total
            Family(Input.PROMPT_TOKENS_PER_S, "sum by ({by}) (rate(vllm:prompt_tokens_total[{window}]))"),
            # vllm/v1/metrics/loggers.py: counter vllm:generation_tokens_total
            Family(
                Input.GENERATION_TOKENS_PER_S,
                "sum by ({by}) (rate(vllm:generation_tokens_total[{window}]))",
            ),
            # vllm/v1/metrics/loggers.py: gauge vllm:kv_cache_usage_perc (a fraction); the older
            # vllm:gpu_cache_usage_perc, same file before PR #29330 removed it (0.12)
            Family(
                Input.KV_CACHE_USAGE,
                "avg by ({by}) (vllm:kv_cache_usage_perc or vllm:gpu_cache_usage_perc)",
                Combine.MEAN,
            ),
            # vllm/v1/metrics/loggers.py: histogram vllm:time_to_first_token_seconds
            Family(
                Reading.TTFT,
                "sum by ({by}) (rate(vllm:time_to_first_token_seconds_bucket[{window}]))",
                Combine.HISTOGRAM,
            ),
            # vllm/v1/metrics/loggers.py: histogram vllm:time_to_first_token_seconds (_sum)
            Family(Reading.TTFT_SUM, "sum by ({by}) (rate(vllm:time_to_first_token_seconds_sum[{window}]))"),
            # vllm/v1/metrics/loggers.py: histogram vllm:inter_token_latency_seconds; the older
            # vllm:time_per_output_token_seconds, same file (deprecated in 0.11 by PR #24110,
            # removed by PR #32661), read where the newer is absent
            Family(
                Reading.ITL,
                "sum by ({by}) (rate(vllm:inter_token_latency_seconds_bucket[{window}]))"
                " or sum by ({by}) (rate(vllm:time_per_output_token_seconds_bucket[{window}]))",
                Combine.HISTOGRAM,
            ),
            # vllm/v1/metrics/loggers.py: histograms vllm:inter_token_latency_seconds and (older)
            # vllm:time_per_output_token_seconds, their _sum
            Family(
                Reading.ITL_SUM,
                "sum by ({by}) (rate(vllm:inter_token_latency_seconds_sum[{window}]))"
                " or sum by ({by}) (rate(vllm:time_per_output_token_seconds_sum[{window}]))",
            ),
            # vllm/v1/metrics/loggers.py: info gauge vllm:cache_config_info (log_metrics_info: every
            # CacheConfig field a label); its kv_cache_size_tokens label, each engine's KV cache in tokens
            # (vLLM PR #42206, merged 2026-05), summed over the engines (data-parallel ranks included)
            Family(
                Input.KV_CACHE_TOKENS,
                "sum by ({by}) (vllm:cache_config_info)",
                value_label="kv_cache_size_tokens",
            ),
            # vllm/v1/metrics/loggers.py: gauge vllm:num_requests_running, the busiest pod's
            Family(Input.REQUESTS_RUNNING_MAX, "max by ({by}) (vllm:num_requests_running)", Combine.MAX),
            # vllm/v1/metrics/loggers.py: gauge vllm:kv_cache_usage_perc (older
            # vllm:gpu_cache_usage_perc), the fullest pod's
            Family(
                Input.KV_CACHE_USAGE_MAX,
                "max by ({by}) (vllm:kv_cache_usage_perc or vllm:gpu_cache_usage_perc)",
                Combine.MAX,
            ),
            # vllm/v1/metrics/loggers.py: histogram vllm:request_prefill_time_seconds (_sum), the
            # busiest pod's rate: the requests in prefill there on average
            Family(
                Reading.PREFILL_TIME_SUM_MAX,
                "max by ({by}) (rate(vllm:request_prefill_time_seconds_sum[{window}]))",
                Combine.MAX,
            ),
            # vllm/v1/metrics/loggers.py: histogram vllm:request_queue_time_seconds (_sum), observed
            # at a request's finish; vllm/v1/metrics/stats.py: scheduled_ts - queued_ts
            Family(
                Reading.QUEUE_TIME_SUM, "sum by ({by}) (rate(vllm:request_queue_time_seconds_sum[{window}]))"
            ),
            # vllm/v1/metrics/loggers.py: histogram vllm:request_queue_time_seconds (_count)
            Family(
                Reading.QUEUE_TIME_COUNT,
                "sum by ({by}) (rate(vllm:request_queue_time_seconds_count[{window}]))",
            ),
            # vllm/v1/metrics/loggers.py: histogram vllm:request_prefill_time_seconds (_sum), observed
            # at a request's finish; vllm/v1/metrics/stats.py: first_token_ts - scheduled_ts
            Family(
                Reading.PREFILL_TIME_SUM,
                "sum by ({by}) (rate(vllm:request_prefill_time_seconds_sum[{window}]))",
            ),
            # vllm/v1/metrics/loggers.py: histogram vllm:request_prefill_time_seconds (_count)
            Family(
                Reading.PREFILL_TIME_COUNT,
                "sum by ({by}) (rate(vllm:request_prefill_time_seconds_count[{window}]))",
            ),
            # vllm/v1/metrics/loggers.py: gauge vllm:num_requests_running, one series a pod
            Family(Reading.REPLICAS_REPORTING, "count by ({by}) (vllm:num_requests_running)"),
            # vllm/v1/metrics/loggers.py: gauges vllm:num_requests_waiting_by_reason (reason="capacity"),
            # vllm:num_requests_running and vllm:kv_cache_usage_perc, per pod: the pods whose engine is
            # stuck (vllm-project/vllm#53130, #39734), each with what waits on it now. The signature:
            # requests waiting for capacity, nothing running and the KV cache under 5% (a running
            # request's blocks exceed it), each throughout the last 2m (eight refreshes and scrapes at
            # 15 s: not a pod between two batches, nor one just started). Its queue is not demand
            # (scaler.readings, InertReason.STUCK).
            Family(
                Reading.STUCK_WAITING,
                'sum by ({by}) (vllm:num_requests_waiting_by_reason{{reason="capacity"}})'
                " and (sum by ({by}) (min_over_time("
                'vllm:num_requests_waiting_by_reason{{reason="capacity"}}[2m])) > 0)'
                " and (sum by ({by}) (max_over_time(vllm:num_requests_running[2m])) == 0)"
                " and (max by ({by}) (max_over_time(vllm:kv_cache_usage_perc[2m])) < 0.05)",
                Combine.PODS,
                keep=("pod",),
            ),
        ),
        "vllm-project/vllm vllm/v1/metrics/loggers.py",
        image=r"vllm",
        labels={"engine": "0"},
        # llm-d/llm-d-router pkg/epp/framework/plugins/scheduling/filter/bylabel/roles.go: the pod
        # label llm-d.ai/role (prefill, decode; a pod without it is a decode pod)
        role_label=LLM_D_ROLE_LABEL,
        removed={
            "vllm:time_per_output_token_seconds": Removal(
                "vLLM PR #32661 (deprecated in 0.11 by PR #24110)", "vllm:inter_token_latency_seconds"
            ),
            "vllm:gpu_cache_usage_perc": Removal("vLLM PR #29330 (0.12)", "vllm:kv_cache_usage_perc"),
        },
    )
)

# SGLang (needs --enable-metrics). Source: sgl-project/sglang
# python/sglang/srt/observability/metrics_collector.py (python/sglang/srt/metrics/collector.py
# before the move): SchedulerMetricsCollector (gauges, labelled model_name, engine_type,
# tp_rank, pp_rank; hence sums by the selector's labels) and TokenizerMetricsCollector
# (counters and histograms). The token counters advance when a request finishes, so their
# rate lags long requests.
# The share of its KV pool a server's running requests hold, per series (a pod's scheduler), then
# aggregated by ``agg``; SGLang's older gauge where the counts are absent (the SGLang preset below).
SGLANG_KV = (
    "{agg} by ({{by}}) (sglang:kv_used_tokens"
    " / (sglang:kv_used_tokens + sglang:kv_available_tokens + sglang:kv_evictable_tokens))"
    " or {agg} by ({{by}}) (sglang:token_usage)"
)
SGLANG = register(
    Preset(
        "sglang",
        (
            # python/sglang/srt/observability/metrics_collector.py: gauge sglang:num_queue_reqs
            Family(Input.QUEUE_WAITING, "sum by ({by}) (sglang:num_queue_reqs)"),
            # python/sglang/srt/observability/metrics_collector.py: gauge sglang:num_running_reqs
            Family(Input.REQUESTS_RUNNING, "sum by ({by}) (sglang:num_running_reqs)"),
            # python/sglang/srt/observability/metrics_collector.py: counter sglang:prompt_tokens_total
            Family(Input.PROMPT_TOKENS_PER_S, "sum by ({by}) (rate(sglang:prompt_tokens_total[{window}]))"),
            # python/sglang/srt/observability/metrics_collector.py: counter sglang:generation_tokens_total
            Family(
                Input.GENERATION_TOKENS_PER_S,
                "sum by ({by}) (rate(sglang:generation_tokens_total[{window}]))",
            ),
            # python/sglang/srt/observability/metrics_collector.py: gauges sglang:kv_used_tokens
            # (held by running requests), sglang:kv_available_tokens (free), sglang:kv_evictable_tokens
            # (radix cache a new request may evict), all of the full-attention pool, written together
            # at each log_stats (PR #22726): used over the three is the share of what requests can
            # hold that they hold. Where they are absent, the older gauge sglang:token_usage (0-1):
            # max(full, swa, mamba) of (total - available - evictable) / total, which counts the
            # session-held tokens and, on hybrid models, reads the Mamba state pool where it is fuller.
            Family(Input.KV_CACHE_USAGE, SGLANG_KV.format(agg="avg"), Combine.MEAN, share=True),
            # python/sglang/srt/observability/metrics_collector.py: histogram
            # sglang:time_to_first_token_seconds
            Family(
                Reading.TTFT,
                "sum by ({by}) (rate(sglang:time_to_first_token_seconds_bucket[{window}]))",
                Combine.HISTOGRAM,
            ),
            # python/sglang/srt/observability/metrics_collector.py: histogram
            # sglang:time_to_first_token_seconds, its _sum
            Family(
                Reading.TTFT_SUM,
                "sum by ({by}) (rate(sglang:time_to_first_token_seconds_sum[{window}]))",
            ),
            # python/sglang/srt/observability/metrics_collector.py: histogram
            # sglang:inter_token_latency_seconds
            Family(
                Reading.ITL,
                "sum by ({by}) (rate(sglang:inter_token_latency_seconds_bucket[{window}]))",
                Combine.HISTOGRAM,
            ),
            # python/sglang/srt/observability/metrics_collector.py: histogram
            # sglang:inter_token_latency_seconds, its _sum
            Family(Reading.ITL_SUM, "sum by ({by}) (rate(sglang:inter_token_latency_seconds_sum[{window}]))"),
            # python/sglang/srt/observability/metrics_collector.py: gauge sglang:num_running_reqs, the
            # busiest pod's
            Family(Input.REQUESTS_RUNNING_MAX, "max by ({by}) (sglang:num_running_reqs)", Combine.MAX),
            # python/sglang/srt/observability/metrics_collector.py: gauges sglang:kv_used_tokens,
            # sglang:kv_available_tokens, sglang:kv_evictable_tokens, else sglang:token_usage, as
            # above: the fullest pod's
            Family(Input.KV_CACHE_USAGE_MAX, SGLANG_KV.format(agg="max"), Combine.MAX, share=True),
            # python/sglang/srt/observability/metrics_collector.py: histogram
            # sglang:queue_time_seconds (time in the waiting queue), its _sum
            Family(Reading.QUEUE_TIME_SUM, "sum by ({by}) (rate(sglang:queue_time_seconds_sum[{window}]))"),
            # python/sglang/srt/observability/metrics_collector.py: histogram sglang:queue_time_seconds,
            # its _count
            Family(
                Reading.QUEUE_TIME_COUNT, "sum by ({by}) (rate(sglang:queue_time_seconds_count[{window}]))"
            ),
            # python/sglang/srt/observability/metrics_collector.py: gauge sglang:num_running_reqs
            Family(Reading.REPLICAS_REPORTING, "count by ({by}) (sglang:num_running_reqs)"),
        ),
        "sgl-project/sglang python/sglang/srt/observability/metrics_collector.py",
        image=r"sglang",
        labels={"engine_type": "unified", "tp_rank": "0", "pp_rank": "0"},
        # python/sglang/srt/observability/metrics_collector.py: engine_type (prefill, decode,
        # unified) from --disaggregation-mode
        role_label="engine_type",
    )
)

# Hugging Face TGI. Source: huggingface/text-generation-inference docs/source/reference/metrics.md.
# TGI series carry no model label: select on the labels service discovery adds (namespace, pod,
# job). Token rates come from the per-request histograms' _sum (input length at admission,
# generated tokens at completion). TGI exports no time-to-first-token histogram and no KV-cache
# gauge, so those inputs are unknown for this engine.
TGI = register(
    Preset(
        "tgi",
        (
            # docs/source/reference/metrics.md: gauge tgi_queue_size
            Family(Input.QUEUE_WAITING, "sum by ({by}) (tgi_queue_size)"),
            # docs/source/reference/metrics.md: gauge tgi_batch_current_size
            Family(Input.REQUESTS_RUNNING, "sum by ({by}) (tgi_batch_current_size)"),
            # docs/source/reference/metrics.md: histogram tgi_request_input_length (_sum)
            Family(Input.PROMPT_TOKENS_PER_S, "sum by ({by}) (rate(tgi_request_input_length_sum[{window}]))"),
            # docs/source/reference/metrics.md: histogram tgi_request_generated_tokens (_sum)
            Family(
                Input.GENERATION_TOKENS_PER_S,
                "sum by ({by}) (rate(tgi_request_generated_tokens_sum[{window}]))",
            ),
            # docs/source/reference/metrics.md: gauge tgi_queue_size, one series a pod
            Family(Reading.REPLICAS_REPORTING, "count by ({by}) (tgi_queue_size)"),
        ),
        "huggingface/text-generation-inference docs/source/reference/metrics.md",
        image=r"text-generation-inference",
        model_label=None,
    )
)

# NVIDIA Triton with the TensorRT-LLM backend. Sources: triton-inference-server/tensorrtllm_backend
# inflight_batcher_llm/src/custom_metrics_reporter/custom_metrics_reporter.cc and Triton's
# metrics guide, triton-inference-server/server docs/user_guide/metrics.md. Labels: model,
# version. The "waiting" request type and the KV "fraction" exist in newer backends only.
TRITON = register(
    Preset(
        "triton",
        (
            # inflight_batcher_llm/src/custom_metrics_reporter/custom_metrics_reporter.cc:
            # gauge nv_trt_llm_request_metrics, request_type="waiting"
            Family(
                Input.QUEUE_WAITING,
                'sum by ({by}) (nv_trt_llm_request_metrics{{request_type="waiting"}})',
            ),
            # custom_metrics_reporter.cc: gauge nv_trt_llm_request_metrics, request_type="active"
            Family(
                Input.REQUESTS_RUNNING,
                'sum by ({by}) (nv_trt_llm_request_metrics{{request_type="active"}})',
            ),
            # custom_metrics_reporter.cc: histogram nv_llm_input_token_len (_sum; newer builds)
            Family(Input.PROMPT_TOKENS_PER_S, "sum by ({by}) (rate(nv_llm_input_token_len_sum[{window}]))"),
            # custom_metrics_reporter.cc: histogram nv_llm_output_token_len (_sum; newer builds)
            Family(
                Input.GENERATION_TOKENS_PER_S,
                "sum by ({by}) (rate(nv_llm_output_token_len_sum[{window}]))",
            ),
            # custom_metrics_reporter.cc: gauge nv_trt_llm_kv_cache_block_metrics,
            # kv_cache_block_type="fraction"
            Family(
                Input.KV_CACHE_USAGE,
                'avg by ({by}) (nv_trt_llm_kv_cache_block_metrics{{kv_cache_block_type="fraction"}})',
                Combine.MEAN,
            ),
            # docs/user_guide/metrics.md (server): histogram nv_inference_first_response_histogram_ms,
            # milliseconds, with --metrics-config histogram_latencies=true; a decoupled model's
            # first *response*
            Family(
                Reading.TTFT,
                "sum by ({by}) (rate(nv_inference_first_response_histogram_ms_bucket[{window}]))",
                Combine.HISTOGRAM,
                le_scale=0.001,
            ),
            # docs/user_guide/metrics.md (server): histogram nv_inference_first_response_histogram_ms,
            # its _sum in milliseconds
            Family(
                Reading.TTFT_SUM,
                "sum by ({by}) (rate(nv_inference_first_response_histogram_ms_sum[{window}]))",
                le_scale=0.001,
            ),
            # custom_metrics_reporter.cc: gauge nv_trt_llm_request_metrics, one series a pod
            Family(
                Reading.REPLICAS_REPORTING,
                'count by ({by}) (nv_trt_llm_request_metrics{{request_type="active"}})',
            ),
        ),
        "triton-inference-server/tensorrtllm_backend custom_metrics_reporter.cc;"
        " triton-inference-server/server docs/user_guide/metrics.md",
        image=r"tritonserver|tensorrt",
        model_label="model",
        labels={"version": "1"},
    )
)

# NVIDIA Dynamo's frontend, read as the engine: one HTTP frontend in front of its workers, whose
# series sum the model's traffic. Source: ai-dynamo/dynamo lib/runtime/src/metrics/prometheus_names.rs
# (names) and lib/llm/src/http/service/metrics.rs (definitions). Label: model, lower-cased by the
# frontend. queued_requests counts requests with no first response yet; the older names ended in
# _total (gauges despite it) and are read where the current ones are absent, never both. Prompt
# tokens come from the input-sequence histogram's _sum. Unlike vLLM, Dynamo exports max_num_seqs.
# No per-worker series carries the model label, so replicas come from Kubernetes only.
DYNAMO = register(
    Preset(
        "dynamo",
        (
            # lib/runtime/src/metrics/prometheus_names.rs, lib/llm/src/http/service/metrics.rs:
            # gauge dynamo_frontend_queued_requests (older: dynamo_frontend_queued_requests_total)
            Family(
                Input.QUEUE_WAITING,
                "sum by ({by}) (dynamo_frontend_queued_requests)"
                " or sum by ({by}) (dynamo_frontend_queued_requests_total)",
            ),
            # prometheus_names.rs, metrics.rs: gauge dynamo_frontend_inflight_requests
            # (older: dynamo_frontend_inflight_requests_total)
            Family(
                Input.REQUESTS_RUNNING,
                "sum by ({by}) (dynamo_frontend_inflight_requests)"
                " or sum by ({by}) (dynamo_frontend_inflight_requests_total)",
            ),
            # prometheus_names.rs, metrics.rs: histogram dynamo_frontend_input_sequence_tokens (_sum)
            Family(
                Input.PROMPT_TOKENS_PER_S,
                "sum by ({by}) (rate(dynamo_frontend_input_sequence_tokens_sum[{window}]))",
            ),
            # prometheus_names.rs, metrics.rs: counter dynamo_frontend_output_tokens_total
            Family(
                Input.GENERATION_TOKENS_PER_S,
                "sum by ({by}) (rate(dynamo_frontend_output_tokens_total[{window}]))",
            ),
            # prometheus_names.rs, metrics.rs: histogram dynamo_frontend_time_to_first_token_seconds
            Family(
                Reading.TTFT,
                "sum by ({by}) (rate(dynamo_frontend_time_to_first_token_seconds_bucket[{window}]))",
                Combine.HISTOGRAM,
            ),
            # prometheus_names.rs, metrics.rs: histogram dynamo_frontend_time_to_first_token_seconds, its _sum
            Family(
                Reading.TTFT_SUM,
                "sum by ({by}) (rate(dynamo_frontend_time_to_first_token_seconds_sum[{window}]))",
            ),
            # prometheus_names.rs, metrics.rs: histogram dynamo_frontend_inter_token_latency_seconds
            Family(
                Reading.ITL,
                "sum by ({by}) (rate(dynamo_frontend_inter_token_latency_seconds_bucket[{window}]))",
                Combine.HISTOGRAM,
            ),
            # prometheus_names.rs, metrics.rs: histogram dynamo_frontend_inter_token_latency_seconds, its _sum
            Family(
                Reading.ITL_SUM,
                "sum by ({by}) (rate(dynamo_frontend_inter_token_latency_seconds_sum[{window}]))",
            ),
            # prometheus_names.rs, metrics.rs: gauge dynamo_frontend_model_max_num_seqs
            Family(
                Input.SLOTS_PER_REPLICA,
                "max by ({by}) (dynamo_frontend_model_max_num_seqs)",
                Combine.MEAN,
            ),
        ),
        "ai-dynamo/dynamo lib/runtime/src/metrics/prometheus_names.rs, lib/llm/src/http/service/metrics.rs",
        image=r"ai-dynamo",
        model_label="model",
        lowercases_model=True,
        per_pod=False,
    )
)
