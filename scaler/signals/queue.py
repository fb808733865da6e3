"""Queue signal: the backlog as work, in replicas of ``targetQueuePerReplica`` waiting each.

    persisted = min(waiting now, waiting at the previous refresh)   (waiting now on the first)
    drain     = (previous - now) / dt                                requests/s, when it shrinks
    left      = 0                              if it drains within coldStartSeconds by itself
              = persisted - drain * coldStartSeconds                 otherwise (drain 0 when it grows)
    queue     = ceil(left / targetQueuePerReplica)

The count is absolute, so replicas that are still starting count as capacity on its way:
100 waiting at 10 per replica asks for 10 whether 5 or 10 of them are Ready, and scale-ups
do not stack while pods start. Two things keep it from buying replicas that arrive after
the backlog is gone: a queue seen at one refresh only (a spike, gone at the next) is not
counted, and a backlog the fleet drains faster than a new replica could be Ready buys
none. A backlog that persists or grows buys replicas for what will be left of it when a
replica ordered now is Ready.

*Examples* (``targetQueuePerReplica`` 10, cold start 180 s, refreshes 15 s apart): 315
waiting at one refresh and none before: 0 (``persisted`` is 0). 300 at two refreshes in
a row: 30. 810 then 700: draining at 7.3 requests/s, gone in 96 s: 0. 810 then 800:
draining at 0.67 requests/s, 800 - 120 = 680 left after the cold start: 68.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scaler.model import Proposal, Signal
from scaler.signals import ceil_replicas

if TYPE_CHECKING:
    from scaler.signals.context import SignalInputs


def propose(
    waiting: float | None,
    target_per_replica: float,
    missing_reason: str | None = None,
    previous: tuple[float, float] | None = None,
    horizon_s: float = 0.0,
) -> Proposal:
    """``previous``: (seconds since, waiting) at the previous refresh, if there was one."""
    if waiting is None:
        why = missing_reason or "no data"
        return Proposal(Signal.QUEUE, None, f"queue depth unknown ({why})")
    persisted = waiting
    reason = f"{waiting:g} waiting at {target_per_replica:g} per replica"
    left = waiting
    if previous is not None:
        dt, before = previous
        persisted = min(waiting, before)
        drain = (before - waiting) / dt if dt > 0 and waiting < before else 0.0
        left = max(0.0, persisted - drain * horizon_s)
        if persisted < waiting:
            reason = f"{waiting:g} waiting, {persisted:g} of it also at the previous refresh"
        if drain > 0:
            seconds = waiting / drain
            if seconds <= horizon_s:
                left = 0.0
                reason += f"; draining {drain:.2f}/s, gone in {seconds:.0f}s, before a new replica is Ready"
            else:
                reason += f"; draining {drain:.2f}/s, {left:g} left after {horizon_s:g}s"
        reason += f"; {target_per_replica:g} per replica"
    replicas = ceil_replicas(left / target_per_replica)
    return Proposal(Signal.QUEUE, replicas, reason, {"queue_waiting": waiting, "queue_counted": left})


def from_inputs(inputs: SignalInputs) -> Proposal:
    """The queue signal on the table's one signature."""
    obs = inputs.observation
    return propose(
        obs.queue_waiting,
        inputs.policy.target_queue_per_replica,
        obs.missing.get("queue_waiting"),
        inputs.previous_queue,
        inputs.horizon_s,
    )
