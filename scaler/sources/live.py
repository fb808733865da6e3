"""The live source: Prometheus for the serving signals, Kubernetes for replicas and GPUs.

``observe`` runs the batched Prometheus reads in a worker thread (RPCs never wait on
it) and looks each target's workload up in the Kubernetes inventory's local cache.
Every unknown field carries its reason into ``Observation.missing``. What Prometheus holds of
each target's series (``scaler.sources.probe``) and the pods Kubernetes lists give the reasons a
target is inert (``scaler.inert``): in ``Observation.inert``, and as the reason of each input they
leave unknown (a stale input is unknown, never read as current).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from scaler.inert import Found, Pods, layout_reasons
from scaler.inputs import Input, InputSource, Reading
from scaler.inventory import Unknown, WorkloadState
from scaler.model import Observation
from scaler.readings import Readings
from scaler.sources.history import History
from scaler.sources.probe import SeriesProbe
from scaler.sources.prometheus import PrometheusReader, TargetQuery
from scaler.targets.registry import Target, TargetKey

# The inputs Prometheus answers (from the input table): unknown together when it cannot.
PROMETHEUS_FIELDS = tuple(i for i in Input if i.spec.source is InputSource.PROMETHEUS)
# The counts that say whether the workload is known at all.
WORKLOAD_FIELDS = (Input.CURRENT_REPLICAS, Input.READY_REPLICAS, Input.GPU_SCHEDULABLE_REPLICAS)
NO_KUBERNETES = "no Kubernetes source configured"


class WorkloadProvider(Protocol):
    """What the Kubernetes inventory offers (scaler.sources.kubernetes.KubernetesInventory)."""

    def workload(
        self, namespace: str, scaledobject_name: str, gpus_per_replica_override: int | None = None
    ) -> WorkloadState | Unknown:
        """The workload's replica counts and GPU room, or why they cannot be known now."""


class LiveSource:
    """The live ObservationSource: Prometheus reads plus the Kubernetes inventory (module docstring)."""

    def __init__(
        self,
        prometheus: PrometheusReader,
        workloads: WorkloadProvider | None = None,
        log: Any = None,
        history: History | None = None,
        probe: SeriesProbe | None = None,
    ) -> None:
        self.prometheus = prometheus
        self.history = history or History(prometheus)
        self.probe = probe or SeriesProbe(prometheus)
        self.workloads = workloads
        self.log = log

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
                queries.append(TargetQuery(t.key, t.policy, address, t.key.namespace))
        return queries, unaddressed

    async def observe(self, targets: Sequence[Target], now: datetime) -> Mapping[TargetKey, Observation]:
        """Every target's Observation at ``now``, read in a worker thread."""
        # All of it in a worker thread: the reads wait on the network, and building a
        # thousand observations would otherwise hold the event loop that registers targets.
        return await asyncio.to_thread(self._observe, list(targets), now)

    def _observe(self, targets: Sequence[Target], now: datetime) -> dict[TargetKey, Observation]:
        queries, unaddressed = self._queries(targets)
        self.history.forget(now)
        read: dict[Any, Readings] = self.prometheus.read(queries, now) if queries else {}
        layouts = self.probe.layouts(queries, now) if queries else {}
        made: dict[tuple[int, Pods | None, str, frozenset[str]], Found] = {}  # targets alike, made once
        out: dict[TargetKey, Observation] = {}
        for t in targets:
            got = read.get(t.key) or Readings()
            if t.key in unaddressed:
                got.missing.update(dict.fromkeys(PROMETHEUS_FIELDS, unaddressed[t.key]))
            state, pods = self._workload(t, got)
            layout = layouts.get(t.key)
            if layout is not None:
                present = frozenset({*got.values, *got.histograms})
                alike = (id(layout), pods, t.key.namespace, present)
                if alike not in made:
                    made[alike] = layout_reasons(layout, now.timestamp(), pods, t.key.namespace, present)
                found = made[alike]
                for name, why in found.unknown.items():  # the probe's cause, not "no series match"
                    got.values.pop(name, None)
                    got.histograms.pop(name, None)
                    got.missing[name] = why
                state["inert"] = found.reasons
            out[t.key] = got.observation(now, t.policy, **state)
        return out

    def _workload(self, target: Target, got: Readings) -> tuple[dict[str, Any], Pods | None]:
        """The workload's reads into ``got``; returns the Observation's fields that are not inputs, and
        the pods the inert reasons join the series against (None without Kubernetes)."""
        state, workload = self._workload_state(target, got)
        if workload is None or not workload.deployment:
            return state, None  # a provider that names no pods (the demo's pool): nothing to join
        pods = Pods(target.key.namespace, workload.deployment, workload.ready_pods, workload.namespace_pods)
        return state, pods

    def _workload_state(self, target: Target, got: Readings) -> tuple[dict[str, Any], WorkloadState | None]:
        """The workload's reads into ``got``: the Observation's fields that are not inputs, and the state."""
        if self.workloads is None:
            # Pods exporting metrics are up and serving: the best count without the API.
            got.missing[Input.GPU_SCHEDULABLE_REPLICAS] = NO_KUBERNETES
            if got.values.get(Reading.REPLICAS_REPORTING) is None:
                got.missing.update(dict.fromkeys(WORKLOAD_FIELDS[:2], NO_KUBERNETES))
            return {}, None
        got.values.pop(Reading.REPLICAS_REPORTING, None)  # Kubernetes counts the replicas
        state = self.workloads.workload(target.key.namespace, target.key.name, target.policy.gpus_per_replica)
        if isinstance(state, Unknown):
            got.missing.update(dict.fromkeys(WORKLOAD_FIELDS, f"kubernetes: {state.reason}"))
            return {}, None
        cold = state.cold_start
        got.values.update(
            {
                Input.CURRENT_REPLICAS: state.current_replicas,
                Input.READY_REPLICAS: state.ready_replicas,
                Input.PENDING_REPLICAS: min(state.pending_replicas, state.current_replicas),
                Input.STARTING_REPLICAS: state.starting_replicas,
                Input.COLD_START_SAMPLES: cold.samples,
            }
        )
        for name, value in (
            (Input.DEPLOYMENT_REPLICAS, state.deployment_replicas),
            (Input.COLD_START_SECONDS, cold.lead_p90_s),
            (Input.COLD_START_PENDING_SECONDS, cold.pending_p90_s),
            (Input.GPU_SCHEDULABLE_REPLICAS, state.gpu_schedulable_replicas),
        ):
            if value is not None:
                got.values[name] = value
        if state.gpu_schedulable_replicas is None:
            got.missing[Input.GPU_SCHEDULABLE_REPLICAS] = f"kubernetes: {state.explanation}"
        if state.kueue_quota_replicas is not None:
            got.values[Input.KUEUE_QUOTA_REPLICAS] = state.kueue_quota_replicas
        elif state.kueue_managed:
            got.missing[Input.KUEUE_QUOTA_REPLICAS] = f"kubernetes: {state.kueue_explanation}"
        return {
            "hpa": state.hpa,
            "hpa_read": state.hpa_read,
            "scaledobject_fallback": state.scaledobject_fallback,
            "kueue_quota_reason": state.kueue_explanation or None,
        }, state

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
