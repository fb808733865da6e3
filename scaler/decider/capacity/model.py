"""What one Ready replica holds, per target: the figures' estimators run in one step. Pure.

Each refresh is classified once (``saturation``: why requests wait, if they do), then each figure
learns from what it can read there, each in its own module with its formula and example:

    saturation   room, slot-bound, unsettled                    scaler/decider/capacity/saturation.py
    prefill      P, prompt tokens/s a replica computes          scaler/decider/capacity/prefill.py
    slots        S, sequences a replica runs at once            scaler/decider/capacity/slots.py
    slowdown     beta, how prefill slows decoding               scaler/decider/capacity/slowdown.py
    itl          the batch the ITL objective allows             scaler/decider/capacity/itl.py
    dispatch     whether the dispatch pools the replicas        scaler/decider/capacity/dispatch.py

The order is fixed: the refresh is classified first, then each figure learns from it.
"""

from __future__ import annotations

import math

from scaler.decider.capacity.dispatch import Dispatch
from scaler.decider.capacity.itl import ItlSlots
from scaler.decider.capacity.prefill import PrefillRate
from scaler.decider.capacity.saturation import Bound, Saturation, SaturationReader
from scaler.decider.capacity.slots import EXPORTED, FROM_KV_SIZE, BatchSlots
from scaler.decider.capacity.slowdown import DecodeSlowdown
from scaler.decider.demand import Demand
from scaler.decider.params import DEFAULT, DeciderParams
from scaler.decider.spec import DeciderSpec
from scaler.decider.stages import ALL, Stages
from scaler.model import Capacity, CapacitySource, Observation


class CapacityModel:
    """Per-target estimates of a replica's prefill rate and batch slots. Deterministic."""

    def __init__(self, spec: DeciderSpec, params: DeciderParams = DEFAULT, stages: Stages = ALL) -> None:
        self.params = params
        self.stages = stages
        self._configured: tuple[float | None, float | None, bool] | None = None
        self._saturation = SaturationReader(params, stages)
        self._last = Saturation(Bound.UNSETTLED, False, True, False, None)
        self._slowdown = DecodeSlowdown(params)
        self._dispatch = Dispatch(params, stages, spec.flow_control)
        self._itl = ItlSlots(spec.itl_objective_seconds, params)
        self._last_t: float | None = None
        self.configure(spec)

    def configure(self, spec: DeciderSpec) -> None:
        """Set (or change) the configured starting points; measurements are kept unless they change."""
        self._itl.objective_s = spec.itl_objective_seconds
        self._dispatch.routed = spec.flow_control
        configured = (
            spec.prompt_tokens_per_second_per_replica,
            spec.generation_tokens_per_second_per_replica,
            spec.flow_control,
        )
        if configured == self._configured:
            return
        self._configured = configured
        self.prefill = PrefillRate(configured[0], self.params, self.stages)
        self.slots = BatchSlots(configured[1], spec.flow_control, self.params, self.stages)

    @property
    def steady(self) -> bool:
        """The Ready replicas have not changed for a rate window: the rates were served by them."""
        return self._last.steady

    @property
    def stood_s(self) -> float:
        """Seconds the Ready replicas have stood as they are (0 before any was Ready)."""
        return self._last.stood_s

    def itl_slots(self) -> float | None:
        """The sequences per replica within ``itlObjectiveSeconds`` (``scaler.decider.capacity.itl``)."""
        return self._itl.value(self.slots.figure()[0])

    def capacity(self) -> Capacity:
        """The capacities the load signal uses now, each with where it came from."""
        prefill, slots = self.prefill.estimate, self.slots
        slot_value, slot_method = slots.figure()
        prefill_source: CapacitySource = (
            "measured" if prefill.measured else "configured" if prefill.value is not None else "unknown"
        )
        measured = slots.samples > 0 or slot_method == EXPORTED
        slots_source: CapacitySource = (
            "measured"
            if measured
            else "exported"
            if slot_method == FROM_KV_SIZE
            else "configured"
            if slot_value is not None
            else "unknown"
        )
        itl_base, itl_per_sequence = self._itl.per_sequence(slot_value) or (None, None)
        return Capacity(
            prefill.value,
            slot_value,
            prefill_source,
            slots_source,
            prefill.samples,
            slots.samples,
            self._slowdown.value,
            self.itl_slots(),
            prefill_method=self.prefill.method if prefill.value is not None else "",
            slots_method=slot_method,
            saturation=self._last.bound.value,
            pooled=self._dispatch.pooled,
            itl_base_s=itl_base,
            itl_per_sequence_s=itl_per_sequence,
        )

    def observe(self, obs: Observation, demand: Demand) -> None:
        """Learn from one refresh (call once per refresh, in time order): classify, then each figure.
        Each average weighs the refresh by ``1 - exp(-dt / tau)`` (``dt`` since the last refresh): the
        capacities over ``capacity_time_constant_s``, the fitted lines over
        ``learning_time_constant_s``."""
        t = obs.timestamp
        last, self._last_t = self._last_t, t
        fast = (
            1.0
            if last is None
            else 1.0 - math.exp(-max(0.0, t - last) / self.params.capacity_time_constant_s)
        )
        slow = (
            1.0
            if last is None
            else 1.0 - math.exp(-max(0.0, t - last) / self.params.learning_time_constant_s)
        )
        saturation = self._last = self._saturation.read(obs, demand)
        self.prefill.observe(obs, demand, saturation, fast, slow)
        self.slots.observe(obs, demand, saturation, fast)
        self._dispatch.observe(obs, saturation, fast)
        self._slowdown.observe(obs, demand, saturation, self.prefill.value, slow)
        self._itl.observe(obs, self.slots.figure()[0], saturation.steady, slow)
