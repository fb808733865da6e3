"""Offered demand: what is asked of the fleet, never capped by what it could serve. Pure.

The rates an inference server exports count what it *served*; a saturated fleet serves
its capacity while the rest waits, so served work cannot show how much more is asked.
Requests are conserved: whatever arrived was either served or is still waiting, so

    served       = requests_per_s                         first tokens per second (rate window)
    arrivals     = max(0, served + d waiting / dt)        d waiting / dt over the same window, as
                                                          far as the previous refresh saw it too
    prompt       = prompt_tokens_per_s / served           prompt tokens per request
    in_service   = requests_running / served              seconds a request holds a batch slot
                                                          (Little's law: running = rate x time)
    prefill work = arrivals x prompt                      offered prompt tokens per second
    concurrency  = arrivals x in_service                  offered sequences in service (Erlangs)

The two offered series are what the decider forecasts (``scaler.decider.forecast``) and sizes
(``scaler.decider.signals.load``): prefill work against what one replica prefills, concurrency
against the batch slots one replica holds. The sizes per request are exponential averages
over one rate window (``rate_window_s``): the running count is an instant reading
whose Poisson scatter the queueing model already holds, and forecasting it as demand would
count that scatter twice. Where prefill and decode share forward passes, decoding slows
while prompts are computed; that shows as a longer time in service, which the concurrency
carries.

Without the served rate (an engine with no TTFT histogram) arrivals are unknown and the
served prompt rate and running count stand for the offered ones (a saturated fleet caps
them); when nothing was served in the window, arrivals times the last sizes stand.

*Example*: 5 requests/s served of 1,200 prompt tokens each, 60 running, and the queue grew
from 100 to 250 in 15 s: 10 requests/s arrived beyond those served, so arrivals are 15/s,
prefill work 18,000 tokens/s (three times the 6,000 served) and concurrency 180, not 60.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, replace

from scaler.decider.params import DEFAULT
from scaler.inputs import Input
from scaler.model import Observation


@dataclass(frozen=True, slots=True)
class Demand:
    """One refresh's offered demand (module docstring); None where it cannot be known."""

    waiting: float | None
    served_per_s: float | None
    arrivals_per_s: float | None
    prompt_tokens_per_request: float | None  # averaged over one rate window
    time_in_service_s: float | None  # averaged over one rate window
    prompt_tokens_per_s: float | None  # offered prefill work
    concurrency: float | None  # offered sequences in service


def with_router_queue(obs: Observation) -> Observation:
    """``obs`` with the router's queue counted as waiting demand beside the servers' own.

    A router that holds requests (llm-d's flow control, Dynamo's KV router) sends the servers
    only what they can take, so their own queue levels off while the backlog grows in the
    router: both are requests that arrived and have no first token yet. With no Ready replica
    no server exports a queue at all, and what the router holds is the whole backlog.
    *Example*: 5 waiting on each of 4 servers and 380 in the router: 400 waiting.
    """
    routed = obs.router_queue_waiting
    if routed is None:
        return obs
    own = obs.queue_waiting
    if own is None and obs.ready_replicas == 0:
        own = 0.0
    if own is None:
        return obs
    missing = {k: v for k, v in obs.missing.items() if k != Input.QUEUE_WAITING}
    return replace(obs, queue_waiting=own + routed, missing=missing)


class DemandReader:
    """Reads offered demand from each refresh's Observation, remembering what the next one needs."""

    def __init__(self, time_constant_s: float = DEFAULT.rate_window_s, offered: bool = True) -> None:
        self.time_constant_s = time_constant_s
        self.offered = offered  # count the queue's growth as arrivals (Stages.offered_demand)
        self._waiting: deque[tuple[float, float]] = deque()  # (time, waiting) over the last rate window
        self._last_growth = 0.0
        self._sizes_t: float | None = None
        self._prompt: float | None = None
        self._in_service: float | None = None

    def _growth(self, t: float, waiting: float | None) -> float:
        """The queue's growth per second over the rate window the served rate is read over (with it,
        arrivals are what came in that window: conservation), counted only as far as the window
        ending at the previous refresh showed it too: a backlog seen at one refresh is a spike the
        fleet as it stands serves, not arrivals to size for."""
        if waiting is None:
            return 0.0
        history = self._waiting
        while len(history) > 1 and history[1][0] <= t - self.time_constant_s:
            history.popleft()
        growth = (waiting - history[0][1]) / (t - history[0][0]) if history and t > history[0][0] else 0.0
        history.append((t, waiting))
        previous, self._last_growth = self._last_growth, growth
        if growth * previous <= 0:
            return 0.0
        return min(growth, previous) if growth > 0 else max(growth, previous)

    def _sizes(self, t: float, prompt: float | None, in_service: float | None) -> None:
        weight = (
            1.0
            if self._sizes_t is None
            else 1.0 - math.exp(-max(0.0, t - self._sizes_t) / self.time_constant_s)
        )
        self._sizes_t = t
        if prompt is not None:
            self._prompt = prompt if self._prompt is None else self._prompt + weight * (prompt - self._prompt)
        if in_service is not None:
            old = self._in_service
            self._in_service = in_service if old is None else old + weight * (in_service - old)

    def read(self, obs: Observation) -> Demand:
        """The offered demand of ``obs`` (call once per refresh, in time order)."""
        t = obs.timestamp
        waiting, served = obs.queue_waiting, obs.requests_per_s
        prompt_rate, running = obs.prompt_tokens_per_s, obs.requests_running
        growth = self._growth(t, waiting) if self.offered else 0.0
        if served is None:
            return Demand(waiting, None, None, None, None, prompt_rate, running)
        arrivals = max(0.0, served + growth)
        if served > 0:
            # A size is read only from a window that had some: no prompt tokens or nothing
            # running says nothing about how large a request is or how long it runs.
            self._sizes(
                t,
                prompt_rate / served if prompt_rate else None,
                running / served if running else None,
            )
        # Arrivals times the averaged sizes: the running count is an instant reading whose own
        # Poisson scatter the queueing model already holds, so it is not forecast as demand.
        work = arrivals * self._prompt if self._prompt is not None else (0.0 if not arrivals else None)
        concurrency = (
            arrivals * self._in_service if self._in_service is not None else (0.0 if not arrivals else None)
        )
        work = None if prompt_rate is None else work
        concurrency = None if running is None else concurrency
        return Demand(waiting, served, arrivals, self._prompt, self._in_service, work, concurrency)
