"""Queue signal: the replicas that drain what waits, counting new capacity only once it can serve.

Requests already waiting are demand the load signal's forecast does not hold (it sizes what
*arrives*). With ``mu`` what one replica completes per second at its limit (the tighter of
its prefill, ``P / prompt``, and its slots, ``S / time in service``; ``scaler.decider.capacity``; a
prefill or decode pool, ``role``, only its own; never less than what each Ready replica is seen
completing now),
``lead`` one cold start, and only the Ready replicas serving until then at the rate they serve
now:

    left  = max(0, waiting + (served - ready x mu) x lead)       backlog when new replicas are Ready
    queue = ceil((served + left / lead) / mu)                    if left > 0, else 0

so the replicas ordered now keep serving what they serve and clear what is left within one more
cold start. A backlog the Ready replicas clear before a new one could serve buys nothing (a
one-poll spike); one that outlasts them asks for the whole fleet it takes, so the proposal does
not fall while requests still wait and starting replicas are not Ready yet. Replicas that are
starting are not counted as serving before the lead: they may be Ready sooner, and the next
refresh then sees the backlog shrink. What arrives beyond what is served is the load signal's:
it sizes offered arrivals (``scaler.decider.demand``).

Without a known capacity, ``mu`` is what each Ready replica served while every one of them had a
request waiting (saturated, the served rate is the limit); without that either, the backlog is
counted in replicas of ``targetQueuePerReplica`` waiting requests each, counting only what
waited at two refreshes in a row (a one-refresh spike buys nothing), or all of it at once when
no replica is Ready (a router holding requests for a fleet that is down: nothing serves them).

*Example*: 6 Ready replicas completing 0.8 requests/s each serve 4.8/s, and 540 wait: they
clear none of it (``left = 540``), so ``(4.8 + 540 / 180) / 0.8 = 9.75``: 10 replicas. With 315
waiting behind 4 Ready replicas of 1.77/s serving 5/s, ``left = 315 - 2.1 x 180 < 0``: nothing.

**The safety net** trusts no model. ``mu`` above comes from the capacities, which are measured
but may still be wrong (configured too high, read from a world that queues differently), and an
optimistic ``mu`` says the Ready replicas clear a backlog they do not. So the backlog is also
checked against what is seen: it is *alarming* when requests wait on every replica and

    waiting >= served x ttftObjectiveSeconds     a request arriving now waits longer than the
                                                  objective for its first token (Little's law)
    or the queue grows                            arrivals above what is served (scaler.decider.demand)
    or the share of first tokens over the objective is above its budget

and at two refreshes in a row (a one-refresh spike may wait for anything) the proposal is at
least what the observed throughput per Ready replica, ``mu_seen = served / ready`` (a saturated
replica serves what it can), drains within one more lead:

    left = waiting + (arrivals - served) x lead            the backlog when new replicas are Ready
    net  = ceil((arrivals + left / lead) / mu_seen)

*Example*: 2 Ready replicas serving 2 requests/s between them while 200 wait for minutes,
whatever capacity is configured: ``mu_seen = 1``, ``net = (2 + 200 / 180) / 1 = 3.1``: 4.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from scaler.decider.demand import Demand
from scaler.decider.spec import Role
from scaler.decider.units import ceil_replicas
from scaler.inputs import Input
from scaler.model import Capacity, Observation, Proposal, Signal


@dataclass(frozen=True, slots=True)
class ServiceRate:
    """What one replica completes per second at its limit, and how that was known."""

    per_replica: float
    how: str


@dataclass(frozen=True, slots=True)
class Backlog:
    """What the queue signal remembers between refreshes: the queue, and whether it had outrun the
    Ready replicas (the safety net's alarm, module docstring)."""

    waiting: float | None = None
    alarmed: bool = False


def watch(
    state: Backlog, obs: Observation, demand: Demand, objective_s: float, budget: float
) -> tuple[Backlog, str | None]:
    """``state`` after ``obs``, and why the backlog outran the Ready replicas at this refresh and the
    previous one (which arms the safety net), or None."""
    alarm = backlog_alarm(obs, demand, objective_s, budget)
    armed = alarm if state.alarmed else None
    return Backlog(obs.queue_waiting, alarm is not None), armed


def drain_per_s(
    obs: Observation,
    capacity: Capacity,
    demand: Demand,
    previous_waiting: float | None,
    lead_s: float,
    role: Role = "both",
) -> float | None:
    """Requests/s beyond the arrivals that drain, within one more lead, what waited at this refresh
    and the previous one and the Ready replicas do not clear before a replica ordered now serves
    (``left / lead``, module docstring): the backlog the load signal sizes in its one proposal.
    None where no service rate is known (the queue signal then counts the backlog in replicas of
    ``targetQueuePerReplica``)."""
    waiting, ready, served = obs.queue_waiting, obs.ready_replicas, demand.served_per_s
    if waiting is None or served is None or ready is None or lead_s <= 0:
        return None
    rate = service_rate(capacity, demand, obs, role)
    if rate is None:
        return None
    if not waiting:
        return 0.0
    # A backlog one refresh saw is a spike: what waited at the previous refresh too counts (all of it
    # at a target's first refresh, which has no previous one: a restart warmed from history has).
    persisted = waiting if previous_waiting is None else min(waiting, previous_waiting)
    left = persisted + (served - ready * rate.per_replica) * lead_s
    return max(0.0, left) / lead_s


def service_rate(
    capacity: Capacity, demand: Demand, obs: Observation, role: Role = "both", measured_floor: bool = True
) -> ServiceRate | None:
    """``mu`` of the module docstring: from the capacities (never below what each Ready replica is
    seen completing now, unless ``measured_floor`` is off), else from a saturated fleet, else None. A
    prefill or decode pool (``role``) completes at its own resource's rate only."""
    ready, waiting, served = obs.ready_replicas, obs.queue_waiting, demand.served_per_s
    rates: list[tuple[float, str]] = []
    prompt, hold = demand.prompt_tokens_per_request, demand.time_in_service_s
    if capacity.prefill_tokens_per_s and prompt and role != "decode":
        rates.append((capacity.prefill_tokens_per_s / prompt, "prefill"))
    if capacity.slots and hold and role != "prefill":
        rates.append((capacity.slots / hold, "slots"))
    if rates:
        rate, resource = min(rates)
        if measured_floor and ready and served and served / ready > rate:
            rate, resource = served / ready, "as served now"
        return ServiceRate(rate, f"{rate:.2f}/s per replica ({resource})")
    if measured_floor and ready and waiting is not None and waiting >= ready and served:
        return ServiceRate(served / ready, f"{served / ready:.2f}/s per replica (served while saturated)")
    return None


def backlog_alarm(obs: Observation, demand: Demand, objective_s: float, budget: float) -> str | None:
    """Why the backlog at this refresh outruns the Ready replicas (the safety net's condition, module
    docstring), or None. ``budget``: the share of first tokens the objective lets be late."""
    waiting, ready, served = obs.queue_waiting, obs.ready_replicas, demand.served_per_s
    if waiting is None or not ready or not served or waiting < ready:
        return None
    if waiting >= served * objective_s:
        return f"{waiting:g} waiting, more than the Ready serve in {objective_s:g}s ({served:.2f}/s)"
    arrivals = demand.arrivals_per_s
    if arrivals is not None and arrivals > served:
        return f"the queue grows ({arrivals:.2f} arrive/s, {served:.2f} served)"
    late = obs.ttft_over_objective
    if late is not None and late > budget:
        return f"{late:.2%} of first tokens over the objective (budget {budget:.2%})"
    return None


class Net(NamedTuple):
    """The safety net's answer: the replicas, the backlog left after the lead, and how."""

    replicas: int
    left: float
    how: str


def safety_net(obs: Observation, demand: Demand, lead_s: float) -> Net | None:
    """The replicas the observed throughput per Ready replica says drain the backlog within one more
    lead (module docstring), and how; None without a Ready replica serving."""
    waiting, ready, served = obs.queue_waiting, obs.ready_replicas, demand.served_per_s
    if waiting is None or not ready or not served or lead_s <= 0:
        return None
    seen = served / ready
    arrivals = max(served, demand.arrivals_per_s or served)
    left = waiting + (arrivals - served) * lead_s
    replicas = ceil_replicas((arrivals + left / lead_s) / seen)
    return Net(
        replicas, left, f"{left:.0f} left after {lead_s:g}s at the {seen:.2f}/s each Ready replica serves"
    )


def with_safety_net(
    found: Proposal, obs: Observation, demand: Demand, lead_s: float, alarm: str | None
) -> Proposal:
    """``found``, or the safety net's larger answer where ``alarm`` (why the backlog has outrun the
    Ready replicas at this refresh and the previous one, ``backlog_alarm``) arms it."""
    net = safety_net(obs, demand, lead_s) if alarm is not None else None
    if net is None or (found.replicas is not None and found.replicas >= net[0]):
        return found
    replicas, left, how = net
    return Proposal(
        Signal.QUEUE,
        replicas,
        f"safety net: {alarm}; {how}",
        {Input.QUEUE_WAITING: obs.queue_waiting or 0.0, "queue_left": left},
    )


def propose(
    obs: Observation,
    demand: Demand,
    capacity: Capacity,
    lead_s: float,
    target_per_replica: float,
    previous_waiting: float | None,
    role: Role = "both",
) -> Proposal:
    """The backlog's proposal from the service rate (module docstring); ``role``: the pool's
    resource (``service_rate``). The safety net is applied on top (``with_safety_net``)."""
    waiting = obs.queue_waiting
    if waiting is None:
        return Proposal(
            Signal.QUEUE, None, f"queue depth unknown ({obs.missing.get(Input.QUEUE_WAITING, 'no data')})"
        )
    rate = service_rate(capacity, demand, obs, role)
    served = demand.served_per_s
    if rate is None or served is None or obs.ready_replicas is None:
        # With no Ready replica nothing serves a spike: what waits is the backlog at once.
        fresh = previous_waiting is None or obs.ready_replicas == 0
        persisted = waiting if fresh or previous_waiting is None else min(waiting, previous_waiting)
        replicas = ceil_replicas(persisted / target_per_replica)
        return _backlog(
            replicas,
            f"{waiting:g} waiting, {persisted:g} of it also at the previous refresh, at"
            f" {target_per_replica:g} per replica (no service rate known)",
            waiting,
            persisted,
        )
    mu = rate.per_replica
    left = max(0.0, waiting + (served - obs.ready_replicas * mu) * lead_s)
    if left <= 0:
        return _backlog(
            0,
            f"{waiting:g} waiting, cleared by the {obs.ready_replicas} Ready before a new replica could"
            f" serve ({served:.2f} served/s, {rate.how})",
            waiting,
            0.0,
        )
    replicas = max(1, ceil_replicas((served + left / lead_s) / mu))
    return _backlog(
        replicas,
        f"{waiting:g} waiting, {left:.0f} left after {lead_s:g}s with {obs.ready_replicas} Ready;"
        f" {served:.2f} served/s, {rate.how}",
        waiting,
        left,
    )


def _backlog(replicas: int, why: str, waiting: float, left: float) -> Proposal:
    """The queue signal's proposal, with the two figures it was sized from: what waits now and what
    is left of it after the lead."""
    return Proposal(Signal.QUEUE, replicas, why, {Input.QUEUE_WAITING: waiting, "queue_left": left})
