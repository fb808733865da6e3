"""The ordered table of signals the engine walks. Pure.

Each signal is a module with a pure ``propose`` of its own arguments; the table reads each one's
from the decision's ``SignalInputs`` (so no signal knows that record), and lists them in
``Signal`` order, which is also the order ties are broken in (``scaler.decider.combine.combine``: the
earliest of equal proposals binds). The GPU inventory is
not here: it clamps the combined target (``scaler.decider.signals.gpu``), it does not propose one.

============  =========================================  ========================
signal        proposes                                   module
============  =========================================  ========================
floor         ``minReplicas``                            ``signals/floor.py``
prewarm       the replicas of an open pre-warm window    ``signals/prewarm.py``
queue         the replicas that drain the backlog        ``signals/queue.py``
load          each resource's need at the forecast       ``signals/load.py``
last_known    the last complete demand, while one lacks  ``signals/last_known.py``
              (the standing fleet, while warming up)
============  =========================================  ========================
"""

from __future__ import annotations

from collections.abc import Callable

from scaler.decider.signals import floor, last_known, load, prewarm, queue
from scaler.decider.signals.context import SignalInputs
from scaler.model import Proposal, Signal


def _floor(inputs: SignalInputs) -> Proposal:
    """The floor signal on the table's one signature."""
    return floor.propose_floor(inputs.spec)


def _prewarm(inputs: SignalInputs) -> Proposal:
    """The pre-warm signal on the table's one signature."""
    return prewarm.propose(inputs.spec.windows, inputs.observation.now, inputs.horizon_s)


def _queue(inputs: SignalInputs) -> Proposal:
    """The queue signal on the table's one signature."""
    if not inputs.stages.queue_signal:
        return Proposal(Signal.QUEUE, None, "removed (Stages.queue_signal)")
    obs, demand, lead_s = inputs.observation, inputs.demand, inputs.horizon_s
    load = inputs.load
    if inputs.stages.backlog_in_load and load is not None and load.binding is not None and load.backlog:
        return Proposal(Signal.QUEUE, None, "the backlog is sized in the load signal's proposal")
    found = queue.propose(
        obs,
        demand,
        inputs.capacity,
        lead_s,
        inputs.spec.target_queue_per_replica,
        inputs.previous_waiting,
        inputs.spec.role,
    )
    return queue.with_safety_net(found, obs, demand, lead_s, inputs.backlog_alarm)


def _load(inputs: SignalInputs) -> Proposal:
    """The load signal on the table's one signature."""
    return load.propose(inputs.load, inputs.load_unknown)


def _last_known(inputs: SignalInputs) -> Proposal:
    """The last-known signal on the table's one signature."""
    if not inputs.stages.start_hold:
        return last_known.propose_last_known(inputs.last_demand, list(inputs.missing))
    return last_known.propose_last_known(
        inputs.last_demand, list(inputs.missing), inputs.standing, inputs.warming_s
    )


SIGNALS: tuple[tuple[Signal, Callable[[SignalInputs], Proposal]], ...] = (
    (Signal.FLOOR, _floor),
    (Signal.PREWARM, _prewarm),
    (Signal.QUEUE, _queue),
    (Signal.LOAD, _load),
    (Signal.LAST_KNOWN, _last_known),
)


def propose_all(inputs: SignalInputs) -> list[Proposal]:
    """Every signal's proposal, in table order."""
    return [propose(inputs) for _, propose in SIGNALS]
