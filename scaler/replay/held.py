"""GPU-hours a policy spent holding the user's own floor and pre-warm windows, counted per tick.

A ratio to the clairvoyant reads as waste only if the replicas above it were the policy's
choice. Some are the user's: ``minReplicas`` (``minReplicaCount``) and the pre-warm windows
(this scaler's ``prewarmStart``/``prewarmEnd``, KEDA's ``cron`` triggers) hold replicas whatever
the demand, and the clairvoyant has no windows. At every control tick each policy records three
asks (``HeldLog``):

    d = what its demand alone asked       this scaler: the queue, load and last_known signals
                                          (within the decision's clamps); KEDA: the HPA's
                                          proposal over its other triggers; the clairvoyant:
                                          the busy time of the minute where its floor binds
    f = what its floor asked              minReplicas, the larger of the trigger's and KEDA's
    p = what its pre-warm windows asked   the pre-warm signal's proposal, an open cron trigger's
                                          desiredReplicas; 0 outside windows

and of the ``b`` replicas holding GPUs after the tick (starting or Ready), those above what the
demand asked are counted against the floor up to ``f``, then against the windows up to ``p``:

    floor held    = clip(b - d,           0, max(0, f - d))
    pre-warm held = clip(b - max(d, f),   0, max(0, p - max(d, f)))

each times the GPUs of a replica and the tick's length, summed over the scored ticks. A replica
the demand asked for is never counted, nor one the HPA kept after a window closed (the
window no longer asks for it).

The clairvoyant is replayed with this scaler's ``minReplicas`` (``scaler.replay.compare``): that
floor is on both sides of a ratio, and where a policy's demand asks as much as the floor, which
of the two held a replica is a tie, not a cost. What the clairvoyant does not hold is the
windows and a floor above its own (``r``, say a KEDA object's ``minReplicaCount: 4`` against
this scaler's 2): those replicas are counted apart too,

    floor above the reference = clip(b - max(d, r), 0, max(0, f - max(d, r)))

and a ratio *without them* leaves out the windows' and these (``scaler.replay.report``).

*Example*: after a tick 6 replicas hold GPUs; the demand asks 2, the floor 3, an open window 6:
the floor holds 1 replica and the window 3. At 2 GPUs a replica over a 5 s tick: 10 and 30
GPU-seconds. With the clairvoyant's floor at 2, the floor above it holds the same 1 replica
(10 GPU-seconds): without the windows and it the policy would have spent ``60 - 40 = 20``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

FLOOR_KEY = "floor_gpu_seconds"  # RunResult.extra: GPU-seconds the floor held
FLOOR_ABOVE_KEY = "floor_above_reference_gpu_seconds"  # ... a floor above the clairvoyant's held
PREWARM_KEY = "prewarm_gpu_seconds"  # RunResult.extra: GPU-seconds the pre-warm windows held


class Ticks(Protocol):
    """What ``held_gpu_seconds`` reads of a replay's result (``scaler.replay.replay.RunResult``, which
    imports the policies that keep a ``HeldLog``: named here by what it has, not imported)."""

    horizon_s: float  # the replay's end, in seconds
    tick_t: NDArray[np.float64]  # each scored control tick's time, in seconds
    tick_gpus: NDArray[np.int64]  # the GPUs the fleet held at each


@dataclass
class HeldLog:
    """Per control tick: what the policy's demand, floor and pre-warm windows asked (module docstring)."""

    now_s: list[float] = field(default_factory=list)
    demand: list[int] = field(default_factory=list)
    floor: list[int] = field(default_factory=list)
    prewarm: list[int] = field(default_factory=list)

    def record(self, now_s: float, demand: int, floor: int, prewarm: int) -> None:
        """One tick's asks (ticks of the warm-up, before second 0, are left out when summed)."""
        self.now_s.append(now_s)
        self.demand.append(demand)
        self.floor.append(floor)
        self.prewarm.append(prewarm)


def held_gpu_seconds(
    log: HeldLog, result: Ticks, gpus_per_replica: int, reference_floor: int | None = None
) -> dict[str, float]:
    """GPU-seconds of ``result`` the floor, the pre-warm windows and a floor above
    ``reference_floor`` (the clairvoyant's; None: the policy's own, so none) held (module
    docstring), keyed ``FLOOR_KEY``, ``PREWARM_KEY`` and ``FLOOR_ABOVE_KEY``; each tick lasts until
    the next (the last, to the horizon)."""
    if not len(result.tick_t) or not log.now_s:
        return {FLOOR_KEY: 0.0, PREWARM_KEY: 0.0, FLOOR_ABOVE_KEY: 0.0}
    times = np.asarray(log.now_s)
    # The asks in force at each scored tick: the last recorded at or before it.
    at = np.clip(np.searchsorted(times, result.tick_t + 1e-9, side="right") - 1, 0, len(times) - 1)
    d = np.asarray(log.demand)[at]
    f = np.maximum(np.asarray(log.floor)[at], d)
    p = np.asarray(log.prewarm)[at]
    bound = result.tick_gpus / gpus_per_replica
    floor = np.clip(bound - d, 0, f - d)
    prewarm = np.clip(bound - f, 0, np.maximum(0, p - f))
    shared = np.maximum(d, f if reference_floor is None else reference_floor)
    above = np.clip(bound - shared, 0, np.maximum(0, f - shared))
    lengths = np.diff(np.append(result.tick_t, max(result.horizon_s, float(result.tick_t[-1]))))
    scale = gpus_per_replica * lengths
    return {
        FLOOR_KEY: float((floor * scale).sum()),
        PREWARM_KEY: float((prewarm * scale).sum()),
        FLOOR_ABOVE_KEY: float((above * scale).sum()),
    }
