"""How hard a replica may be loaded, measured against the objective itself. Pure.

The queueing model (``scaler.decider.signals.load``) gives the *shape*: how the share of late first
tokens, and the TTFT tail, grow with the load on ``N`` replicas. Its *level* rests on capacities
read in a world the model simplifies (replicas that each queue their own requests, chunked prefill
sharing every step with the decodes, heavy-tailed prompts), so it may be optimistic or pessimistic
by a factor. The objective is measured at every refresh (the TTFT histogram's share over
``ttftObjectiveSeconds`` and its p99), so that factor is measured too: ``scale``, by which the
model's per-replica capacities are multiplied before the fleet is sized.

It learns only where the fleet's first tokens say something about the model: at a refresh whose
rate window began once the Ready replicas stood as they are and a replica that joined had been
handed its share of the requests in service, with at least as many Ready as the load signal asked
for one lead before (lateness while a scale-up is still starting is the lag's, not the model's),
and with no backlog beyond the objective in the last rate window (the first tokens of a queue that
outran the fleet stay late after it drains). The share: least-outstanding dispatch (llm-d's queue
and KV scorers alike) hands a replica that joins every request until it holds as many as the
others, ``running / ready``, which at ``arrivals`` a second takes ``T / ready`` (Little's law,
``running = arrivals x T``, ``T`` the time in service), and their prompts queue on it together:

    stood >= rate window + T / ready                        Ready unchanged that long

(decode-heavy traffic, 90 s in service on 6 replicas: 15 s; in the step world five of a day's six
cuts came from the first rate window after the Ready count changed, late 4-14% there and 0% a
refresh later). There, both ways, by inverting the model at the fleet as it stands (bisection in
log space, ``scale_meeting``):

    late beyond the budget (measured share > lateBudget) and more than the model says:
        cut   = the scale at which the model's late share is the one measured   (at most halved),
                but no lower than the scale at which the model's mean wait is the
                one measured: the mean queue time (where the engine exports one), or
                waiting / arrivals now where longer
    within the budget, a rate window of at least TAIL_REQUESTS first tokens:
        tail  = the scale at which the model's p99 TTFT is the p99 measured     (x1/2 .. x4)

    called = min(max(base, median of the tails), least cut)   over ``error_window_s``; the
                                                              median once TAILS tails are in,
                                                              else base
    base   = min(1, scale)                                    the model's own level, or the
                                                              scale applied where it is lower
    scale  <- called                                          at once where it is lower
    scale  <- min(called, scale x exp(w))                     where higher, w = 1 - exp(-dt / tau)

with ``tau`` = ``calibration_time_constant_s``. A cut says the fleet is short of capacity, so that its
requests wait; below the scale at which the model's mean wait (``P(wait) / decay``, summed over the
resources: ``scaler.decider.signals.load.ModelNow.mean_wait``) is the mean queue time measured (vLLM's and
SGLang's queue-time histograms), the model would have them wait longer than they were seen to. That
histogram is observed as requests finish, a time in service after a burst made them wait, so the
requests waiting now over the arrivals (their mean wait by Little's law) stand for it where longer. A
late share that the waits do not explain (prompts whose own prefill is long, a step's length, a
few requests behind one long prompt) is not the fleet's size, and no cut chases it: on a day of
ServeGen traffic (fluid world, least-outstanding dispatch) minutes 0.5-1.3% late at fleets whose
requests waited 0.01-0.04 s on average had cut the scale from 1 to 0.33 over seven hours, the fleet
at its GPU limit with the model expecting a third of first tokens late while 0.01% of the day's
were. A model too optimistic is tightened at the refresh
that shows it; one too pessimistic is loosened as surely, a step each refresh, each step one the
next refreshes can refute, and never past a scale that was late within the error window (the late
first tokens it cost are remembered, not looked for again). The tails loosen but do not tighten
(``max(base, ...)``): a tail reads longer than the model's where prompts vary or steps are long, and
what is late is the cut's to say. A cut is forgotten after the error window, but forgetting is not
a measurement: the scale it left stands (``base``) until tails measured there call for more. A tail
reads long, so the scale it calls for is one the fleet holds; the model's own level is not, where a
cut was needed (decode-heavy traffic in the step world, returning to 1 when each hour's cuts
expired: 0.27 to 1.00 within ten minutes, then 81% on time, and cut again). And while the queue
grows beyond the objective on every Ready replica at this refresh and the previous, each replica
serves all it can: the scale is cut to what they are seen to serve (``served / ready`` over the
model's requests/s a replica completes).

*Example*: 15 s refreshes, ``tau`` 300 s: ``w = 1 - exp(-15 / 300) = 0.049``, so a scale rises by
5% a refresh. Twenty tails within the hour calling for 1.1-1.6, median 1.3, and no cut: the scale
goes 1.00, 1.05, 1.10, ... and reaches 1.3 in six refreshes (``ln 1.3 / 0.049 = 5.4``). A fleet
sized at 1.3 then late 2% against a 1% budget where the model says 0.4%: the scale at which the
model says 2% (say 1.05) is a cut, applied at once, and no tail loosens past it for an hour.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from scaler.decider.demand import Demand
from scaler.decider.forecast import Forecast
from scaler.decider.params import DeciderParams
from scaler.decider.signals import load as load_signal
from scaler.decider.signals import queue as queue_signal
from scaler.decider.spec import DeciderSpec
from scaler.decider.stages import ALL, Stages
from scaler.model import Capacity, Observation

# A refresh late beyond the budget cuts the scale by at most this factor: the late first tokens of a
# minute are evidence, not a verdict (a burst brings them too); one that persists cuts again.
MOST_CUT = 2.0
# The TTFT quantile the measured tail is read at (the live source's p99): the highest the servers'
# histogram gives of a minute's first tokens with a few of them above it.
TAIL = 0.99
# First tokens a rate window needs before its p99 counts: a hundred put one above it.
TAIL_REQUESTS = 100.0
# Tails measured within the error window before their median moves the scale: five minutes of 15 s
# refreshes, so a few lucky minutes do not.
TAILS = 20
# One tail calls for a scale at most this many times the current one either way, found within
# 2^-BISECTIONS of the range in log space.
MOST_RAISED = 4.0
BISECTIONS = 12  # halvings of the range, in log space: 2^-12 of ln 4 is a 0.03% step in the scale

Evidence = tuple[tuple[float, float], ...]  # (when, the scale it calls for), oldest first


@dataclass(frozen=True, slots=True)
class Plan:
    """A target the load signal sized: when, for one lead later, what it asked and at which scale."""

    t: float
    lead_s: float
    asked: int
    scale: float


@dataclass(frozen=True, slots=True)
class Calibration:
    """The measured scale of the model's capacities, what it was read from (module docstring) and
    what the next refresh needs: the tails that called for a scale and the late refreshes that cut it
    within the error window, the plans of the last lead, and whether a backlog grew or outran."""

    raised: Evidence = ()  # the scale each tail measured at the planned size called for
    cut: Evidence = ()  # fleets at the planned size late beyond the budget: the scale each left
    scale: float = 1.0  # the scale applied: the evidence's (``called``), reached from below gradually
    t: float | None = None  # the last refresh
    burn: float | None = None  # the budgets the last refresh that could teach it spent
    plans: tuple[Plan, ...] = ()  # the load signal's targets of the last lead, oldest first
    growing: bool = False  # a backlog beyond the objective grew at the previous refresh
    backlog_at: float = -math.inf  # the last refresh with a backlog beyond the objective

    @property
    def called(self) -> float:
        """The scale the evidence calls for: the median of the tails' within the window, never below
        the model's own (1) or the scale applied, whichever is lower (a tail is read longer than the
        model's where prompts vary or steps are long, so it loosens but does not tighten; a cut
        forgotten is not a model proved right), and no more than the least a late refresh left."""
        called = sorted(v for _, v in self.raised)
        base = min(1.0, self.scale)
        most = max(base, called[len(called) // len((0, 1))]) if len(called) >= TAILS else base
        least = min((v for _, v in self.cut), default=math.inf)
        return min(most, least)

    def forget(self, t: float, params: DeciderParams) -> Calibration:
        """The evidence no older than the error window at ``t``."""
        cutoff = t - params.error_window_s
        return replace(
            self,
            raised=tuple(p for p in self.raised if p[0] > cutoff),
            cut=tuple(p for p in self.cut if p[0] > cutoff),
        )

    def settle(self, dt: float, params: DeciderParams) -> Calibration:
        """The applied scale moved toward what the evidence calls for: down at once, up at most by
        ``1 - exp(-dt / calibration_time_constant_s)`` in log space (a leaner fleet is tried a step at
        a time, each step one the next refreshes can refute)."""
        called = self.called
        if called <= self.scale:
            return replace(self, scale=called)
        w = 1.0 - math.exp(-max(0.0, dt) / params.calibration_time_constant_s)
        return replace(self, scale=min(called, self.scale * math.exp(w)))


@dataclass(frozen=True, slots=True)
class Refresh:
    """What one refresh shows the calibration: the observation, the capacities as measured (before
    any scale), the demand and its two forecasts."""

    obs: Observation
    capacity: Capacity
    demand: Demand
    prompt: Forecast | None
    concurrency: Forecast | None


def scaled(capacity: Capacity, scale: float) -> Capacity:
    """``capacity`` with each figure times ``scale``."""
    if scale == 1.0:
        return capacity
    return replace(
        capacity,
        prefill_tokens_per_s=None
        if capacity.prefill_tokens_per_s is None
        else capacity.prefill_tokens_per_s * scale,
        slots=None if capacity.slots is None else capacity.slots * scale,
        itl_slots=None if capacity.itl_slots is None else capacity.itl_slots * scale,
    )


def calibrate(
    state: Calibration,
    seen: Refresh,
    spec: DeciderSpec,
    params: DeciderParams,
    stood_s: float,
    stages: Stages = ALL,
) -> Calibration:
    """The calibration after one refresh (module docstring); ``stood_s``: how long the Ready replicas
    have stood as they are."""
    t = seen.obs.timestamp
    last, state = state.t, replace(state.forget(t, params), t=t)
    state = _learn(state, seen, spec, params, stood_s, stages)
    return state.settle(0.0 if last is None else t - last, params)


def _learn(
    state: Calibration,
    seen: Refresh,
    spec: DeciderSpec,
    params: DeciderParams,
    stood_s: float,
    stages: Stages,
) -> Calibration:
    obs, capacity, demand = seen.obs, seen.capacity, seen.demand
    t, ready, served, waiting = obs.timestamp, obs.ready_replicas, demand.served_per_s, obs.queue_waiting
    growing = state.growing
    backlog = bool(
        ready
        and served
        and waiting is not None
        and waiting >= max(ready, served * spec.ttft_objective_seconds)
    )
    if backlog:
        state = replace(state, backlog_at=t)  # its first tokens stay late after it drains: not the model's
    # A replica that joined is handed every request until it holds its share of those in service:
    # the rate window must begin once it has (module docstring).
    filled_s = (demand.time_in_service_s or 0.0) / ready if ready and stages.join_fill else 0.0
    steady = stood_s >= params.rate_window_s + filled_s
    if not (ready and served and steady):
        return replace(state, growing=False)
    arrivals = demand.arrivals_per_s
    state = replace(state, growing=backlog and arrivals is not None and arrivals > served)
    mu = queue_signal.service_rate(capacity, demand, obs, spec.role, measured_floor=False)
    if mu is not None and growing and state.growing:
        # A backlog beyond the objective grew at this refresh and the previous: each Ready replica
        # serves all it can, and that is the most the scale may say it holds.
        seen_ratio = served / ready / mu.per_replica
        if math.isfinite(seen_ratio) and 0 < seen_ratio < state.scale:
            state = replace(state, cut=(*state.cut, (t, seen_ratio)), scale=seen_ratio)
    measured = obs.ttft_over_objective
    plan = _planned(state, t)
    if measured is None or plan is None or state.backlog_at > t - params.rate_window_s:
        return state
    # Lateness at a fleet at least as large as the load signal asked a lead before is the model's;
    # smaller (a scale-up still starting, GPUs short), it is the lag's.
    if ready < plan.asked:
        return state
    budget = spec.late_budget
    burn = measured / budget if budget > 0 else math.inf
    state = replace(state, burn=burn)

    def late(scale: float) -> float:
        found = _model(seen, spec, scale, stages)
        return 0.0 if found is None else found.late(ready, params.exact_servers)

    if burn > 1.0 and late(state.scale) < measured:
        cut_to = scale_meeting(late, state.scale, measured, down=True)
        waited = obs.queue_time_mean_seconds
        if waited is not None and obs.queue_waiting is not None and demand.arrivals_per_s:
            # The histogram is observed as requests finish, a time in service after a burst made them
            # wait; those waiting now wait waiting / arrivals on average (Little's law) as it happens.
            waited = max(waited, obs.queue_waiting / demand.arrivals_per_s)
        if stages.wait_bound and waited is not None:

            def wait(scale: float) -> float:
                found = _model(seen, spec, scale, stages)
                return 0.0 if found is None else found.mean_wait(ready, params.exact_servers)

            # No lower than the waits measured allow: below it the model would have the requests wait
            # longer on average than they were seen to.
            cut_to = max(cut_to, scale_meeting(wait, state.scale, waited, down=True))
        if cut_to < state.scale:
            state = replace(state, cut=(*state.cut, (t, cut_to)))
            return state.settle(0.0, params)
        return state
    return _tail(state, seen, spec, params, measured, stages)


def _model(seen: Refresh, spec: DeciderSpec, scale: float, stages: Stages) -> load_signal.ModelNow | None:
    """The load signal's model at the demand's level now with the capacity read at ``scale``."""
    sizing = load_signal.Sizing(
        spec, scaled(seen.capacity, scale), seen.demand, seen.prompt, seen.concurrency, seen.obs
    )
    return load_signal.model_now(sizing, stages)


def _tail(
    state: Calibration,
    seen: Refresh,
    spec: DeciderSpec,
    params: DeciderParams,
    measured: float,
    stages: Stages,
) -> Calibration:
    """``state`` with the scale the TTFT tail of a fleet that met the objective calls for: the one at
    which the model's p99 at the fleet as it stands is the p99 measured."""
    obs, demand = seen.obs, seen.demand
    ready, served, tail = obs.ready_replicas, demand.served_per_s, obs.ttft_p99_seconds
    if measured > spec.late_budget or not ready or not served or tail is None:
        return state
    if served * params.rate_window_s < TAIL_REQUESTS:
        return state

    def modelled(scale: float) -> float:
        found = _model(seen, spec, scale, stages)
        return 0.0 if found is None else found.ttft_quantile(ready, TAIL, params.exact_servers)

    called = scale_meeting(modelled, state.scale, tail, down=None)
    return replace(state, raised=(*state.raised, (obs.timestamp, called)))


