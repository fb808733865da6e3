"""Decision seriess as Prometheus series, computed at scrape time, and the server's telemetry.

``DecisionCollector`` is a custom ``prometheus_client`` collector: on every scrape it reads
the current targets (a callable, normally ``TargetRegistry.targets``) and renders each
target's latest ``Decision`` and the inputs it was made from. Nothing is copied into
gauges between scrapes, so a forgotten target's series disappear with it. The two
counters (decisions by binding signal, pending-pod seconds avoided) are kept by the
same object acting as a decision sink (``record``), because a scrape cannot see the
decisions made between two scrapes. The server's own telemetry (refresh duration and
count, targets, RPCs by method and code) is read from callables at the same scrape.
``install`` registers a collector on the registry it is given and adds its sink; the series
it renders are catalogued in scaler.outputs.series.

Absent inputs are absent series: a TTFT the source could not read is not exported as
0, and ``pending``/``starting`` replicas are only exported when the replica counts
are known.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric

from scaler.hpa import tolerances, within_hpa_tolerance
from scaler.model import Decision, InertReason, Signal
from scaler.outputs.series import CAPACITY_SERIES, FORECAST_SERIES, INPUT_SERIES, REPLICA_STATE_SERIES, SERIES
from scaler.targets.registry import Target
from scaler.targets.runtime import Runtime


class DecisionCollector:
    """Collector of decision seriess, and the decision sink that keeps its counters.

    ``targets`` returns the current targets; ``clock`` returns the time (Unix seconds)
    used for ages. ``record`` is called from the refresh loop; ``collect`` from the
    HTTP server's thread, so the counters are guarded by a lock.
    """

    def __init__(
        self,
        targets: Callable[[], Iterable[Target]],
        clock: Callable[[], float],
        refresh_interval_s: float,
        server_stats: Callable[[], Mapping[str, float]] | None = None,
        rpc_counts: Callable[[], Mapping[tuple[str, str], int]] | None = None,
    ) -> None:
        self._targets = targets
        self._clock = clock
        self.refresh_interval_s = refresh_interval_s
        self._server_stats = server_stats
        self._rpc_counts = rpc_counts
        self._lock = threading.Lock()
        self._decisions: dict[tuple[str, str, str], float] = {}
        self._avoided: dict[tuple[str, str], float] = {}

    # ---- sink ----------------------------------------------------------------------

    def record(self, target: Target, decision: Decision) -> None:
        """Count one published decision (a ``DecisionSink``)."""
        key = (target.key.namespace, target.key.name)
        with self._lock:
            signal_key = (*key, decision.binding.value)
            self._decisions[signal_key] = self._decisions.get(signal_key, 0.0) + 1.0
            # Each decision stands until the next refresh; a held-back replica would have
            # been a Pending pod for that long.
            avoided = decision.gpu_held_back * self.refresh_interval_s
            self._avoided[key] = self._avoided.get(key, 0.0) + avoided

    # ---- collector -----------------------------------------------------------------

    def describe(self) -> Iterator[Metric]:
        """The families without samples: lets the registry reject name clashes."""
        for spec in SERIES:
            yield spec.family()

    def collect(self) -> Iterator[Metric]:
        """Every series at scrape time: each target's latest decision, the counters and telemetry."""
        rows: dict[str, list[tuple[list[str], float]]] = {spec.name: [] for spec in SERIES}

        def put(name: str, labels: list[str], value: float) -> None:
            rows[name].append((labels, float(value)))

        now = self._clock()
        live: set[tuple[str, str]] = set()
        for target in self._targets():
            labels = [target.key.namespace, target.key.name]
            live.add((target.key.namespace, target.key.name))
            policy = target.policy
            put("llm_scaler_min_replicas", labels, policy.min_replicas)
            put("llm_scaler_max_replicas", labels, policy.max_replicas)
            put("llm_scaler_ttft_objective_seconds", labels, policy.ttft_objective_seconds)
            put("llm_scaler_ttft_objective_percentile", labels, policy.ttft_objective_percentile)
            put("llm_scaler_max_staleness_seconds", labels, policy.max_staleness_seconds)
            decision = target.latest
            if decision is not None and decision.inputs_complete_at is not None:
                put("llm_scaler_input_age_seconds", labels, decision.input_age(now, target.registered_at))
            if decision is not None:
                _decision_rows(put, labels, decision)

        with self._lock:
            # Counters of targets the registry forgot go with them; a target that comes
            # back starts from zero, which rate() and increase() read as a reset.
            for gone in [k for k in self._avoided if k not in live]:
                del self._avoided[gone]
            for gone_signal in [k for k in self._decisions if k[:2] not in live]:
                del self._decisions[gone_signal]
            for (namespace, name, signal), count in self._decisions.items():
                put("llm_scaler_decisions_total", [namespace, name, signal], count)
            for (namespace, name), seconds in self._avoided.items():
                put("llm_scaler_pending_pod_seconds_avoided_total", [namespace, name], seconds)
        put("llm_scaler_refresh_interval_seconds", [], self.refresh_interval_s)
        put("llm_scaler_targets", [], len(live))
        if self._server_stats is not None:
            stats = self._server_stats()
            put("llm_scaler_refresh_duration_seconds", [], stats["refresh_duration_seconds"])
            put("llm_scaler_refreshes_total", [], stats["refreshes"])
        if self._rpc_counts is not None:
            for (method, code), count in sorted(dict(self._rpc_counts()).items()):
                put("llm_scaler_grpc_requests_total", [method, code], count)
        for spec in SERIES:
            yield spec.family(rows[spec.name])


