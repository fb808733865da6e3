"""The input table: every observation input, keyed by one enum, with what each layer needs of it.

``Input`` is the table. Each member is an input's name (the ``Observation`` field that holds it)
and its row (``Input.X.spec``, an ``InputSpec``): the ``llm_scaler_input_*`` gauge that exports
it, its help, where it comes from, the ``TargetPolicy`` field with its PromQL under
``engine: custom``, whether it is a count, its default. Validation (``Observation``), the exported
series (``scaler.outputs.series``), the custom queries (``scaler.config``, ``scaler.sources``),
the Observation builder (``scaler.readings``), the engine presets (``scaler.presets``: a
query per input) and docs/metrics.md's input table (``./dev docs``) all read it from here.

``Reading`` names what a query reads that is not an input itself: a histogram whose buckets give
several inputs (``scaler.readings`` derives them, once), its ``_sum``, the pods reporting, a
router's stale endpoints.

Adding an input: a row here, its typed field in ``Observation`` (``scaler.model``: its name is the
row's, which the model checks at import), and the query that reads it (``scaler.presets``,
or a Kubernetes read in ``scaler.sources.live``). ``tests/test_inputs.py`` fails when an input's
name is written as a string anywhere else in ``scaler/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class InputSource(StrEnum):
    """Where an observation input comes from."""

    PROMETHEUS = "prometheus"  # the engine's metrics, through the preset's (or custom) queries
    KUBERNETES = "kubernetes"  # the workload's pods, Deployment and HPA, through the API


@dataclass(frozen=True, slots=True)
class InputSpec:
    """One input's row of the table.

    ``series``: the ``llm_scaler_input_*`` gauge that exports it (None: not exported as an
    input); ``help``: that gauge's help, which doubles as the input's description;
    ``custom_query``: the ``TargetPolicy`` field holding its PromQL under ``engine: custom``;
    ``count``: a whole number (validated ``>= 0``) rather than a finite float ``>= 0``;
    ``replica_state``: exported only with the replica counts; ``default``: its value when no
    source gives it (None: unknown); ``doc``: what docs/metrics.md says after the help.
    """

    series: str | None
    help: str
    source: InputSource
    custom_query: str | None = None
    count: bool = False
    replica_state: bool = False
    default: Any = None
    doc: str = ""


_P, _K = InputSource.PROMETHEUS, InputSource.KUBERNETES


class Input(StrEnum):
    """The observation inputs, in the Observation's field order, each with its row (``spec``)."""

    spec: InputSpec

    def __new__(cls, name: str, spec: InputSpec) -> Input:
        """A member whose value is the input's name and whose row is ``spec``."""
        member = str.__new__(cls, name)
        member._value_ = name
        member.spec = spec
        return member

    QUEUE_WAITING = (
        "queue_waiting",
        InputSpec(
            "llm_scaler_input_waiting_requests",
            "Requests waiting in the servers' queues.",
            _P,
            custom_query="queue_query",
        ),
    )
    REQUESTS_RUNNING = (
        "requests_running",
        InputSpec(
            "llm_scaler_input_running_requests",
            "Requests the servers are running.",
            _P,
            custom_query="running_query",
        ),
    )
    PROMPT_TOKENS_PER_S = (
        "prompt_tokens_per_s",
        InputSpec(
            "llm_scaler_input_prompt_tokens_per_second",
            "Prompt (prefill) tokens per second across the servers.",
            _P,
            custom_query="prompt_tokens_query",
        ),
    )
    GENERATION_TOKENS_PER_S = (
        "generation_tokens_per_s",
        InputSpec(
            "llm_scaler_input_generation_tokens_per_second",
            "Generated (decode) tokens per second across the servers.",
            _P,
            custom_query="generation_tokens_query",
        ),
    )
    CURRENT_REPLICAS = (
        "current_replicas",
        InputSpec(
            "llm_scaler_input_current_replicas",
            "Replicas of the workload (pods that exist).",
            _K,
            count=True,
            doc="Pending ones included.",
        ),
    )
    READY_REPLICAS = (
        "ready_replicas",
        InputSpec(
            "llm_scaler_input_ready_replicas",
            "Replicas whose pods are Ready.",
            _K,
            count=True,
        ),
    )
    GPU_SCHEDULABLE_REPLICAS = (
        "gpu_schedulable_replicas",
        InputSpec(
            "llm_scaler_input_gpu_schedulable_replicas",
            "More whole replicas the nodes' free GPUs can still hold.",
            _K,
            count=True,
        ),
    )
    PENDING_REPLICAS = (
        "pending_replicas",
        InputSpec(
            "llm_scaler_input_pending_replicas",
            "Replicas whose pods are Pending (not bound).",
            _K,
            count=True,
            replica_state=True,
            default=0,
        ),
    )
    STARTING_REPLICAS = (
        "starting_replicas",
        InputSpec(
            "llm_scaler_input_starting_replicas",
            "Replicas bound to a node but not Ready yet (capacity on its way).",
            _K,
            count=True,
            replica_state=True,
            default=0,
        ),
    )
    TTFT_P95_SECONDS = (
        "ttft_p95_seconds",
        InputSpec(
            "llm_scaler_input_ttft_p95_seconds",
            "Time to first token, 95th percentile.",
            _P,
            custom_query="ttft_p95_query",
        ),
    )
    TTFT_P99_SECONDS = (
        "ttft_p99_seconds",
        InputSpec(
            "llm_scaler_input_ttft_p99_seconds",
            "Time to first token, 99th percentile.",
            _P,
            custom_query="ttft_p99_query",
        ),
    )
    TTFT_OVER_OBJECTIVE = (
        "ttft_over_objective",
        InputSpec(
            "llm_scaler_input_ttft_over_objective_ratio",
            "Share of the rate window's first tokens slower than ttftObjectiveSeconds, 0 to 1.",
            _P,
            doc=(
                "From the TTFT histogram's buckets (exact at the bucket bounds, log-linear between them; "
                "`scaler/histogram.py`). What the capacity scale is calibrated against "
                "(scaler/decider/calibration.py). Absent for `engine: custom` (its queries give quantiles "
                "only)."
            ),
        ),
    )
    TTFT_MEAN_SECONDS = (
        "ttft_mean_seconds",
        InputSpec(
            "llm_scaler_input_ttft_mean_seconds",
            ("Mean time to first token over the rate window (the TTFT histogram's sum over its count)."),
            _P,
            doc=(
                "Where the engine exports no phase time, what the prefill rate is bounded from "
                "(`scaler/decider/capacity/`). Absent for "
                "`engine: custom` and engines without a TTFT histogram."
            ),
        ),
    )
    REQUESTS_PER_S = (
        "requests_per_s",
        InputSpec(
            "llm_scaler_input_requests_per_second",
            ("Requests per second whose first token came in the rate window (the TTFT histogram's count)."),
            _P,
            doc="With the queue's growth, the requests offered to the fleet (`scaler/decider/demand.py`).",
        ),
    )
    REQUESTS_RUNNING_MAX = (
        "requests_running_max",
        InputSpec(
            "llm_scaler_input_running_requests_max",
            "Requests the busiest server runs (the largest over the pods).",
            _P,
            doc=(
                "`max` over the pods of the running gauge. Where `max_num_seqs` binds before the KV "
                "cache fills, what a replica with requests waiting for a slot runs is its cap "
                "(`scaler/decider/capacity/`)."
            ),
        ),
    )
    KV_CACHE_USAGE_MAX = (
        "kv_cache_usage_max",
        InputSpec(
            "llm_scaler_input_kv_cache_usage_max_ratio",
            "KV cache usage of the fullest server, 0 to 1.",
            _P,
            doc="`max` over the pods of the KV gauge: whether any replica's batch is held by its cache.",
        ),
    )
    PREFILL_BUSY_MAX = (
        "prefill_busy_max",
        InputSpec(
            "llm_scaler_input_prefill_busy_max_ratio",
            "Requests in prefill on the busiest server, on average over the rate window (Little's law).",
            _P,
            doc=(
                "`max` over the pods of the rate of vLLM's `vllm:request_prefill_time_seconds_sum`: "
                "near 1 on a replica whose prompts queue behind its prefill (`scaler/decider/capacity/`)."
            ),
        ),
    )
    QUEUE_TIME_MEAN_SECONDS = (
        "queue_time_mean_seconds",
        InputSpec(
            "llm_scaler_input_queue_time_mean_seconds",
            (
                "Mean time a request waited before the engine first scheduled it, over the rate window "
                "(its queue-time histogram's sum over its count)."
            ),
            _P,
            doc=(
                "vLLM's `vllm:request_queue_time_seconds` (time in WAITING: `scheduled_ts - queued_ts`, "
                "`vllm/v1/metrics/stats.py`), SGLang's `sglang:queue_time_seconds`. Observed when a "
                "request finishes. With the prefill time, it names why requests wait "
                "(`scaler/decider/capacity/`); it bounds how far the measured objective cuts the "
                "capacity scale (`scaler/decider/calibration.py`)."
            ),
        ),
    )
    PREFILL_TIME_MEAN_SECONDS = (
        "prefill_time_mean_seconds",
        InputSpec(
            "llm_scaler_input_prefill_time_mean_seconds",
            (
                "Mean time from a request's first scheduling to its first token, over the rate window "
                "(its prefill-time histogram's sum over its count)."
            ),
            _P,
            doc=(
                "vLLM's `vllm:request_prefill_time_seconds` (`first_token_ts - scheduled_ts`, "
                "`vllm/v1/metrics/stats.py`), observed when a request finishes. Prompt tokens per "
                "request over it is the prefill rate a request sees, measured rather than inferred "
                "(`scaler/decider/capacity/`)."
            ),
        ),
    )
    KV_CACHE_USAGE = (
        "kv_cache_usage",
        InputSpec(
            "llm_scaler_input_kv_cache_usage_ratio",
            "KV cache usage, 0 to 1.",
            _P,
            custom_query="kv_cache_query",
            doc=(
                "vLLM's `vllm:kv_cache_usage_perc`; SGLang's `sglang:kv_used_tokens` over used, available "
                "and evictable tokens, or `sglang:token_usage` where those are absent "
                "([engines.md](engines.md#what-each-engine-exports)); Triton's KV block fraction."
            ),
        ),
    )
    ITL_MEAN_SECONDS = (
        "itl_mean_seconds",
        InputSpec(
            "llm_scaler_input_itl_mean_seconds",
            ("Mean inter-token latency over the rate window (the ITL histogram's sum over its count)."),
            _P,
            doc=(
                "vLLM's `vllm:inter_token_latency_seconds` (the older "
                "`vllm:time_per_output_token_seconds` where only it exists), SGLang's "
                "`sglang:inter_token_latency_seconds`, Dynamo's "
                "`dynamo_frontend_inter_token_latency_seconds`. What the batch the ITL objective allows "
                "is learned from (`scaler/decider/capacity/`)."
            ),
        ),
    )
    ITL_TAIL_SECONDS = (
        "itl_tail_seconds",
        InputSpec(
            "llm_scaler_input_itl_tail_seconds",
            (
                "Inter-token latency at the objective's percentile (ttftObjectivePercentile), from its "
                "histogram."
            ),
            _P,
        ),
    )
    ITL_OVER_OBJECTIVE = (
        "itl_over_objective",
        InputSpec(
            "llm_scaler_input_itl_over_objective_ratio",
            "Share of the rate window's inter-token gaps slower than itlObjectiveSeconds, 0 to 1.",
            _P,
            doc="Absent without `itlObjectiveSeconds`.",
        ),
    )
    ROUTER_QUEUE_WAITING = (
        "router_queue_waiting",
        InputSpec(
            "llm_scaler_input_router_waiting_requests",
            "Requests waiting in the router's queue, not yet sent to a server (router metadata).",
            _P,
            doc=(
                "llm-d's flow-control queue (`llm_d_epp_flow_control_queue_size`, or the older "
                "`inference_extension_flow_control_queue_size` where only it exists) or Dynamo's KV "
                "router queue (`dynamo_frontend_router_queue_pending_requests`). Counted as waiting "
                "demand beside the servers' own queue. Absent with `router: none`."
            ),
        ),
    )
    ROUTER_SATURATION = (
        "router_saturation",
        InputSpec(
            "llm_scaler_input_router_saturation_ratio",
            "The router's pool saturation (llm-d flow control: 1 is where it stops dispatching).",
            _P,
            doc=(
                "`llm_d_epp_flow_control_pool_saturation`. Read only while "
                "`llm_d_epp_flow_control_stale_endpoints` is 0: stale endpoints read as saturated. At 1 "
                "or more every replica is full, which measures the batch slots (`scaler/decider/capacity/`)."
            ),
        ),
    )
    SLOTS_PER_REPLICA = (
        "slots_per_replica",
        InputSpec(
            "llm_scaler_input_slots_per_replica",
            "Sequences one replica runs at most (max_num_seqs), where the stack exports it.",
            _P,
            doc=(
                "Dynamo's `dynamo_frontend_model_max_num_seqs`; vLLM does not export it. The batch slots "
                "(`scaler/decider/capacity/`) are read from it, or from the KV cache where that says fewer."
            ),
        ),
    )
    QUEUE_WAITING_CAPACITY = (
        "queue_waiting_capacity",
        InputSpec(
            "llm_scaler_input_waiting_capacity_requests",
            "Of the requests waiting in the servers' queues, those waiting for room (vLLM's "
            'num_requests_waiting_by_reason{reason="capacity"}), where the server says why.',
            _P,
            doc=(
                '`vllm:num_requests_waiting_by_reason{reason="capacity"}` (vLLM PR #38435): requests '
                "queued and not yet tried, waiting for batch slots or KV blocks. Unknown, never 0, on a "
                "vLLM without the split (and on every other engine): every waiting request then counts as "
                "waiting for room (`scaler/decider/capacity/saturation.py`). With `deferred` it sums to "
                "`queue_waiting`."
            ),
        ),
    )
    QUEUE_WAITING_DEFERRED = (
        "queue_waiting_deferred",
        InputSpec(
            "llm_scaler_input_waiting_deferred_requests",
            "Of the requests waiting in the servers' queues, those tried and deferred by a transient "
            "constraint (LoRA budget, a KV transfer, a blocked request), where the server says why.",
            _P,
            doc=(
                '`vllm:num_requests_waiting_by_reason{reason="deferred"}` (vLLM PR #38435): waiting that '
                "more replicas would not shorten. Unknown, never 0, where the split is not exported."
            ),
        ),
    )
    KV_CACHE_TOKENS = (
        "kv_cache_tokens",
        InputSpec(
            "llm_scaler_input_kv_cache_tokens",
            "Tokens the servers' KV caches hold in all (their size, not their use), where the engine"
            " exports it.",
            _P,
            doc=(
                "The `kv_cache_size_tokens` label of vLLM's `vllm:cache_config_info` (an info gauge of "
                "value 1; vLLM PR #42206, merged 2026-05: the group-aware size of each engine's cache, the "
                'figure the boot log prints as "GPU KV cache size: N tokens"), summed over the engines '
                "that export it. Unknown on a vLLM before it, whose `cache_config_info` carries no such "
                "label. A Ready replica's share, over the tokens a running sequence holds, starts the batch "
                "slots before the cache's use is first read (`scaler/decider/capacity/slots.py`)."
            ),
        ),
    )
    COLD_START_SECONDS = (
        "cold_start_seconds",
        InputSpec(
            "llm_scaler_input_cold_start_seconds",
            "Measured cold start: p90 of the Deployment's recent pods' creation to Ready.",
            _K,
            doc=(
                "Over the 20 most recent pods that became Ready (`scaler/decider/coldstart.py`). Absent until"
                " one pod is measured; needs Kubernetes."
            ),
        ),
    )
    COLD_START_PENDING_SECONDS = (
        "cold_start_pending_seconds",
        InputSpec(
            "llm_scaler_input_cold_start_pending_seconds",
            (
                "Measured time Pending: p90 of the recent pods' creation to scheduled (near 0 with the "
                "GPU check)."
            ),
            _K,
        ),
    )
    COLD_START_SAMPLES = (
        "cold_start_samples",
        InputSpec(
            "llm_scaler_input_cold_start_samples",
            "Recent pods the measured cold start rests on.",
            _K,
            count=True,
            default=0,
            doc="It replaces the default lead from 5.",
        ),
    )
    DEPLOYMENT_REPLICAS = (
        "deployment_replicas",
        InputSpec(
            None,
            "The Deployment's spec.replicas: what landed.",
            _K,
            count=True,
        ),
    )
    KUEUE_QUOTA_REPLICAS = (
        "kueue_quota_replicas",
        InputSpec(
            "llm_scaler_input_kueue_quota_replicas",
            (
                "Replicas the workload's Kueue ClusterQueue admits: those admitted plus those its free "
                "GPU quota (and its cohort's) holds."
            ),
            _K,
            count=True,
            doc=(
                "Absent when Kueue does not admit the workload's pods (no `kueue.x-k8s.io/queue-name` "
                "label, no pod held by the `kueue.x-k8s.io/admission` gate). The `kueue_quota` clamp "
                "(`scaler/inventory/kueue.py`, docs/kubernetes.md)."
            ),
        ),
    )