def planned(state: Calibration, t: float, lead_s: float, asked: int | None, checked: bool) -> Calibration:
    """``state`` with the load signal's target of this refresh remembered for one lead (where it
    asked, on a plan the forecast has checked), and the plans a lead old forgotten but the last."""
    plans = list(state.plans)
    if asked is not None and checked:
        plans.append(Plan(t, lead_s, asked, state.scale))
    while len(plans) > 1 and plans[1].t + plans[1].lead_s <= t:
        plans.pop(0)
    return replace(state, plans=tuple(plans))


def _planned(state: Calibration, t: float) -> Plan | None:
    """The plan made one lead before ``t``: the fleet the load signal asked to stand now."""
    due = [p for p in state.plans if p.t + p.lead_s <= t]
    return due[-1] if due else None


def scale_meeting(
    figure: Callable[[float], float], scale: float, measured: float, down: bool | None = False
) -> float:
    """The scale from ``scale`` up (at most ``MOST_RAISED`` times; ``down``: down, at most ``MOST_CUT``
    times; both ways where ``down`` is None) at which ``figure`` (the model's, at the fleet as it
    stands, falling as the scale rises) is the one ``measured``: bisection in log space."""
    low = math.log(scale / MOST_CUT) if down or down is None else math.log(scale)
    high = math.log(scale) if down else math.log(scale * MOST_RAISED)
    if figure(math.exp(low)) < measured:
        return math.exp(low)
    if figure(math.exp(high)) > measured:
        return math.exp(high)
    for _ in range(BISECTIONS):
        mid = math.fsum((low, high)) / len((low, high))
        if figure(math.exp(mid)) > measured:
            low = mid
        else:
            high = mid
    return math.exp(high)
