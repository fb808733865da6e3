"""The live source: Prometheus for the serving signals, Kubernetes for replicas and GPUs.

``observe`` runs the batched Prometheus reads in a worker thread (RPCs never wait on
it) and looks each target's workload up in the Kubernetes inventory's local cache.
Every unknown field carries its reason into ``Observation.missing``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from scaler.histogram import itl_inputs, ttft_inputs
from scaler.inventory import Unknown, WorkloadState
from scaler.model import INPUTS, InputSource, Observation
from scaler.registry import Target, TargetKey
from scaler.sources.history import History
from scaler.sources.prometheus import PrometheusReader, TargetInputs, TargetQuery

# The inputs Prometheus answers (from the input table): unknown together when it cannot.
PROMETHEUS_FIELDS = tuple(name for name, spec in INPUTS.items() if spec.source is InputSource.PROMETHEUS)
# The counts that say whether the workload is known at all.
WORKLOAD_FIELDS = ("current_replicas", "ready_replicas", "gpu_schedulable_replicas")


class WorkloadProvider(Protocol):
    """What the Kubernetes inventory offers (scaler.sources.kubernetes.KubernetesInventory)."""

    def workload(
        self, namespace: str, scaledobject_name: str, gpus_per_replica_override: int | None = None
    ) -> WorkloadState | Unknown:
        """The workload's replica counts and GPU room, or why they cannot be known now."""


def _router_inputs(
    target: Target, got: TargetInputs, values: dict[str, Any], missing: dict[str, str]
) -> None:
    """The router's reads: its saturation only with no stale endpoint (they read as saturated),
    and its TTFT, which counts the time in its queue, as the TTFT the objective is checked against."""
    stale = got.values.get("router_stale_endpoints")
    if "router_saturation" in values and stale != 0:
        values.pop("router_saturation")
        missing["router_saturation"] = (
            f"{stale:g} stale endpoints read as saturated"
            if stale is not None
            else f"stale endpoints unknown ({got.missing.get('router_stale_endpoints', 'no data')})"
        )
    if got.router_ttft_buckets:
        seen = ttft_inputs(target.policy.ttft_objective_seconds, got.router_ttft_buckets)
        for name in ("ttft_p95_seconds", "ttft_p99_seconds", "ttft_over_objective"):
            if seen[name] is not None:
                values[name] = seen[name]
                missing.pop(name, None)


