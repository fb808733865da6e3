"""The decision engine: per-target state plus the pure signals and policy.

    from scaler.engine import Engine, Observation
    engine = Engine.from_metadata({"minReplicas": "2", "maxReplicas": "16"})
    decision = engine.decide(Observation(now=..., queue_waiting=40, ...))

The engine never reads the wall clock: ``Observation.now`` is the only time it
knows. Equal observations in equal order give equal decisions, which is what lets
several scaler replicas answer alike and a restarted one rebuild its state from
Prometheus history (``warm``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from scaler import coldstart
from scaler.calibration import CalibrationParams, CapacityCalibration
from scaler.config import TargetPolicy, parse_metadata
from scaler.forecast import ForecastParams, SeriesForecaster
from scaler.landing import LandingMonitor, landing_step_down, tolerances
from scaler.model import Decision, Lead, Note, NoteKind, Observation, Signal
from scaler.policy import combine
from scaler.signals import ceil_replicas, tokens
from scaler.signals.context import SignalInputs
from scaler.signals.table import propose_all

__all__ = ["Decision", "Engine", "HistoryPoint", "Observation"]

_DEMAND_SIGNALS = (Signal.QUEUE, Signal.TOKENS, Signal.HOLD)


@dataclass(frozen=True, slots=True)
class HistoryPoint:
    """A past sample of what the engine learns from, used to warm it after a start.

    The token rates warm the forecasters; the queue, the replicas and the TTFT (when the
    history has them) warm the capacity calibration, so a restarted process holds what a
    running one learned over the same history.
    """

    timestamp: float
    prompt_tokens_per_s: float | None
    generation_tokens_per_s: float | None
    queue_waiting: float | None = None
    ready_replicas: int | None = None
    ttft_over_objective: float | None = None
    requests_per_s: float | None = None

    def observation(self) -> Observation:
        """The sample as an Observation (its Ready replicas stand for the current ones too)."""
        return Observation(
            now=datetime.fromtimestamp(self.timestamp, tz=UTC),
            queue_waiting=self.queue_waiting,
            prompt_tokens_per_s=self.prompt_tokens_per_s,
            generation_tokens_per_s=self.generation_tokens_per_s,
            current_replicas=self.ready_replicas,
            ready_replicas=self.ready_replicas,
            ttft_over_objective=self.ttft_over_objective,
            requests_per_s=self.requests_per_s,
        )


class Engine:
    """One target's decision state: token forecasters, capacity calibration and landing monitor."""

    def __init__(
        self,
        policy: TargetPolicy,
        params: ForecastParams | None = None,
        calibration: CalibrationParams | None = None,
    ) -> None:
        self.params = params or ForecastParams()
        self._policy = policy
        self.calibration = CapacityCalibration(policy, calibration)
        lead, _ = coldstart.lead(policy.cold_start_seconds, None)
        self._prompt = SeriesForecaster(lead, self.params)
        self._generation = SeriesForecaster(lead, self.params)
        self._last_demand: int | None = None
        self._last_fresh: float | None = None
        self._last_queue: tuple[float, float] | None = None  # (time, waiting) at the previous refresh
        self._landing = LandingMonitor()

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, str], params: ForecastParams | None = None) -> Engine:
        """Build from ScaledObject trigger metadata; raises scaler.config.MetadataError."""
        return cls(parse_metadata(metadata), params)

    @property
    def policy(self) -> TargetPolicy:
        """The policy decisions are made under (the latest ``update_policy``)."""
        return self._policy

    def update_policy(self, policy: TargetPolicy) -> None:
        """Apply changed metadata, keeping what was learned about the traffic."""
        self._policy = policy
        self.calibration.configure(policy)

    def warm(self, history: Iterable[HistoryPoint]) -> int:
        """Feed past samples (oldest first) so a new process does not forget what was learned.

        Each point goes through the same learning a decision does (forecasters, capacity
        calibration, the queue's history), without deciding.
        """
        count = 0
        for point in history:
            self._learn(point.observation())
            count += 1
        return count

    def lead(self, obs: Observation) -> tuple[float, str]:
        """The cold start this observation's decision orders ahead by, and where it came from."""
        measured = coldstart.ColdStart(obs.cold_start_samples, obs.cold_start_seconds, None, None)
        return coldstart.lead(self._policy.cold_start_seconds, measured)

    def _learn(self, obs: Observation) -> None:
        """What every observation teaches, decided on or not: forecasts and calibration."""
        t = obs.timestamp
        lead, _ = self.lead(obs)
        for f in (self._prompt, self._generation):
            f.horizon_s = lead
        # Saturated (a request waits per Ready replica): the rates are throughput, not demand.
        saturated = (
            obs.queue_waiting is not None
            and obs.ready_replicas is not None
            and obs.queue_waiting >= max(1, obs.ready_replicas)
        )
        arrivals = self._arrival_factor(obs, t)
        if obs.prompt_tokens_per_s is not None:
            self._prompt.update(t, obs.prompt_tokens_per_s * arrivals, demand=not saturated)
        if obs.generation_tokens_per_s is not None:
            self._generation.update(t, obs.generation_tokens_per_s * arrivals, demand=not saturated)
        self.calibration.observe(obs)
        if obs.queue_waiting is not None:
            self._last_queue = (t, obs.queue_waiting)

    def _missing_inputs(self, obs: Observation, token_signal_on: bool) -> list[str]:
        missing: list[str] = []
        if obs.queue_waiting is None:
            missing.append("queue_waiting")
        if token_signal_on and self.calibration.uses_prompt and obs.prompt_tokens_per_s is None:
            missing.append("prompt_tokens_per_s")
        if token_signal_on and self.calibration.uses_generation and obs.generation_tokens_per_s is None:
            missing.append("generation_tokens_per_s")
        return missing

    def decide(self, obs: Observation) -> Decision:
        """Learn from ``obs``, then run every signal and combine them into this refresh's Decision."""
        policy = self._policy
        t = obs.timestamp
        previous_queue = self._last_queue
        self._learn(obs)
        capacity = self.calibration.capacity()
        missing = self._missing_inputs(obs, capacity.known)
        if not missing:
            self._last_fresh = t
        prompt_f = self._prompt.forecast()
        generation_f = self._generation.forecast()
        token_missing = any(m != "queue_waiting" for m in missing)
        horizon, lead_source = self.lead(obs)
        # A stale forecast is not a proposal: while a token rate is missing the token
        # signals abstain and last_known holds the last complete demand instead.
        token_demand = None if token_missing else tokens.demand(prompt_f, generation_f, capacity, horizon)
        unknown = "; ".join(f"{m}: {obs.missing.get(m, 'no data')}" for m in missing) or "no data yet"

        inputs = SignalInputs(
            policy=policy,
            observation=obs,
            horizon_s=horizon,
            capacity=capacity,
            token_demand=token_demand,
            token_unknown=unknown,
            previous_queue=None if previous_queue is None else (t - previous_queue[0], previous_queue[1]),
            learning=self._learning(obs),
            earned=self._earned_floor(obs),
            last_demand=self._last_demand,
            missing=tuple(missing),
        )
        proposals = propose_all(inputs)
        notes: list[Note] = []
        if missing:
            notes.append(Note(NoteKind.INPUTS_MISSING, f"inputs missing: {unknown}"))
        if self._last_fresh is not None and missing:
            notes.append(Note(NoteKind.INPUTS_AGE, f"inputs last complete {t - self._last_fresh:.0f}s ago"))

        forecast: dict[str, float] = {}
        if prompt_f:
            forecast["prompt_tokens_per_s"] = prompt_f.at(horizon)
        if generation_f:
            forecast["generation_tokens_per_s"] = generation_f.at(horizon)
        if token_demand:
            forecast["busy_replicas_now"] = token_demand.now
            forecast["busy_replicas_at_horizon"] = token_demand.horizon

        landing = self._landing.observe(obs)
        if landing is not None and landing.reason not in ("landed", "in_flight"):
            notes.append(Note(NoteKind.NOT_LANDED, f"not landed: {landing.explanation}"))
        decision = replace(
            combine(proposals, obs, policy, notes, forecast, capacity, Lead(horizon, lead_source), landing),
            inputs_complete_at=self._last_fresh,
        )
        self._landing.remember(decision.replicas)
        demand = [p.replicas for p in proposals if p.signal in _DEMAND_SIGNALS and p.replicas is not None]
        if demand and not missing:
            self._last_demand = max(demand)
        return decision

    def _arrival_factor(self, obs: Observation, t: float) -> float:
        """Arrivals over service: ``(served + queue growth) / served``, from requests per second.

        The token rates count what was served. Requests that arrive and wait are demand too,
        and requests drained from a backlog are not: arrivals = served + d(waiting)/dt
        (conservation). *Example*: 5 requests/s served while the queue grew from 100 to 250
        in 15 s: 10 more arrived each second than were served, so the demand is 3 times the
        served token rates. 1 when a count is unknown or the queue did not change.
        """
        served = obs.requests_per_s
        if served is None or served <= 0 or obs.queue_waiting is None or self._last_queue is None:
            return 1.0
        dt = t - self._last_queue[0]
        if dt <= 0:
            return 1.0
        growth = (obs.queue_waiting - self._last_queue[1]) / dt
        return max(0.0, (served + growth) / served)

    def _learning(self, obs: Observation) -> str | None:
        """Why the engine does not trust its forecast or capacity yet, or None once it does.

        Only while there is something to learn from: token rates (and, for the capacity,
        Ready replicas). A target that is given neither keeps today's behaviour.
        """
        needed = self.params.min_error_checks
        fed = [f.samples_checked for f in (self._prompt, self._generation) if f.level is not None]
        if not fed:
            return None
        if min(fed) < needed:
            return f"learning the traffic: {min(fed)} of {needed} forecasts checked"
        if obs.ready_replicas is None:
            return None
        if not self.calibration.capacity().known:
            return "learning the capacity: not configured, and no saturated minute measured yet"
        if not self.calibration.settled:
            return "learning the capacity: too few refreshes near the plan"
        return None

    def _earned_floor(self, obs: Observation) -> int | None:
        """While learning, the replicas to keep: the fleet earns its way down one at a time.

        One step down (one replica, or the smallest step the HPA's tolerance lets land)
        once the current count has served a whole rate window within the TTFT objective,
        and never more than one below what the largest per-replica load so served says
        the load needs: ``max(step down, ceil(load / proven) - 1)``; otherwise the
        current count.
        """
        current = obs.current_replicas
        if current is None or not self.calibration.steady_within_objective:
            return current
        floor_now = landing_step_down(current, tolerances(obs.hpa)[1])
        proven = self.calibration.proven_load
        prompt, generation = obs.prompt_tokens_per_s, obs.generation_tokens_per_s
        if proven is not None and (prompt is not None or generation is not None):
            load = self.calibration.load(prompt or 0.0, generation or 0.0)
            floor_now = max(floor_now, ceil_replicas(load / proven) - 1)
        return max(1, min(current, floor_now))
