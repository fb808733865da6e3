"""The catalogue of exported series: every ``llm_scaler_*`` sample's name, type, labels and help.

``SERIES`` lists every series the decision series exports (``SERIES_BY_NAME`` indexes it),
each a ``SeriesSpec`` that builds its ``prometheus_client`` metric family; the
``*_SERIES`` tables map the Observation, forecast and capacity fields they render to
their series. Every series is listed in ``SERIES`` and documented in ``docs/metrics.md``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric

from scaler.inputs import Input
from scaler.model import INPUTS

TARGET_LABELS = ("namespace", "scaledobject")

Kind = Literal["gauge", "counter", "info"]


@dataclass(frozen=True, slots=True)
class SeriesSpec:
    """One exported series: its sample name, type, labels and meaning."""

    name: str
    kind: Kind
    help: str
    extra_labels: tuple[str, ...] = ()
    per_target: bool = True

    @property
    def labels(self) -> tuple[str, ...]:
        """The label names: namespace and scaledobject when per target, then the series' own."""
        return (TARGET_LABELS if self.per_target else ()) + self.extra_labels

    def family(self, rows: Iterable[tuple[list[str], float]] = ()) -> Metric:
        """The metric family with one sample per row of label values (in ``labels`` order)."""
        if self.kind == "info":
            base = len(self.labels) - len(self.extra_labels)
            info = InfoMetricFamily(self.name.removesuffix("_info"), self.help, labels=self.labels[:base])
            for values, _ in rows:
                info.add_metric(values[:base], dict(zip(self.extra_labels, values[base:], strict=True)))
            return info
        family: GaugeMetricFamily | CounterMetricFamily
        if self.kind == "counter":
            family = CounterMetricFamily(self.name, self.help, labels=self.labels)
        else:
            family = GaugeMetricFamily(self.name, self.help, labels=self.labels)
        for values, value in rows:
            family.add_metric(values, value)
        return family


def _gauge(name: str, help_: str, *extra: str) -> SeriesSpec:
    return SeriesSpec(name, "gauge", help_, extra)


# Observation field -> (series, help), from the input table (scaler.model.INPUTS). Exported
# only when the observation holds the field.
INPUT_SERIES: dict[str, tuple[str, str]] = {
    name: (spec.series, spec.help)
    for name, spec in INPUTS.items()
    if spec.series is not None and not spec.replica_state
}
# Observation fields that default to 0: exported only when the replica counts are known.
REPLICA_STATE_SERIES: dict[str, tuple[str, str]] = {
    name: (spec.series, spec.help)
    for name, spec in INPUTS.items()
    if spec.series is not None and spec.replica_state
}
# Decision.forecast field (scaler.model.ForecastRecord) -> (series, help).
FORECAST_SERIES: dict[str, tuple[str, str]] = {
    "arrivals_per_s": (
        "llm_scaler_offered_requests_per_second",
        "Requests per second offered to the fleet: those served plus the queue's growth"
        " (scaler/decider/demand.py).",
    ),
    Input.PROMPT_TOKENS_PER_S: (  # the ForecastRecord field of the same name
        "llm_scaler_forecast_prompt_tokens_per_second",
        "Offered prompt tokens per second the load signal sized for: the largest forecast within the last"
        " cold start, before the forecast's errors.",
    ),
    "prompt_tokens_per_s_margin": (
        "llm_scaler_forecast_prompt_margin_ratio",
        "The prompt-token forecast's past errors at ttftObjectivePercentile: how far above its plan the"
        " demand has landed (0.2: 20%).",
    ),
    "concurrency": (
        "llm_scaler_forecast_concurrency",
        "Offered sequences in service the load signal sized for (arrivals times time in service), before"
        " the forecast's errors.",
    ),
    "concurrency_margin": (
        "llm_scaler_forecast_concurrency_margin_ratio",
        "The concurrency forecast's past errors at ttftObjectivePercentile.",
    ),
    "busy_replicas_now": (
        "llm_scaler_busy_replicas",
        "Replicas of capacity the demand takes now, in the resource that takes most (no headroom).",
    ),
    "busy_replicas_at_horizon": (
        "llm_scaler_forecast_busy_replicas",
        "Replicas of capacity the planned demand takes, in the resource that takes most (no headroom).",
    ),
    "late_expected": (
        "llm_scaler_expected_late_ratio",
        "Share of first tokens the load signal expects over ttftObjectiveSeconds at its proposal.",
    ),
    "capacity_scale": (
        "llm_scaler_capacity_scale_ratio",
        "What the measured objective multiplies the model's per-replica capacities by before the fleet is"
        " sized (1: the model as measured; above 1 it was pessimistic, below optimistic).",
    ),
}

# Decision.capacity field -> (series, help): what one replica holds, configured or measured (the load
# signal sizes at it times llm_scaler_capacity_scale_ratio).
CAPACITY_SERIES: dict[str, tuple[str, str]] = {
    "prefill_tokens_per_s": (
        "llm_scaler_capacity_prefill_tokens_per_second",
        "Prompt tokens per second one Ready replica computes (configured, or measured from the mean TTFT).",
    ),
    "slots": (
        "llm_scaler_capacity_slots",
        "Sequences one Ready replica runs at once (measured from the KV cache's usage, or while requests"
        " wait on every replica).",
    ),
    "decode_slowdown": (
        "llm_scaler_capacity_decode_slowdown_ratio",
        "How much prefill slows a replica's decoding: 0 when they do not compete, 1 when they add as"
        " GPU time.",
    ),
    "prefill_samples": (
        "llm_scaler_capacity_prefill_measurements",
        "Refreshes that measured the prefill rate since the configured capacities last changed.",
    ),
    "slots_samples": (
        "llm_scaler_capacity_slots_measurements",
        "Refreshes that measured the batch slots since the configured capacities last changed.",
    ),
}

