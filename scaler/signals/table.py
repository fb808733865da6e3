"""The ordered table of signals the engine walks. Pure.

Each signal is a module with one entry point, ``from_inputs(SignalInputs) -> Proposal``;
the table lists them in ``Signal`` order, which is also the order ties are broken in
(``scaler.policy.combine``: the earliest of equal proposals binds). The GPU inventory is
not here: it clamps the combined target (``scaler.signals.gpu``), it does not propose one.

============  =========================================  ========================
signal        proposes                                   module
============  =========================================  ========================
floor         ``minReplicas``                            ``signals/floor.py``
prewarm       the replicas of an open pre-warm window    ``signals/prewarm.py``
queue         the replicas that drain the backlog        ``signals/queue.py``
load          each resource's need at the forecast       ``signals/load.py``
last_known    the last complete demand, while one lacks  ``signals/last_known.py``
============  =========================================  ========================
"""

from __future__ import annotations

from collections.abc import Callable

from scaler.model import Proposal, Signal
from scaler.signals import floor, last_known, load, prewarm, queue
from scaler.signals.context import SignalInputs

SIGNALS: tuple[tuple[Signal, Callable[[SignalInputs], Proposal]], ...] = (
    (Signal.FLOOR, floor.from_inputs),
    (Signal.PREWARM, prewarm.from_inputs),
    (Signal.QUEUE, queue.from_inputs),
    (Signal.LOAD, load.from_inputs),
    (Signal.LAST_KNOWN, last_known.from_inputs),
)


def propose_all(inputs: SignalInputs) -> list[Proposal]:
    """Every signal's proposal, in table order."""
    return [propose(inputs) for _, propose in SIGNALS]
