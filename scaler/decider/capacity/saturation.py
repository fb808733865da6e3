"""Whether requests wait for room, named once per refresh from what is measured. Pure.

A refresh where requests wait on every Ready replica shows what a replica holds at once (the
batch slots: the engine admits no more); one where they do not shows only that there is room.
So each refresh is classified here, and the slots' cap is learned only from the refreshes that
show it (``scaler.decider.capacity.slots``):

    requests wait on every replica, at this refresh and the previous     SLOTS
    otherwise                                                            ROOM
    the Ready replicas changed within a rate window or a time in service UNSETTLED

"Wait on every replica" is at least one request waiting for room per Ready replica (a one-refresh
spike may wait for anything). Where the engine times its phases, a request counts as waiting only
where the mean queue time is at least the mean prefill time (it waited behind others): vLLM V1
counts a request as waiting until a step admits it, so with long steps a replica with room always
shows one or two waiting for the step under way. A fleet whose Ready replicas changed within a
rate window, or within a time in service (a scale-up's new replicas are empty while queues stay
on the old ones; a scale-down's removed replicas still run what they hold, counted in
``running``), is UNSETTLED: its rates and counts do not describe the replicas that are Ready.

Why waiting is not split further into "prompts queued behind prefill" and "every slot busy" by
the prefill's busy share (the mean requests in prefill per Ready replica, Little's law on the
prefill time, ``busy = served x prefill time / ready``): with chunked prefill a step computes
chunks of several prompts beside the decodes, so the share is above 1 on a replica that is short
of slots as readily as on one short of prefill, and a mean over a rate window does not say what
each step was short of. Classified by it, the decider read full batches as a prefill backlog and
learned neither figure from them; without it, it was never worse by more than 0.06 points and
up to 26 points better (``BENCHMARKS.md``, the ablation of issue 35: long prompts on a fleet whose
``max_num_seqs`` binds first, capacities not configured, 73.0 % within the objective with it,
99.3 % without).
The busy share is still read (``Saturation.prefill_busy``): it is how many prompts share a
replica's prefill at once (``scaler.decider.capacity.prefill``), and the busiest replica's keeps
a cap reading from a replica busy with prefill (``scaler.decider.capacity.slots``).

Where the engine says why its requests wait (vLLM's ``num_requests_waiting_by_reason``: ``capacity``,
queued and not yet tried; ``deferred``, tried and held by a LoRA budget, a KV transfer or a
blocked status), the requests counted as waiting on every replica are those waiting for room:
the queue less the deferred ones (``waiting_for_room``). A fleet whose queue is all deferred has
room, and learns no capacity from it (a deferred queue beside a batch of 10 would otherwise say a
replica holds 10). Where the split is not exported, every waiting request counts.

*Example*: 6 Ready replicas, unchanged for ten minutes, 30 waiting now and 24 at the last
refresh, with a mean queue time of 2 s over a mean prefill time of 0.45 s: SLOTS. With 4 waiting
now: ROOM (two replicas have nobody waiting).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from scaler.decider.demand import Demand
from scaler.decider.params import DeciderParams
from scaler.decider.stages import Stages
from scaler.model import Observation


class Bound(StrEnum):
    """Why requests wait at one refresh (module docstring)."""

    UNSETTLED = "unsettled"  # the Ready replicas changed within a rate window or a time in service
    ROOM = "room"  # requests do not wait on every replica: the replicas have room
    SLOTS = "slots"  # requests wait for room on every replica: the engine admits no more


@dataclass(frozen=True, slots=True)
class Saturation:
    """One refresh's classification and the fleet state the estimators read beside it."""

    bound: Bound
    steady: bool  # Ready unchanged for a rate window: the rates were served by these replicas
    drained: bool  # no replica removed within a time in service still counts in running
    idle: bool  # nobody waited at this refresh nor at the previous one
    prefill_busy: float | None  # the prefill's busy share per Ready replica, from the phase times
    settled: bool = False  # steady for a time in service too: queues a scale-up left are gone
    busiest_prefill: float | None = None  # the busiest replica's requests in prefill (phase times)
    stood_s: float = 0.0  # seconds the Ready replicas have stood as they are


def waiting_for_room(obs: Observation) -> float | None:
    """The requests waiting for a replica's room (module docstring): the queue, the router's
    included, less what the servers say is deferred, where they say it.

    *Example*: 40 waiting on 4 servers, 30 of them deferred: 10 wait for room, 2.5 a replica, so
    every replica is full; with 38 deferred, 2 wait for room, fewer than the replicas: room."""
    waiting, deferred = obs.queue_waiting, obs.queue_waiting_deferred
    if waiting is None or deferred is None:
        return waiting
    return max(0.0, waiting - deferred)


class SaturationReader:
    """Classifies each refresh (module docstring), remembering what the next one needs."""

    def __init__(self, params: DeciderParams, stages: Stages) -> None:
        self.params = params
        self.stages = stages
        self._ready_since: tuple[int, float] | None = None  # (Ready replicas, since when)
        self._shrunk_at: float | None = None
        self._everywhere = False  # requests waited on every replica at the previous refresh
        self._waited = True  # anyone waited at the previous refresh (or none was seen yet)

    def read(self, obs: Observation, demand: Demand) -> Saturation:
        """Classify ``obs`` (call once per refresh, in time order)."""
        t, ready, waiting = obs.timestamp, obs.ready_replicas, obs.queue_waiting
        waited, self._waited = self._waited, bool(waiting)
        before, self._everywhere = self._everywhere, False
        if ready is None or ready < 1:
            self._ready_since = None
            return Saturation(Bound.UNSETTLED, False, True, False, None)
        if self._ready_since is not None and ready < self._ready_since[0]:
            self._shrunk_at = t
        if self._ready_since is None or self._ready_since[0] != ready:
            self._ready_since = (ready, t)
        in_service = demand.time_in_service_s or 0.0
        age = t - self._ready_since[1]
        steady = age >= self.params.rate_window_s
        settled = steady and age >= in_service
        drained = self._shrunk_at is None or t - self._shrunk_at > in_service
        idle = waiting == 0 and not waited
        # Requests wait on every replica, and longer than a prompt takes to compute: behind others, not
        # for the step under way to end (vLLM V1 counts a request waiting until a step admits it).
        queue_s, prefill_s = obs.queue_time_mean_seconds, obs.prefill_time_mean_seconds
        behind = queue_s is None or prefill_s is None or not self.stages.phase_times or queue_s >= prefill_s
        room = waiting_for_room(obs)
        everywhere = room is not None and room >= ready and behind
        self._everywhere = everywhere
        if not (settled and drained):
            bound = Bound.UNSETTLED
        elif not (everywhere and before):
            bound = Bound.ROOM
        else:
            bound = Bound.SLOTS
        busiest = obs.prefill_busy_max if self.stages.phase_times else None
        return Saturation(bound, steady, drained, idle, self._busy(obs, demand, ready), settled, busiest, age)

    def _busy(self, obs: Observation, demand: Demand, ready: int) -> float | None:
        """The prefill's busy share per Ready replica (module docstring), where the phases are timed."""
        served, prefill_s = demand.served_per_s, obs.prefill_time_mean_seconds
        if self.stages.phase_times and prefill_s is not None and served is not None:
            return served * prefill_s / ready
        return None