class LiveSource:
    """The live ObservationSource: Prometheus reads plus the Kubernetes inventory (module docstring)."""

    def __init__(
        self,
        prometheus: PrometheusReader,
        workloads: WorkloadProvider | None = None,
        log: Any = None,
        history: History | None = None,
    ) -> None:
        self.prometheus = prometheus
        self.history = history or History(prometheus)
        self.workloads = workloads
        self.log = log
        self.last_errors: dict[str, str] = {}

    def expects_data(self, target: Target) -> bool:
        """True when the target has somewhere to read from, so missing data means a fault."""
        return self.prometheus.address_for(target.policy) is not None

    def _queries(self, targets: Sequence[Target]) -> tuple[list[TargetQuery], dict[TargetKey, str]]:
        queries: list[TargetQuery] = []
        unaddressed: dict[TargetKey, str] = {}
        for t in targets:
            address = self.prometheus.address_for(t.policy)
            if address is None:
                unaddressed[t.key] = (
                    "no Prometheus address: set prometheusAddress or scaler serve --prometheus"
                )
            else:
                queries.append(TargetQuery(t.key, t.policy, address))
        return queries, unaddressed

    async def observe(self, targets: Sequence[Target], now: datetime) -> Mapping[TargetKey, Observation]:
        """Every target's Observation at ``now``, read in a worker thread."""
        # All of it in a worker thread: the reads wait on the network, and building a
        # thousand observations would otherwise hold the event loop that registers targets.
        return await asyncio.to_thread(self._observe, list(targets), now)

    def _observe(self, targets: Sequence[Target], now: datetime) -> dict[TargetKey, Observation]:
        queries, unaddressed = self._queries(targets)
        inputs: dict[Any, TargetInputs] = self.prometheus.read(queries, now) if queries else {}
        out: dict[TargetKey, Observation] = {}
        for t in targets:
            got = inputs.get(t.key) or TargetInputs()
            values: dict[str, Any] = {k: v for k, v in got.values.items() if k in PROMETHEUS_FIELDS}
            missing = {k: v for k, v in got.missing.items() if k in PROMETHEUS_FIELDS}
            if got.ttft_buckets:
                ttft = ttft_inputs(
                    t.policy.ttft_objective_seconds, got.ttft_buckets, got.values.get("ttft_sum")
                )
                for name in ("ttft_over_objective", "requests_per_s", "ttft_mean_seconds"):
                    if ttft[name] is not None:
                        values[name] = ttft[name]
                    else:
                        missing[name] = missing.get(
                            "ttft_p99_seconds", got.missing.get("ttft_sum", "no requests in the rate window")
                        )
            else:
                for name in ("ttft_over_objective", "requests_per_s", "ttft_mean_seconds"):
                    missing[name] = missing.get(
                        "ttft_p99_seconds", "no TTFT histogram buckets (custom queries give quantiles only)"
                    )
            if got.itl_buckets:
                policy = t.policy
                itl = itl_inputs(
                    policy.itl_objective_seconds,
                    policy.ttft_objective_percentile / 100.0,
                    got.itl_buckets,
                    got.values.get("itl_sum"),
                )
                values.update({name: value for name, value in itl.items() if value is not None})
            if t.policy.router != "none":
                _router_inputs(t, got, values, missing)
            if t.key in unaddressed:
                missing.update(dict.fromkeys(PROMETHEUS_FIELDS, unaddressed[t.key]))
            values.update(self._workload(t, got, missing))
            out[t.key] = Observation(now=now, missing=missing, **values)
        return out

    def _workload(self, target: Target, got: TargetInputs, missing: dict[str, str]) -> dict[str, Any]:
        if self.workloads is None:
            reporting = got.values.get("replicas_reporting")
            missing["gpu_schedulable_replicas"] = "no Kubernetes source configured"
            if reporting is None:
                missing["current_replicas"] = "no Kubernetes source configured"
                missing["ready_replicas"] = "no Kubernetes source configured"
                return {}
            # Pods exporting metrics are up and serving: the best count without the API.
            return {"current_replicas": int(reporting), "ready_replicas": int(reporting)}
        state = self.workloads.workload(target.key.namespace, target.key.name, target.policy.gpus_per_replica)
        if isinstance(state, Unknown):
            for name in WORKLOAD_FIELDS:
                missing[name] = f"kubernetes: {state.reason}"
            return {}
        values: dict[str, Any] = {
            "current_replicas": state.current_replicas,
            "ready_replicas": state.ready_replicas,
            "pending_replicas": min(state.pending_replicas, state.current_replicas),
            "starting_replicas": state.starting_replicas,
            "cold_start_samples": state.cold_start.samples,
            "deployment_replicas": state.deployment_replicas,
            "hpa": state.hpa,
            "hpa_read": state.hpa_read,
            "scaledobject_fallback": state.scaledobject_fallback,
        }
        if state.cold_start.lead_p90_s is not None:
            values["cold_start_seconds"] = state.cold_start.lead_p90_s
        if state.cold_start.pending_p90_s is not None:
            values["cold_start_pending_seconds"] = state.cold_start.pending_p90_s
        if state.gpu_schedulable_replicas is None:
            missing["gpu_schedulable_replicas"] = f"kubernetes: {state.explanation}"
        else:
            values["gpu_schedulable_replicas"] = state.gpu_schedulable_replicas
        return values

    async def warm(self, targets: Sequence[Target], now: datetime, step_s: float | None = None) -> None:
        """Warm the targets' engines from Prometheus history up to ``now``, every ``step_s``."""
        queries, _ = self._queries(targets)
        if not queries:
            return
        history = await asyncio.to_thread(self.history.history, queries, now, step_s)
        for t in targets:
            points = history.get(t.key)
            if points:
                t.engine.warm(points)
