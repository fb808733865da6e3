"""The decision engine: one target's state, and the pipeline from an observation to a decision.

    engine = Engine(parse_metadata({"minReplicas": "2", "maxReplicas": "16"}).spec)
    decision = engine.decide(Observation(now=..., queue_waiting=40, ...))

(``scaler.config.engine_for(metadata)`` does the first line at an edge.)

``decide`` is the pipeline of ``scaler.decider``'s docstring, each step a module that owns its own
state: the engine holds each step's state and hands it back, and nothing else.

The engine never reads the wall clock: ``Observation.now`` is the only time it knows. Equal
observations in equal order give equal decisions, which is what lets several scaler
replicas answer alike and a restarted one rebuild its state from Prometheus history
(``warm``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from scaler.decider import calibration, coldstart
from scaler.decider.capacity import CapacityModel
from scaler.decider.combine import combine
from scaler.decider.demand import Demand, DemandReader, with_router_queue
from scaler.decider.forecast import Forecast, Forecasts, warm_up_s
from scaler.decider.held import InertMonitor
from scaler.decider.landing import LandingMonitor
from scaler.decider.params import DEFAULT, DeciderParams
from scaler.decider.signals import last_known
from scaler.decider.signals import load as load_signal
from scaler.decider.signals import queue as queue_signal
from scaler.decider.signals.context import SignalInputs
from scaler.decider.signals.table import propose_all
from scaler.decider.spec import DeciderSpec
from scaler.decider.stages import ALL, Stages
from scaler.inputs import Input
from scaler.model import (
    Capacity,
    Decision,
    ForecastRecord,
    Lead,
    Note,
    NoteKind,
    Observation,
    Proposal,
    Signal,
)

__all__ = ["Decision", "Engine", "Observation"]


class Engine:
    """One target's decision state: each step's own (module docstring)."""

    def __init__(self, spec: DeciderSpec, params: DeciderParams = DEFAULT, stages: Stages = ALL) -> None:
        self.params = params
        self.stages = stages  # all of them, but in an ablation (scaler.decider.stages)
        self._spec = spec
        self.demand = DemandReader(params.rate_window_s, stages.offered_demand)  # offered demand
        self.capacity = CapacityModel(spec, params, stages)  # what one replica holds, measured
        self.forecasts = Forecasts(params, stages)  # the demand one lead ahead and its errors
        self.inputs = last_known.Inputs()  # the inputs it depends on, the last complete demand
        self.backlog = queue_signal.Backlog()  # the queue at the last refresh, the safety net's alarm
        self.calibration = calibration.Calibration()  # the scale the objective's measurement sets
        self.load = load_signal.LoadState()  # where the load signal's search starts
        self.landing = LandingMonitor()  # whether the last target landed
        self.inert = InertMonitor()  # why the target cannot act (scaler.decider.held)

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
        self.inputs = last_known.seen_in(self.inputs, routed)  # a running process has seen them
        complete = [
            i for i, obs in enumerate(routed) if not last_known.watch(self.inputs, obs, self._spec)[1]
        ]
        served = self.landing, self.inert  # what was served is watched on; the history's decision is not
        self.landing, self.inert = LandingMonitor(), InertMonitor()
        for i, obs in enumerate(points):
            if complete and i == complete[-1]:
                self.decide(obs)  # learns it too; sets the last complete demand and when it was
            else:
                self._learn(routed[i])
        self.landing, self.inert = served
        return len(points)

    def lead(self, obs: Observation) -> tuple[float, str]:
        """The cold start this observation's decision orders ahead by, and where it came from."""
        measured = coldstart.ColdStart(obs.cold_start_samples, obs.cold_start_seconds, None, None)
        return coldstart.lead(self._spec.cold_start_seconds, measured)

    def _learn(self, obs: Observation) -> Demand:
        """What every observation teaches, decided on or not: demand, capacity and forecasts."""
        lead, _ = self.lead(obs)
        demand = self.demand.read(obs)
        self.capacity.observe(obs, demand)
        self.forecasts.update(obs.timestamp, demand.prompt_tokens_per_s, demand.concurrency, lead)
        return demand

    def _forecast(
        self, capacity_prefill: float | None, slots: float | None
    ) -> tuple[Forecast | None, Forecast | None]:
        """The two forecasts, each miss counted against the larger of its plan and what the floor's
        replicas hold (``scaler.decider.forecast``)."""
        floor = self._spec.min_replicas if self.stages.errors_against_floor else 0
        return self.forecasts.forecast(
            self._spec.quantile, floor * (capacity_prefill or 0.0), floor * float(int(slots or 0.0))
        )

    def decide(self, observed: Observation) -> Decision:
        """The pipeline (``scaler.decider``): observe, demand, capacity, forecast, calibration, size,
        propose, combine, watch."""
        spec = self._spec
        obs = with_router_queue(
            observed
        )  # the router's queue is demand; the decision records what was observed
        self.inputs, missing = last_known.watch(self.inputs, obs, spec)  # observe
        demand = self._learn(obs)  # demand, capacity, forecasts
        horizon, lead_source = self.lead(obs)
        previous_waiting, alarm = self._backlog(obs, demand)
        measured = self.capacity.capacity()
        forecasts = self._forecast(measured.prefill_tokens_per_s, measured.slots)
        unknown = "; ".join(f"{m}: {obs.missing.get(m, 'no data')}" for m in missing)
        # A stale forecast is not a proposal: while a demand input is missing the load abstains and
        # last_known holds the last complete demand instead.
        load, scale, capacity = None, None, measured
        if not any(m != Input.QUEUE_WAITING for m in missing):
            load, scale, capacity = self._size(
                obs, demand, measured, forecasts, previous_waiting, alarm, horizon, unknown
            )
        proposals = propose_all(
            SignalInputs(
                spec=spec,
                observation=obs,
                horizon_s=horizon,
                demand=demand,
                capacity=capacity,
                load=load,
                load_unknown=f"inputs missing: {unknown}" if unknown else "no demand measured yet",
                previous_waiting=previous_waiting,
                last_demand=self.inputs.last_demand,
                missing=tuple(missing),
                backlog_alarm=alarm,
                standing=self.inputs.standing,
                warming_s=self.inputs.warming(obs.timestamp, warm_up_s(self.params)),
                params=self.params,
                stages=self.stages,
            )
        )
        decision = self._combined(observed, proposals, missing, unknown, demand, forecasts, load)
        # The decision records what a replica holds as configured or measured; the load signal sized
        # it at that times the scale (forecast.capacity_scale), which is not a capacity of its own.
        decision = replace(
            decision,
            forecast=replace(decision.forecast, capacity_scale=scale),
            lead=Lead(horizon, lead_source),
            capacity=measured,
        )
        return self._watch(decision, obs.timestamp, horizon, load, missing, proposals)

    def _backlog(self, obs: Observation, demand: Demand) -> tuple[float | None, str | None]:
        """The queue at the previous refresh, and the safety net's alarm where the backlog is one
        the Ready replicas do not clear within the objective (``scaler.decider.signals.queue``)."""
        spec = self._spec
        previous_waiting = self.backlog.waiting
        self.backlog, alarm = queue_signal.watch(
            self.backlog, obs, demand, spec.ttft_objective_seconds, spec.late_budget
        )
        return previous_waiting, alarm if self.stages.backlog_net else None

    def _size(
        self,
        obs: Observation,
        demand: Demand,
        measured: Capacity,
        forecasts: tuple[Forecast | None, Forecast | None],
        previous_waiting: float | None,
        alarm: str | None,
        horizon: float,
        unknown: str,
    ) -> tuple[load_signal.LoadNeed | None, float | None, Capacity]:
        """Calibrate, then size: the capacities scaled by what the measured objective calls for
        (``scaler.decider.calibration``), and the replicas the forecast demand and the backlog's
        drain need with them (``scaler.decider.signals.load``)."""
        spec, params, stages = self._spec, self.params, self.stages
        prompt_f, concurrency_f = forecasts
        seen = calibration.Refresh(obs, measured, demand, prompt_f, concurrency_f)
        if stages.calibration:
            self.calibration = calibration.calibrate(
                self.calibration, seen, spec, params, self.capacity.stood_s, stages
            )
        scale = self.calibration.scale
        capacity = calibration.scaled(measured, scale)
        drain: float | None = None
        if stages.backlog_in_load:
            drain = queue_signal.drain_per_s(obs, capacity, demand, previous_waiting, horizon, spec.role)
        load = load_signal.need(
            spec,
            capacity,
            demand,
            load_signal.plus(prompt_f, (drain or 0.0) * (demand.prompt_tokens_per_request or 0.0)),
            load_signal.plus(concurrency_f, (drain or 0.0) * (demand.time_in_service_s or 0.0)),
            unknown or "no data yet",
            self.load.hint,
            obs,
            params,
            stages,
        )
        if load is not None and load.binding is not None:
            self.load, most, ago = self.load.held(obs.timestamp, load.replicas, horizon)
            if most > load.replicas and stages.hold_answer:
                load = replace(load, replicas=most, sized=load.replicas, sized_s=ago)
            load = replace(load, backlog=drain is not None)
            if stages.backlog_in_load and alarm is not None:
                load = load_signal.with_net(load, queue_signal.safety_net(obs, demand, horizon), alarm)
        return load, scale, capacity

    def _watch(
        self,
        decision: Decision,
        t: float,
        horizon: float,
        load: load_signal.LoadNeed | None,
        missing: list[str],
        proposals: list[Proposal],
    ) -> Decision:
        """Remember what was decided (the target, the plan the calibration checks a lead on, the
        proposals that last knew the demand) and judge whether the target can act (``held``)."""
        self.landing.remember(decision.replicas)
        checked = load is not None and load.checks > 0  # the plan behind it has been checked a lead on
        self.calibration = calibration.planned(
            self.calibration, t, horizon, decision.proposals.get(Signal.LOAD), checked
        )
        self.inputs = last_known.remember(self.inputs, missing, proposals)
        return self.inert.judge(decision)

    def _combined(
        self,
        observed: Observation,
        proposals: list[Proposal],
        missing: list[str],
        unknown: str,
        demand: Demand,
        forecasts: tuple[Forecast | None, Forecast | None],
        load: load_signal.LoadNeed | None,
    ) -> Decision:
        """The proposals combined and clamped (``scaler.decider.combine``), with the notes on the
        inputs and on landing, and the record of what was forecast and sized."""
        t, complete_at = observed.timestamp, self.inputs.complete_at
        notes: list[Note] = []
        if missing:
            notes.append(Note(NoteKind.INPUTS_MISSING, f"inputs missing: {unknown}"))
        if complete_at is not None and missing:
            notes.append(Note(NoteKind.INPUTS_AGE, f"inputs last complete {t - complete_at:.0f}s ago"))
        prompt_f, concurrency_f = forecasts
        sizes = load is not None and bool(load.needs)
        record = ForecastRecord(
            arrivals_per_s=demand.arrivals_per_s,
            prompt_tokens_per_s=None if prompt_f is None else prompt_f.planned,
            prompt_tokens_per_s_margin=None if prompt_f is None else prompt_f.margin,
            concurrency=None if concurrency_f is None else concurrency_f.planned,
            concurrency_margin=None if concurrency_f is None else concurrency_f.margin,
            busy_replicas_now=load.busy_now if load is not None and sizes else None,
            busy_replicas_at_horizon=load.busy_planned if load is not None and sizes else None,
            late_expected=load.late if load is not None and sizes else None,
        )
        landing = self.landing.observe(observed)
        if landing is not None and landing.reason not in ("landed", "in_flight"):
            notes.append(Note(NoteKind.NOT_LANDED, f"not landed: {landing.explanation}"))
        decision = combine(proposals, observed, self._spec, notes, record, None, None, landing)
        return replace(decision, inputs_complete_at=complete_at)
