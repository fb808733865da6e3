"""What the engine knows at one refresh, the signal table's one argument. Pure.

The engine builds a ``SignalInputs`` once per decision (after learning from the
observation) and walks ``scaler.decider.signals.table.SIGNALS``, which reads each signal's
arguments from it; no signal module imports this one.
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.decider.demand import Demand
from scaler.decider.params import DEFAULT, DeciderParams
from scaler.decider.signals.load import LoadNeed
from scaler.decider.spec import DeciderSpec
from scaler.decider.stages import ALL, Stages
from scaler.model import Capacity, Observation


@dataclass(frozen=True, slots=True)
class SignalInputs:
    """``horizon_s``: the lead one cold start ahead; ``demand``: this refresh's offered demand;
    ``capacity``: what one replica holds; ``load``: each resource's need (None while a demand
    input is missing), ``load_unknown`` why; ``previous_waiting``: the queue at the previous
    refresh; ``last_demand``: the last complete demand; ``missing``: the demand inputs missing now;
    ``backlog_alarm``: why the backlog outran the Ready replicas at this refresh and the previous one
    (``scaler.decider.signals.queue``), which arms the queue signal's safety net, or None;
    ``standing`` and ``warming_s``: the replicas standing when the target was first watched and the
    seconds of the demand's warm-up left, which ``last_known`` holds them over."""

    spec: DeciderSpec
    observation: Observation
    horizon_s: float
    demand: Demand
    capacity: Capacity
    load: LoadNeed | None
    load_unknown: str
    previous_waiting: float | None
    last_demand: int | None
    missing: tuple[str, ...]
    backlog_alarm: str | None = None
    standing: int | None = None  # the replicas standing when the target was first watched
    warming_s: float | None = None  # seconds of the demand's warm-up left (None: watched)
    params: DeciderParams = DEFAULT  # the decider's constants
    stages: Stages = ALL  # which of its mechanisms run (all, but in an ablation)