def _decision_rows(
    put: Callable[[str, list[str], float], None], labels: list[str], decision: Decision
) -> None:
    put("llm_scaler_desired_replicas", labels, decision.replicas)
    put("llm_scaler_decision_timestamp_seconds", labels, decision.now.timestamp())
    for signal, replicas in decision.proposals.items():
        put("llm_scaler_signal_proposed_replicas", [*labels, signal.value], replicas)
    put("llm_scaler_binding_signal_info", [*labels, decision.binding.value], 1)
    for clamp in decision.clamps:
        put("llm_scaler_clamp_active", [*labels, clamp.kind.value], 1)
        put("llm_scaler_clamp_held_back_replicas", [*labels, clamp.kind.value], clamp.held_back)
    put("llm_scaler_gpu_held_back_replicas", labels, decision.gpu_held_back)
    put(
        "llm_scaler_hpa_tolerance_hold",
        labels,
        1
        if within_hpa_tolerance(
            decision.replicas, decision.observation.current_replicas, tolerances(decision.observation.hpa)
        )
        else 0,
    )
    put("llm_scaler_prewarm_active", labels, 1 if Signal.PREWARM in decision.proposals else 0)
    inert = {i.reason for i in decision.inert}
    for reason in InertReason:  # every reason, 0 or 1: an alert compares, a panel shows which
        put("llm_scaler_inert", [*labels, reason.value], 1 if reason in inert else 0)

    obs = decision.observation
    for field, (name, _) in INPUT_SERIES.items():
        value = getattr(obs, field)
        if value is not None:
            put(name, labels, value)
    if obs.current_replicas is not None:
        for field, (name, _) in REPLICA_STATE_SERIES.items():
            if field not in obs.missing:
                put(name, labels, getattr(obs, field))
    for key, (name, _) in FORECAST_SERIES.items():
        value = getattr(decision.forecast, key)
        if value is not None:
            put(name, labels, value)
    _learned_rows(put, labels, decision)


def _learned_rows(
    put: Callable[[str, list[str], float], None], labels: list[str], decision: Decision
) -> None:
    """What the decision used of what the engine learns (cold start, capacity), and what landed."""
    landing = decision.landing
    if landing is not None:
        put("llm_scaler_landed_replicas", labels, landing.landed)
        put("llm_scaler_landing_gap_replicas", [*labels, landing.reason], landing.gap)
        put("llm_scaler_landing_gap_seconds", labels, landing.since_s)
    if decision.lead is not None:
        put("llm_scaler_forecast_horizon_seconds", labels, decision.lead.seconds)
        source = decision.lead.source.split(" ", 1)[0]  # "measured p90 over 12 pods" -> "measured"
        put("llm_scaler_cold_start_source_info", [*labels, source], 1)
    capacity = decision.capacity
    if capacity is not None:
        for key, (name, _) in CAPACITY_SERIES.items():
            value = getattr(capacity, key)
            if value is not None:
                put(name, labels, value)
        put("llm_scaler_capacity_source_info", [*labels, "prefill", capacity.prefill_source], 1)
        put("llm_scaler_capacity_source_info", [*labels, "slots", capacity.slots_source], 1)


def install(
    runtime: Runtime,
    registry: CollectorRegistry,
    rpc_counts: Callable[[], Mapping[tuple[str, str], int]] | None = None,
) -> DecisionCollector:
    """Register a decision series for ``runtime``'s targets on ``registry`` and add its sink."""

    def server_stats() -> dict[str, float]:
        return {"refresh_duration_seconds": runtime.last_refresh_seconds, "refreshes": runtime.refreshes}

    collector = DecisionCollector(
        runtime.registry.targets, runtime.now_timestamp, runtime.refresh_interval_s, server_stats, rpc_counts
    )
    registry.register(collector)
    runtime.sinks.append(collector.record)
    return collector
