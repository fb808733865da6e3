"""The one argument every signal takes: what the engine knows at one refresh. Pure.

The engine builds a ``SignalInputs`` once per decision (after learning from the
observation) and walks ``scaler.signals.table.SIGNALS``, calling each signal's
``from_inputs`` with it; a signal reads the fields it needs and ignores the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.config import TargetPolicy
from scaler.model import Capacity, Observation
from scaler.signals.tokens import TokenDemand


@dataclass(frozen=True, slots=True)
class SignalInputs:
    """``horizon_s``: the lead one cold start ahead; ``token_demand``: the forecast token load
    (None while a token rate is missing), ``token_unknown`` why; ``previous_queue``: (seconds
    since, waiting) at the previous refresh; ``learning``: why the engine is still learning
    (None once it is not) and ``earned`` the replicas it keeps meanwhile; ``last_demand``: the
    last complete demand; ``missing``: the demand inputs missing now."""

    policy: TargetPolicy
    observation: Observation
    horizon_s: float
    capacity: Capacity
    token_demand: TokenDemand | None
    token_unknown: str
    previous_queue: tuple[float, float] | None
    learning: str | None
    earned: int | None
    last_demand: int | None
    missing: tuple[str, ...]
