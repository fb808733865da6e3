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
from dataclasses import dataclass
from typing import Any

from scaler.config import TargetPolicy, parse_metadata
from scaler.model import Decision, Observation, Proposal, Signal
from scaler.policy import combine
from scaler.signals import floor, prewarm, queue, tokens
from scaler.signals.forecast import ForecastParams, SeriesForecaster

__all__ = ["Decision", "Engine", "HistoryPoint", "Observation"]

_DEMAND_SIGNALS = (Signal.QUEUE, Signal.TOKENS, Signal.HOLD)


@dataclass(frozen=True, slots=True)
class HistoryPoint:
    """A past sample of the token rates, used to warm the forecasters."""

    timestamp: float
    prompt_tokens_per_s: float | None
    generation_tokens_per_s: float | None


class Engine:
    def __init__(self, policy: TargetPolicy, params: ForecastParams | None = None) -> None:
        self.params = params or ForecastParams()
        self._policy = policy
        self._prompt = SeriesForecaster(policy.cold_start_seconds, self.params)
        self._generation = SeriesForecaster(policy.cold_start_seconds, self.params)
        self._last: Decision | None = None
        self._last_demand: int | None = None
        self._last_fresh: float | None = None

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, str], params: ForecastParams | None = None) -> Engine:
        """Build from ScaledObject trigger metadata; raises scaler.config.MetadataError."""
        return cls(parse_metadata(metadata), params)

    @property
    def policy(self) -> TargetPolicy:
        return self._policy

    @property
    def last(self) -> Decision | None:
        return self._last

    def update_policy(self, policy: TargetPolicy) -> None:
        """Apply changed metadata, keeping what was learned about the traffic."""
        if policy.cold_start_seconds != self._policy.cold_start_seconds:
            for f in (self._prompt, self._generation):
                f.horizon_s = policy.cold_start_seconds
        self._policy = policy

    def warm(self, history: Iterable[HistoryPoint]) -> int:
        """Feed past token rates (oldest first) so a new process does not forget the trend."""
        count = 0
        for point in history:
            if point.prompt_tokens_per_s is not None:
                self._prompt.update(point.timestamp, point.prompt_tokens_per_s)
            if point.generation_tokens_per_s is not None:
                self._generation.update(point.timestamp, point.generation_tokens_per_s)
            count += 1
        return count

    def _missing_inputs(self, obs: Observation) -> list[str]:
        policy = self._policy
        missing: list[str] = []
        if obs.queue_waiting is None:
            missing.append("queue_waiting")
        if policy.prompt_tokens_per_second_per_replica and obs.prompt_tokens_per_s is None:
            missing.append("prompt_tokens_per_s")
        if policy.generation_tokens_per_second_per_replica and obs.generation_tokens_per_s is None:
            missing.append("generation_tokens_per_s")
        return missing

    def decide(self, obs: Observation) -> Decision:
        policy = self._policy
        t = obs.timestamp
        if obs.prompt_tokens_per_s is not None:
            self._prompt.update(t, obs.prompt_tokens_per_s)
        if obs.generation_tokens_per_s is not None:
            self._generation.update(t, obs.generation_tokens_per_s)

        missing = self._missing_inputs(obs)
        if not missing:
            self._last_fresh = t
        prompt_f = self._prompt.forecast()
        generation_f = self._generation.forecast()
        token_missing = any(m != "queue_waiting" for m in missing)
        # A stale forecast is not a proposal: while a token rate is missing the token
        # signals abstain and last_known holds the last complete demand instead.
        token_demand = None if token_missing else tokens.demand(prompt_f, generation_f, policy)
        unknown = "; ".join(f"{m}: {obs.missing.get(m, 'no data')}" for m in missing) or "no data yet"

        proposals: list[Proposal] = [
            floor.propose_floor(policy),
            prewarm.propose(policy.windows, obs.now, policy.cold_start_seconds),
            queue.propose(
                obs.queue_waiting, policy.target_queue_per_replica, obs.missing.get("queue_waiting")
            ),
            tokens.propose(token_demand, policy, unknown),
            floor.propose_hold(token_demand, policy),
            floor.propose_last_known(self._last_demand, missing),
        ]
        notes: list[str] = []
        if missing:
            notes.append(f"inputs missing: {unknown}")
        if self._last_fresh is not None and missing:
            notes.append(f"inputs last complete {t - self._last_fresh:.0f}s ago")

        forecast: dict[str, float] = {}
        if prompt_f:
            forecast["prompt_tokens_per_s"] = prompt_f.at(policy.cold_start_seconds)
        if generation_f:
            forecast["generation_tokens_per_s"] = generation_f.at(policy.cold_start_seconds)
        if token_demand:
            forecast["busy_replicas_now"] = token_demand.now
            forecast["busy_replicas_at_horizon"] = token_demand.horizon

        decision = combine(proposals, obs, policy, notes, forecast)
        demand = [p.replicas for p in proposals if p.signal in _DEMAND_SIGNALS and p.replicas is not None]
        if demand and not missing:
            self._last_demand = max(demand)
        self._last = decision
        return decision

    def data_age_seconds(self, now_timestamp: float) -> float | None:
        """Seconds since every demand input was present, or None if they never were."""
        return None if self._last_fresh is None else max(0.0, now_timestamp - self._last_fresh)

    def snapshot(self) -> dict[str, Any]:
        return {
            "prompt": self._prompt.snapshot(),
            "generation": self._generation.snapshot(),
            "last_demand": self._last_demand,
            "last_fresh": self._last_fresh,
        }
