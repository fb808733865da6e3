"""What the sources read for one target at one instant, and the Observation built from it, in one place.

The live source (Prometheus instant reads and the Kubernetes inventory), the history warm-up
(Prometheus range reads, a point per step) and the replay (the simulated fleet's series) each
fill a ``Readings``: the inputs read as they are, the histograms and sums the latency inputs are
derived from (``scaler.inputs.Reading``), and why any is unknown. ``Readings.observation`` turns
it into the ``Observation``, deriving:

* from the TTFT histogram (summed per-bucket rates) and the rate of its ``_sum``:
  ``ttft_p95_seconds`` and ``ttft_p99_seconds`` (``histogram_quantile``), ``ttft_over_objective``
  (``share_above`` the objective), ``requests_per_s`` (the count's rate) and
  ``ttft_mean_seconds`` (sum over count);
* from the inter-token latency histogram and its ``_sum``: ``itl_mean_seconds``,
  ``itl_tail_seconds`` (at the objective's percentile) and ``itl_over_objective``;
* from an engine's phase-time histograms (vLLM's queue and prefill times, SGLang's queue time),
  the rate of each ``_sum`` over its ``_count``: ``queue_time_mean_seconds``,
  ``prefill_time_mean_seconds`` (``phase_mean``), and the busiest pod's prefill-time ``_sum`` rate
  as ``prefill_busy_max`` (the requests in prefill there on average, Little's law);
* from a router (llm-d, Dynamo): its TTFT histogram, which counts the time in its queue, as the
  TTFT the objective is checked against (p95, p99, the share over it); its pool saturation only
  while no endpoint is stale (stale endpoints read as saturated); llm-d's flow-control queue, whose
  series the EPP writes only once a request has queued and not at all with flow control off (its
  default), read as empty where it is absent only while the EPP is seen to run for the target: its
  pool's saturation series (flow control on, written every dispatch cycle) or its in-flight series
  in the target's namespace (``Reading.ROUTER_INFLIGHT``: it dispatches). Where neither is seen the
  router's queue is unknown, never 0, and so is the waiting demand it is part of (``queue_waiting``,
  with the reason), so the last complete demand holds;
* without Kubernetes: the pods reporting as the current and Ready replicas;
* a pod whose engine is stuck (requests waiting for capacity while it runs nothing with its KV
  cache near empty, held over the preset's window: ``Reading.STUCK_WAITING``, per pod): what waits
  on it is taken out of the queue (and of what waits for capacity), since more replicas would not
  serve it, and the Observation says so as an inert reason naming the pod (``InertReason.STUCK``).

*Example*: 2 first tokens/s whose TTFTs sum to 0.8 s/s: ``requests_per_s`` 2,
``ttft_mean_seconds`` 0.4; 500 inter-token gaps/s summing to 15 s/s: ``itl_mean_seconds`` 0.03.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scaler.config import TargetPolicy
from scaler.histogram import histogram_quantile, share_above, total
from scaler.inputs import Input, Reading
from scaler.model import Inert, InertReason, Observation
from scaler.presets import ROUTERS

Buckets = Mapping[float, float]  # cumulative per-bucket rates keyed by upper bound (le), in seconds

# The inputs each latency histogram gives.
TTFT_INPUTS = (
    Input.TTFT_P95_SECONDS,
    Input.TTFT_P99_SECONDS,
    Input.TTFT_OVER_OBJECTIVE,
    Input.REQUESTS_PER_S,
    Input.TTFT_MEAN_SECONDS,
)
ITL_INPUTS = (Input.ITL_MEAN_SECONDS, Input.ITL_TAIL_SECONDS, Input.ITL_OVER_OBJECTIVE)
# The phase-time inputs, each the mean of an engine histogram: its _sum's rate over its _count's.
PHASE_TIMES = {
    Input.QUEUE_TIME_MEAN_SECONDS: (Reading.QUEUE_TIME_SUM, Reading.QUEUE_TIME_COUNT),
    Input.PREFILL_TIME_MEAN_SECONDS: (Reading.PREFILL_TIME_SUM, Reading.PREFILL_TIME_COUNT),
}
INPUT_SET = frozenset(Input)  # a key that is an input (a plain str equal to one's name too)
NO_REQUESTS = "no requests in the rate window"
NO_HISTOGRAM = "no TTFT histogram buckets (custom queries give quantiles only)"
ROUTER_UNSEEN = (
    "nor is the router seen to run for this target (no pool saturation series for its inferencePool,"
    " no in-flight series in its namespace): its queue is unknown, not empty"
)


def ttft_inputs(
    objective_s: float, buckets: Buckets | None, sum_rate: float | None = None
) -> dict[Input, float | None]:
    """The TTFT inputs of one rate window of the TTFT histogram (module docstring), each None where
    the window cannot say (no requests: the quantiles, the share and the mean; no histogram: all)."""
    count = total(buckets) if buckets else None
    has = bool(buckets) and count is not None and count > 0
    return {
        Input.TTFT_P95_SECONDS: histogram_quantile(0.95, buckets) if has and buckets else None,
        Input.TTFT_P99_SECONDS: histogram_quantile(0.99, buckets) if has and buckets else None,
        Input.TTFT_OVER_OBJECTIVE: share_above(objective_s, buckets) if has and buckets else None,
        Input.REQUESTS_PER_S: count,
        Input.TTFT_MEAN_SECONDS: sum_rate / count if has and count and sum_rate is not None else None,
    }


def itl_inputs(
    objective_s: float | None, quantile: float, buckets: Buckets | None, sum_rate: float | None
) -> dict[Input, float | None]:
    """The inter-token latency inputs of one rate window of its histogram: the mean (sum over count),
    the tail at ``quantile`` and the share over ``objective_s`` (None without one), each None where
    the window had no gap."""
    count = total(buckets) if buckets else None
    has = bool(buckets) and count is not None and count > 0
    return {
        Input.ITL_MEAN_SECONDS: sum_rate / count if has and count and sum_rate is not None else None,
        Input.ITL_TAIL_SECONDS: histogram_quantile(quantile, buckets) if has and buckets else None,
        Input.ITL_OVER_OBJECTIVE: (
            share_above(objective_s, buckets) if has and buckets and objective_s is not None else None
        ),
    }


def phase_mean(sum_rate: float | None, count_rate: float | None) -> float | None:
    """A phase-time histogram's mean over the rate window: the rate of its ``_sum`` over that of its
    ``_count`` (requests that finished in the window); None when either is unread or none finished.
    *Example*: prefill times summing to 0.9 s/s over 6 finished requests/s: 0.15 s."""
    if sum_rate is None or not count_rate:
        return None
    return sum_rate / count_rate


@dataclass
class Readings:
    """One target's reads at one instant: values (inputs and what inputs come from), the latency
    histograms' summed bucket rates, and why what is unknown is unknown."""

    # Keyed by Input or Reading (each a str: a test may name them in words).
    values: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, Buckets] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    pods: dict[str, dict[str, float]] = field(default_factory=dict)  # per-pod reads: pod -> value

    def update(self, other: Readings) -> None:
        """Take ``other``'s reads (a family read for several targets with one selector)."""
        self.values.update(other.values)
        self.histograms.update(other.histograms)
        self.missing.update(other.missing)
        self.pods.update(other.pods)

    def observation(self, now: datetime, policy: TargetPolicy, **state: Any) -> Observation:
        """The Observation at ``now`` under ``policy``'s objectives (module docstring); ``state``: the
        fields that are not inputs (the HPA, whether it was read, the ScaledObject's fallback)."""
        values: dict[str, Any] = {k: v for k, v in self.values.items() if k in INPUT_SET}
        missing: dict[str, str] = {k: v for k, v in self.missing.items() if k in INPUT_SET}
        self._ttft(policy, values, missing)
        itl = self.histograms.get(Reading.ITL)
        if itl:
            derived = itl_inputs(
                policy.itl_objective_seconds,
                policy.ttft_objective_percentile / 100.0,
                itl,
                self.values.get(Reading.ITL_SUM),
            )
            values.update({k: v for k, v in derived.items() if v is not None})
        for name, (total_key, count_key) in PHASE_TIMES.items():
            mean = phase_mean(self.values.get(total_key), self.values.get(count_key))
            if mean is not None:
                values[name] = mean
        busiest = self.values.get(Reading.PREFILL_TIME_SUM_MAX)  # the busiest pod's prefill (Little)
        if busiest is not None:
            values[Input.PREFILL_BUSY_MAX] = busiest
        self._router(policy, values, missing)
        reporting = self.values.get(Reading.REPLICAS_REPORTING)
        if reporting is not None:
            for name in (Input.CURRENT_REPLICAS, Input.READY_REPLICAS):
                if values.get(name) is None:
                    values[name] = round(reporting)
                    missing.pop(name, None)
        stuck = self._stuck(values)
        if stuck is not None:
            state = {**state, "inert": (*state.get("inert", ()), stuck)}
        return Observation(now=now, missing=missing, **values, **state)

    def _stuck(self, values: dict[str, Any]) -> Inert | None:
        """The stuck pods' waiting taken out of the queue (module docstring), and the reason naming them."""
        stuck = self.pods.get(Reading.STUCK_WAITING)
        if not stuck:
            return None
        held = sum(stuck.values())
        for name in (Input.QUEUE_WAITING, Input.QUEUE_WAITING_CAPACITY):
            if values.get(name) is not None:
                values[name] = max(0.0, values[name] - held)
        named = ", ".join(f"{pod} ({waiting:g} waiting)" for pod, waiting in sorted(stuck.items()))
        return Inert(
            InertReason.STUCK,
            f"{len(stuck)} {'pod runs' if len(stuck) == 1 else 'pods run'} nothing while requests wait for"
            f" capacity and the KV cache is near empty, for the whole window: {named}; their {held:g} waiting"
            " requests are not counted as demand (more replicas would not serve them): restart the pod",
        )

    def _router_queue(self, policy: TargetPolicy, values: dict[str, Any], missing: dict[str, str]) -> None:
        """llm-d's queue where its series is absent: empty where the EPP is seen to run for the target,
        else unknown, and the waiting demand with it (module docstring)."""
        router = ROUTERS.get(policy.router)
        if Input.ROUTER_QUEUE_WAITING in values or router is None:
            return
        if router.family(Reading.ROUTER_INFLIGHT) is None:
            return  # a router with no sign of running but its queue (Dynamo): its queue stays unknown
        if Input.ROUTER_SATURATION in self.values or Reading.ROUTER_INFLIGHT in self.values:
            values[Input.ROUTER_QUEUE_WAITING] = 0.0  # it runs, and nothing waits in it
            missing.pop(Input.ROUTER_QUEUE_WAITING, None)
            return
        why = missing.get(Input.ROUTER_QUEUE_WAITING, "no data")
        missing[Input.ROUTER_QUEUE_WAITING] = f"{why}; {ROUTER_UNSEEN}"
        if Input.QUEUE_WAITING in values:
            del values[Input.QUEUE_WAITING]
            missing[Input.QUEUE_WAITING] = (
                f"the router's queue, part of the waiting demand, is unknown ({why})"
            )

    def _ttft(self, policy: TargetPolicy, values: dict[str, Any], missing: dict[str, str]) -> None:
        """The TTFT inputs from the histogram; without one, why not (a custom engine's quantiles stay)."""
        buckets = self.histograms.get(Reading.TTFT)
        if buckets is None:
            failed = self.missing.get(Reading.TTFT)  # the preset's histogram could not be read
            if failed is not None:
                for name in (Input.TTFT_P95_SECONDS, Input.TTFT_P99_SECONDS):
                    if name not in values:
                        missing[name] = failed
            why = missing.get(Input.TTFT_P99_SECONDS, failed or NO_HISTOGRAM)
            for name in TTFT_INPUTS[2:]:
                missing[name] = why
            return
        derived = ttft_inputs(policy.ttft_objective_seconds, buckets, self.values.get(Reading.TTFT_SUM))
        for name, value in derived.items():
            if value is not None:
                values[name] = value
            elif name is Input.TTFT_MEAN_SECONDS and derived[Input.TTFT_P99_SECONDS] is not None:
                missing[name] = self.missing.get(Reading.TTFT_SUM, NO_REQUESTS)
            else:
                missing[name] = NO_REQUESTS

    def _router(self, policy: TargetPolicy, values: dict[str, Any], missing: dict[str, str]) -> None:
        """The router's reads: its queue (absent, only where the router is seen to run), its saturation
        only with no stale endpoint, and its TTFT as the users'."""
        if policy.router == "none":
            return
        self._router_queue(policy, values, missing)
        stale = self.values.get(Reading.ROUTER_STALE_ENDPOINTS)
        if Input.ROUTER_SATURATION in values and stale != 0:
            values.pop(Input.ROUTER_SATURATION)
            unread = self.missing.get(Reading.ROUTER_STALE_ENDPOINTS, "no data")
            missing[Input.ROUTER_SATURATION] = (
                f"{stale:g} stale endpoints read as saturated"
                if stale is not None
                else f"stale endpoints unknown ({unread})"
            )
        buckets = self.histograms.get(Reading.ROUTER_TTFT)
        if buckets:
            seen = ttft_inputs(policy.ttft_objective_seconds, buckets)
            for name in (Input.TTFT_P95_SECONDS, Input.TTFT_P99_SECONDS, Input.TTFT_OVER_OBJECTIVE):
                if seen[name] is not None:
                    values[name] = seen[name]
                    missing.pop(name, None)
