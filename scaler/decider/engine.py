"""The decision engine: one target's state, and the pipeline from an observation to a decision.

    engine = Engine(parse_metadata({"minReplicas": "2", "maxReplicas": "16"}).spec)
    decision = engine.decide(Observation(now=..., queue_waiting=40, ...))

(``scaler.config.engine_for(metadata)`` does the first line at an edge.)

``decide`` is a short pipeline of named steps, each a pure module:

    observe   -> demand     offered work, never capped by the fleet       (scaler.decider.demand)
              -> capacity   what one replica holds, measured              (scaler.decider.capacity)
              -> forecast   demand one cold start ahead, with its margin  (scaler.decider.forecast)
              -> need       replicas per resource, the largest binds      (scaler.decider.signals.load)
              -> combine    every signal's proposal, the largest wins     (scaler.decider.signals.table)
              -> clamp      maxReplicas, the GPU inventory, the HPA       (scaler.decider.combine)

The engine never reads the wall clock: ``Observation.now`` is the only time it knows. Equal
observations in equal order give equal decisions, which is what lets several scaler
replicas answer alike and a restarted one rebuild its state from Prometheus history
(``warm``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace

from scaler.decider import coldstart
from scaler.decider.capacity import CapacityModel
from scaler.decider.combine import combine
from scaler.decider.demand import Demand, DemandReader, with_router_queue
from scaler.decider.forecast import Forecast, Forecaster
from scaler.decider.held import InertMonitor
from scaler.decider.landing import LandingMonitor
from scaler.decider.params import DEFAULT, DeciderParams
from scaler.decider.signals import load as load_signal
from scaler.decider.signals import queue as queue_signal
from scaler.decider.signals.context import SignalInputs
from scaler.decider.signals.table import propose_all
from scaler.decider.spec import DeciderSpec
from scaler.inputs import Input
from scaler.model import Capacity, Decision, ForecastRecord, Lead, Note, NoteKind, Observation, Signal

__all__ = ["Decision", "Engine", "Observation"]

_DEMAND_SIGNALS = (Signal.QUEUE, Signal.LOAD)
# The inputs demand is read from. The queue always counts; the prompt rate counts once a prompt
# capacity is configured and the running count once a generation capacity is (the configuration
# says the engine reads them); any of them counts once it has been seen for this target (an
# engine that never exports one does not depend on it). While one that counts is missing the
# load abstains and last_known holds the target.
DEMAND_INPUTS = (Input.QUEUE_WAITING, Input.PROMPT_TOKENS_PER_S, Input.REQUESTS_RUNNING, Input.REQUESTS_PER_S)


class Engine:
    """One target's decision state: demand reader, capacity model, two forecasters, landing monitor."""

    def __init__(self, spec: DeciderSpec, params: DeciderParams = DEFAULT) -> None:
        self.params = params
        self._spec = spec
        self._demand = DemandReader(params.rate_window_s, params.offered_demand)
        self.capacity = CapacityModel(spec, params)
        self._prompt = Forecaster(params)  # offered prompt tokens per second (scaler.decider.demand)
        self._concurrency = Forecaster(params)  # offered sequences in service
        self._seen: set[str] = {Input.QUEUE_WAITING}
        self._last_demand: int | None = None
        self._last_fresh: float | None = None
        self._previous_waiting: float | None = None
        self._last_load: int | None = None  # the load signal's last answer: where its search starts
        self._alarmed = False  # the backlog outran the Ready replicas at the previous refresh
        self._measured_late = 0.0  # exponential averages of the measured and modelled late shares
        self._modelled_late = 0.0
        self._bias_t: float | None = None
        self._landing = LandingMonitor()
        self._inert = InertMonitor()  # why the target cannot act, put on each decision (scaler.decider.held)

    @property
    def spec(self) -> DeciderSpec:
        """The spec decisions are made under (the latest ``update_spec``)."""
        return self._spec

    def update_spec(self, spec: DeciderSpec) -> None:
        """Apply a changed spec (changed metadata), keeping what was learned about the traffic."""
        self._spec = spec
        self.capacity.configure(spec)

    def warm(self, history: Iterable[Observation]) -> int:
        """Feed past observations (oldest first) so a new process holds what a running one learned.

        Each goes through the same learning a decision does (demand, capacity, forecasts),
        without deciding, but for the last one whose demand inputs were complete: decided on, so
        that the inputs the history holds count as expected and a restart holds the last complete
        demand (last_known) while one of them is missing, as a running process does.
        """
        points = list(history)
        routed = [with_router_queue(obs) for obs in points]
        for obs in routed:  # the inputs that exist: a running process has seen them (``_missing``)
            self._seen.update(name for name in DEMAND_INPUTS if getattr(obs, name) is not None)
        complete = [i for i, obs in enumerate(routed) if not self._missing(obs)]
        served = self._landing, self._inert  # what was served is watched on; the history's decision is not
        self._landing, self._inert = LandingMonitor(), InertMonitor()
        for i, obs in enumerate(points):
            if complete and i == complete[-1]:
                self.decide(obs)  # learns it too; sets the last complete demand and when it was
            else:
                self._learn(routed[i])
        self._landing, self._inert = served
        return len(points)

    def lead(self, obs: Observation) -> tuple[float, str]:
        """The cold start this observation's decision orders ahead by, and where it came from."""
        measured = coldstart.ColdStart(obs.cold_start_samples, obs.cold_start_seconds, None, None)
        return coldstart.lead(self._spec.cold_start_seconds, measured)

    def forecast_quantile(self) -> float:
        """The quantile of the forecast's errors a decision shows as its margin: the percentile."""
        return self._spec.quantile

    def _missing(self, obs: Observation) -> list[str]:
        """The demand inputs this target depends on that are missing now (``DEMAND_INPUTS``)."""
        for name in DEMAND_INPUTS:
            if getattr(obs, name) is not None:
                self._seen.add(name)
        expected = set(self._seen)
        if self._spec.prompt_tokens_per_second_per_replica is not None:
            expected.add(Input.PROMPT_TOKENS_PER_S)
        if self._spec.generation_tokens_per_second_per_replica is not None:
            expected.add(Input.REQUESTS_RUNNING)
        return [name for name in DEMAND_INPUTS if name in expected and getattr(obs, name) is None]

    def _learn(self, obs: Observation) -> Demand:
        """What every observation teaches, decided on or not: demand, capacity and forecasts."""
        t = obs.timestamp
        lead, _ = self.lead(obs)
        demand = self._demand.read(obs)
        self.capacity.observe(obs, demand)
        if demand.prompt_tokens_per_s is not None:
            self._prompt.update(t, demand.prompt_tokens_per_s, lead)
        if demand.concurrency is not None:
            self._concurrency.update(t, demand.concurrency, lead)
        return demand

    def _learn_bias(
        self,
        obs: Observation,
        capacity: Capacity,
        demand: Demand,
        prompt: Forecast | None,
        concurrency: Forecast | None,
    ) -> float:
        """The model's bias: the measured share of late first tokens over the modelled one, each an
        exponential average over ``learning_time_constant_s`` (a ratio of averages: the measured share of
        one rate window is a handful of requests, mostly none late and now and then many)."""
        if not self.params.model_bias:
            return 1.0
        t, measured, ready = obs.timestamp, obs.ttft_over_objective, obs.ready_replicas
        last, self._bias_t = self._bias_t, t
        if measured is not None and ready and last is not None and self.capacity.steady:
            modelled = load_signal.late_now(self._spec, capacity, demand, prompt, concurrency, ready, obs)
            if modelled is not None:
                weight = min(1.0, (t - last) / self.params.learning_time_constant_s)
                self._measured_late += weight * (measured - self._measured_late)
                self._modelled_late += weight * (modelled - self._modelled_late)
        floor = self._spec.late_budget * self.params.bias_floor
        # Only an optimistic model is corrected. Loosening a pessimistic one too (down to half the
        # budget's tightening) was measured in the one-run ablation (BENCHMARKS.md) and changed
        # nothing beyond 0.02 points and 0.005x in any serving model or capacity condition: a
        # window's measured share is mostly zero on a fleet that meets its objective, so there is
        # little to learn from it, and it was removed.
        return max(1.0, (self._measured_late + floor) / (self._modelled_late + floor))

    def _forecasts(self, quantile: float, capacity: Capacity) -> tuple[Forecast | None, Forecast | None]:
        """The prompt and concurrency forecasts, each miss counted against the larger of its plan
        and what the floor's replicas hold (``scaler.decider.forecast``)."""
        floor = self._spec.min_replicas if self.params.errors_against_floor else 0
        prompt = self._prompt.forecast(quantile, floor * (capacity.prefill_tokens_per_s or 0.0))
        concurrency = self._concurrency.forecast(quantile, floor * math.floor(capacity.slots or 0.0))
        return prompt, concurrency

    def _backlog_alarm(self, obs: Observation, demand: Demand) -> str | None:
        """Why the backlog outran the Ready replicas at this refresh and the previous one, arming the
        queue signal's safety net (``scaler.decider.signals.queue``), or None."""
        spec = self._spec
        alarm = queue_signal.backlog_alarm(obs, demand, spec.ttft_objective_seconds, spec.late_budget)
        before, self._alarmed = self._alarmed, alarm is not None
        return alarm if before and self.params.backlog_net else None

    def decide(self, observed: Observation) -> Decision:
        """observe -> demand -> capacity -> forecast -> need -> combine -> clamp (module docstring)."""
        spec = self._spec
        obs = with_router_queue(observed)  # the decision records what was observed
        t = obs.timestamp
        previous_waiting = self._previous_waiting
        missing = self._missing(obs)
        demand = self._learn(obs)
        self._previous_waiting = obs.queue_waiting
        if not missing:
            self._last_fresh = t
        horizon, lead_source = self.lead(obs)
        capacity = self.capacity.capacity()
        q = self.forecast_quantile()
        prompt_f, concurrency_f = self._forecasts(q, capacity)
        unknown = "; ".join(f"{m}: {obs.missing.get(m, 'no data')}" for m in missing)
        # A stale forecast is not a proposal: while a demand input is missing the load
        # abstains and last_known holds the last complete demand instead.
        load, bias = None, None
        if not any(m != Input.QUEUE_WAITING for m in missing):
            bias = self._learn_bias(obs, capacity, demand, prompt_f, concurrency_f)
            load = load_signal.need(
                spec,
                capacity,
                demand,
                prompt_f,
                concurrency_f,
                unknown or "no data yet",
                self._last_load,
                bias,
                obs,
                self.params,
            )
            if load is not None and load.binding is not None:
                self._last_load = load.replicas
        inputs = SignalInputs(
            spec=spec,
            observation=obs,
            horizon_s=horizon,
            demand=demand,
            capacity=capacity,
            load=load,
            load_unknown=f"inputs missing: {unknown}" if unknown else "no demand measured yet",
            previous_waiting=previous_waiting,
            last_demand=self._last_demand,
            missing=tuple(missing),
            backlog_alarm=self._backlog_alarm(obs, demand),
            params=self.params,
        )
        proposals = propose_all(inputs)
        notes: list[Note] = []
        if missing:
            notes.append(Note(NoteKind.INPUTS_MISSING, f"inputs missing: {unknown}"))
        if self._last_fresh is not None and missing:
            notes.append(Note(NoteKind.INPUTS_AGE, f"inputs last complete {t - self._last_fresh:.0f}s ago"))

        sized = load is not None and bool(load.needs)
        forecast = ForecastRecord(
            arrivals_per_s=demand.arrivals_per_s,
            prompt_tokens_per_s=None if prompt_f is None else prompt_f.planned,
            prompt_tokens_per_s_margin=None if prompt_f is None else prompt_f.margin,
            concurrency=None if concurrency_f is None else concurrency_f.planned,
            concurrency_margin=None if concurrency_f is None else concurrency_f.margin,
            busy_replicas_now=load.busy_now if load is not None and sized else None,
            busy_replicas_at_horizon=load.busy_planned if load is not None and sized else None,
            late_expected=load.late if load is not None and sized else None,
            model_bias=bias,
        )

        landing = self._landing.observe(observed)
        if landing is not None and landing.reason not in ("landed", "in_flight"):
            notes.append(Note(NoteKind.NOT_LANDED, f"not landed: {landing.explanation}"))
        decision = replace(
            combine(
                proposals, observed, spec, notes, forecast, capacity, Lead(horizon, lead_source), landing
            ),
            inputs_complete_at=self._last_fresh,
        )
        self._landing.remember(decision.replicas)
        decision = self._inert.judge(decision)
        demand_asks = [
            p.replicas for p in proposals if p.signal in _DEMAND_SIGNALS and p.replicas is not None
        ]
        if demand_asks and not missing:
            self._last_demand = max(demand_asks)
        return decision