SERIES: tuple[SeriesSpec, ...] = (
    # The decision
    _gauge("llm_scaler_desired_replicas", "Replica target of the latest decision (what GetMetrics answers)."),
    _gauge(
        "llm_scaler_signal_proposed_replicas",
        "Replicas each signal proposed in the latest decision; an abstaining signal has no series.",
        "signal",
    ),
    SeriesSpec(
        "llm_scaler_binding_signal_info",
        "info",
        "The signal whose proposal set the latest target before clamps (value 1).",
        ("signal",),
    ),
    _gauge("llm_scaler_clamp_active", "1 for each clamp that changed the latest target.", "kind"),
    _gauge(
        "llm_scaler_clamp_held_back_replicas",
        "Replicas each active clamp removed from the target (0 for a clamp that raised it).",
        "kind",
    ),
    _gauge(
        "llm_scaler_gpu_held_back_replicas",
        "Replicas the GPU inventory clamp held back and no step past the HPA's tolerance asked again"
        " (0 when none).",
    ),
    _gauge(
        "llm_scaler_prewarm_active", "1 while a pre-warm window (or its cold-start lead) is open, else 0."
    ),
    _gauge("llm_scaler_decision_timestamp_seconds", "Unix time of the observation the latest decision used."),
    _gauge("llm_scaler_input_age_seconds", "Seconds since every demand input was last present."),
    # The inputs the decision was made from
    *(_gauge(name, help_) for name, help_ in INPUT_SERIES.values()),
    *(_gauge(name, help_) for name, help_ in REPLICA_STATE_SERIES.values()),
    *(_gauge(name, help_) for name, help_ in FORECAST_SERIES.values()),
    # Whether the previous decision landed
    _gauge(
        "llm_scaler_landed_replicas",
        "The Deployment's spec.replicas: what landed of the scaler's targets (needs Kubernetes).",
    ),
    _gauge(
        "llm_scaler_landing_gap_replicas",
        "The previous target minus the replicas that landed, with the reason it has not landed"
        " (scaler.decider.landing; 0 with reason landed).",
        "reason",
    ),
    _gauge(
        "llm_scaler_landing_gap_seconds",
        "How long the Deployment has differed from the scaler's target without moving toward it.",
    ),
    # Whether the target can act at all (scaler.inert)
    _gauge(
        "llm_scaler_inert",
        "1 for each reason the target cannot act though it looks healthy, 0 for the others"
        " (scaler.inert: no_series, stale, not_scraped, stranded, stuck, held, not_landed).",
        "reason",
    ),
    # What one replica holds, configured or measured, and where that came from
    *(_gauge(name, help_) for name, help_ in CAPACITY_SERIES.values()),
    SeriesSpec(
        "llm_scaler_capacity_source_info",
        "info",
        "Where each per-replica capacity came from: configured, measured or unknown (value 1).",
        ("resource", "source"),
    ),
    # The policy the ScaledObject's metadata configured
    _gauge(
        "llm_scaler_forecast_horizon_seconds",
        "How far ahead the decision ordered (the cold start: coldStartSeconds, or measured from the pods).",
    ),
    SeriesSpec(
        "llm_scaler_cold_start_source_info",
        "info",
        "Where the cold start came from: configured, measured (p90 of the pods') or default (value 1).",
        ("source",),
    ),
    _gauge("llm_scaler_min_replicas", "minReplicas from the trigger metadata."),
    _gauge(
        "llm_scaler_hpa_tolerance_hold",
        "1 when the HPA will not act on the target: within its tolerance of the current replicas,"
        " and the smallest step past it is beyond maxReplicas (scaler.decider.combine).",
    ),
    _gauge("llm_scaler_max_replicas", "maxReplicas from the trigger metadata."),
    _gauge("llm_scaler_ttft_objective_seconds", "ttftObjectiveSeconds: the TTFT objective."),
    _gauge(
        "llm_scaler_ttft_objective_percentile",
        "ttftObjectivePercentile: the share of first tokens, in percent, that must meet the objective.",
    ),
    _gauge(
        "llm_scaler_max_staleness_seconds",
        "maxStalenessSeconds: input age beyond which GetMetrics answers UNAVAILABLE.",
    ),
    # Counters kept by the sink
    SeriesSpec(
        "llm_scaler_decisions_total", "counter", "Decisions published, by binding signal.", ("signal",)
    ),
    SeriesSpec(
        "llm_scaler_pending_pod_seconds_avoided_total",
        "counter",
        "Pod-seconds of Pending pods the GPU inventory clamp avoided: held-back replicas times the"
        " refresh interval, summed over decisions (divide by 60 for pod-minutes).",
    ),
    SeriesSpec(
        "llm_scaler_refresh_interval_seconds",
        "gauge",
        "Seconds between refreshes of every target's decision (--refresh-interval).",
        per_target=False,
    ),
    SeriesSpec(
        "llm_scaler_refresh_duration_seconds",
        "gauge",
        "Wall time the last refresh took: observing every target in one batch and deciding.",
        per_target=False,
    ),
    SeriesSpec("llm_scaler_refreshes_total", "counter", "Refreshes completed.", per_target=False),
    SeriesSpec("llm_scaler_targets", "gauge", "ScaledObjects the scaler decides for.", per_target=False),
    SeriesSpec(
        "llm_scaler_grpc_requests_total",
        "counter",
        "ExternalScaler RPCs answered, by method and gRPC status code.",
        ("method", "code"),
        per_target=False,
    ),
)

SERIES_BY_NAME: dict[str, SeriesSpec] = {s.name: s for s in SERIES}
