"""Why requests wait, named once per refresh from what is measured. Pure.

"Every batch slot busy" and "prompts queued behind prefill" look alike in the servers' queue: in
vLLM V1 a request counts as waiting (``num_requests_waiting``) until the engine first schedules
it, whether it waits for a slot or for the step's token budget to reach its prompt. They call
for different figures: a slot-bound refresh shows how many sequences a replica runs (the batch
slots), a prefill-bound one how fast it computes prompts (the prefill rate). Reading one as the
other halves the figure (a prefill backlog read as full batches says a replica holds the half of
its slots it was running). So each refresh is classified here, and each figure is learned only
from the refreshes that show it (``scaler.decider.capacity.slots``, ``scaler.decider.capacity.prefill``).

The measure that tells them apart is the **prefill's busy share**, the mean requests in prefill
per Ready replica (Little's law on the prefill time):

    busy = served x prefill time / ready          the prefill-time histogram's mean (vLLM)
    busy = prompt tokens/s / (ready x P)          without it, from the prefill rate P as
                                                  measured (never a configured guess)

A replica whose prompts queue computes prompts all the time (busy 1); one whose requests wait for
a free slot admits one each time a sequence ends, and computes prompts only that share of the
time (busy = slots / time in service x prefill time, below 1). So, with requests waiting on
every replica (at least one per Ready replica, at this refresh and the previous: a one-refresh
spike may wait for anything):

    busy >= prefill_bound_share   PREFILL   prompts wait for prefill
    busy <  prefill_bound_share   SLOTS     requests wait for a batch slot
    busy unknown                  UNKNOWN   nothing is learned that needs the cause

and without requests waiting on every replica, ROOM. Where the engine times its phases, a request
counts as waiting only where the mean queue time is at least the mean prefill time (it waited behind
others): vLLM V1 counts a request as waiting until a step admits it, so with long steps a replica
with room always shows one or two waiting for the step under way. A fleet whose Ready replicas changed within
a rate window, or within a time in service (a scale-up's new replicas are empty while queues stay
on the old ones; a scale-down's removed replicas still run what they hold, counted in
``running``), is UNSETTLED: its rates and counts do not describe the replicas that are Ready.
(``--kv-full``-style fleets whose ``max_num_seqs`` binds before the cache fills are SLOTS too:
the slots estimator tells the cap from the cache by the cache's usage.)

Where the engine says why its requests wait (vLLM's ``num_requests_waiting_by_reason``: ``capacity``,
queued and not yet tried; ``deferred``, tried and held by a LoRA budget, a KV transfer or a
blocked status), the requests counted as waiting on every replica are those waiting for room:
the queue less the deferred ones (``waiting_for_room``). A fleet whose queue is all deferred has
room, and learns no capacity from it (a deferred queue beside a batch of 10 would otherwise say a
replica holds 10). Where the split is not exported, every waiting request counts, as inferred above.

*Example*: 6 Ready replicas, 30 waiting now and 24 at the last refresh, 12 first tokens/s whose
prefill took 0.45 s on average: busy = 12 x 0.45 / 6 = 0.9, PREFILL (the prompts queue). At
0.1 s of prefill: busy 0.2, SLOTS (the batches are full).
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
    PREFILL = "prefill"  # requests wait on every replica behind prompts being prefilled
    SLOTS = "slots"  # requests wait on every replica for a batch slot
    UNKNOWN = "unknown"  # requests wait on every replica; the prefill's busy share is unknown


@dataclass(frozen=True, slots=True)
class Saturation:
    """One refresh's classification and the fleet state the estimators read beside it."""

    bound: Bound
    steady: bool  # Ready unchanged for a rate window: the rates were served by these replicas
    drained: bool  # no replica removed within a time in service still counts in running
    idle: bool  # nobody waited at this refresh nor at the previous one
    prefill_busy: float | None  # the prefill's busy share per Ready replica (module docstring)
    busy_from: str  # how the busy share was read ("prefill-time histogram", "prefill estimate", "")
    settled: bool = False  # steady for a time in service too: queues a scale-up left are gone
    busiest_prefill: float | None = None  # the busiest replica's requests in prefill (phase times)


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

    def read(self, obs: Observation, demand: Demand, prefill_rate: float | None) -> Saturation:
        """Classify ``obs`` (call once per refresh, in time order); ``prefill_rate`` is the measured
        estimate (None while only configured), used only where the engine exports no prefill time."""
        t, ready, waiting = obs.timestamp, obs.ready_replicas, obs.queue_waiting
        waited, self._waited = self._waited, bool(waiting)
        before, self._everywhere = self._everywhere, False
        if ready is None or ready < 1:
            self._ready_since = None
            return Saturation(Bound.UNSETTLED, False, True, False, None, "")
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
        busy, busy_from = self._busy(obs, demand, ready, prefill_rate)
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
        elif not self.stages.saturation_cause:
            bound = Bound.SLOTS  # ablation: waiting on every replica read as full batches
        elif busy is None:
            bound = Bound.UNKNOWN
        elif busy >= self.params.prefill_bound_share:
            bound = Bound.PREFILL
        else:
            bound = Bound.SLOTS
        busiest = obs.prefill_busy_max if self.stages.phase_times else None
        return Saturation(bound, steady, drained, idle, busy, busy_from, settled, busiest)

    def _busy(
        self, obs: Observation, demand: Demand, ready: int, prefill_rate: float | None
    ) -> tuple[float | None, str]:
        """The prefill's busy share per Ready replica, and how it was read (module docstring)."""
        served, prefill_s = demand.served_per_s, obs.prefill_time_mean_seconds
        if self.stages.phase_times and prefill_s is not None and served is not None:
            return served * prefill_s / ready, "prefill-time histogram"
        rate = obs.prompt_tokens_per_s
        if prefill_rate and rate is not None:
            return rate / (ready * prefill_rate), "prefill estimate"
        return None, ""