class Reading(StrEnum):
    """What a query reads that is not an input itself; inputs are derived from it (``scaler.readings``)."""

    TTFT = "ttft"  # the TTFT histogram's bucket rates: p95, p99, the share over the objective, requests/s
    TTFT_SUM = "ttft_sum"  # the rate of its _sum: over the count's rate, the mean TTFT
    ITL = "itl"  # the inter-token latency histogram's bucket rates: its tail and the share over the objective
    ITL_SUM = "itl_sum"  # the rate of its _sum: over the count's rate, the mean ITL
    QUEUE_TIME_SUM = "queue_time_sum"  # the rate of the queue-time histogram's _sum (seconds per second)
    QUEUE_TIME_COUNT = "queue_time_count"  # the rate of its _count: over it, the mean queue time
    PREFILL_TIME_SUM = "prefill_time_sum"  # the rate of the prefill-time histogram's _sum
    PREFILL_TIME_COUNT = "prefill_time_count"  # the rate of its _count: over it, the mean prefill time
    PREFILL_TIME_SUM_MAX = "prefill_time_sum_max"  # its _sum's rate on the busiest pod: prefill_busy_max
    REPLICAS_REPORTING = "replicas_reporting"  # pods exporting metrics: the replicas, without Kubernetes
    ROUTER_STALE_ENDPOINTS = "router_stale_endpoints"  # llm-d: endpoints whose saturation reads 1 stale
    ROUTER_TTFT = "router_ttft"  # the router's TTFT histogram (its queue included): the TTFT users see
    # llm-d: requests its EPP has sent to the endpoints of the target's namespace and not seen finish.
    # Never demand (the servers' own queue and running count it): a sign that the EPP runs and
    # dispatches, so that its flow-control queue, when absent, is read as holding nothing.
    ROUTER_INFLIGHT = "router_inflight"
    STUCK_WAITING = "stuck_waiting"  # per pod whose engine is stuck (scaler.readings): its requests waiting


Key = Input | Reading  # what a query reads: an input, or what inputs are derived from


def key_of(name: str) -> str:
    """The Input or Reading whose name is ``name`` (a preset written with plain strings reads as one
    written with the members); ``name`` itself when it is neither."""
    found = Input._value2member_map_.get(name) or Reading._value2member_map_.get(name)
    return str(name) if found is None else found  # type: ignore[return-value]
