"""Load signal: the fewest replicas whose expected share of late first tokens is within budget.

A replica has two resources a request queues for (``scaler.decider.queueing``): a batch slot, held
from admission to its last token, and the prefill that computes its prompt. The demand
(``scaler.decider.demand``) is forecast one cold start ahead (``scaler.decider.forecast``) as a point, and
the forecaster's own past errors say how far above that point the demand has landed; what one
replica holds is measured (``scaler.decider.capacity``). For ``N`` replicas the share of first tokens
expected late is

    late(N) = sum over the resources r, and over the past errors e (weighted 1 + e: the
              requests that demand brings), of P_r(wait > allowance | N, load_r x (1 + e)),
              over the sum of the weights

    prefill  N servers,     load = prompt tokens/s / P,   each held prompt / P
    slots    N x S servers, load = concurrency,           each held the time in service
    allowance = ttftObjectiveSeconds - prompt / P           the wait the objective leaves

    load     = fewest N with late(N) <= 1 - ttftObjectivePercentile / 100

Both resources are read as one queue over the fleet (M/M/c) where the dispatch pools the
replicas (a router that sends a request to the least loaded replica: llm-d's endpoint picker,
Dynamo's); where it is measured not to (``scaler.decider.capacity.dispatch``: a Kubernetes Service spreads
connections at random), as ``N`` queues of one replica's servers, each with ``1/N`` of the load.
The capacities are the measured ones times the scale the objective's own measurement calibrates
(``scaler.decider.calibration``): the model gives the shape, the measurement the level. So the
headroom is neither a
utilisation target nor a margin added to one: a fleet whose forecast has missed by 40% now and
then needs room for that, one whose forecast has been right does not, and a small fleet of
slow-decoding replicas needs more room than a large fleet of fast ones (a request that holds a
slot for a minute makes the next one wait as long; Erlang's square-root rule). With no error
checked yet, the demand seen is the forecast.

Two refinements of the slots, each where its reading exists. Where the engines export the
inter-token latency and it grows with the batch (``itl = a + b x``, ``x`` the sequences a replica
decodes; ``scaler.decider.capacity.itl``), a request's time in service grows with the batch it
shares: ``h(x) = ttft + D (a + b x)``, ``D`` the tokens it decodes (the decode part of its time in
service over the latency measured). Fewer replicas mean larger batches and longer holds, and near
what a replica's batch can decode at all the batch swells far beyond its mean: the slots are then
not Erlang's ``c`` servers but that chain (``Batch``, ``scaler.decider.queueing.batch_wait``).
Without it, where prefill slows decoding (``beta`` of ``scaler.decider.capacity``), the time in
service stretches as fewer replicas share the prefill: ``decode x (1 - beta f_now) / (1 - beta
f(N))`` (``Stretch``).

The answer comes down only as far as every answer of the last lead agrees (``LoadState.held``): a
replica released now is back only after one.

The resource that made the last replica necessary is named as binding; one whose capacity or
demand is unknown is left out and says why; with neither known the signal abstains.

*Example* (objective 2 s at p99.5, a budget of 0.5%): 15 requests/s of 1,200 prompt tokens are
forecast, each in service 12 s (180 sequences), against 5,000 prompt tokens/s and 24 slots per
replica, and the last hour's errors were under 5% but for ten checks of +30%. Prefill is 3.6
Erlangs of 0.24 s: 6 replicas leave it no late token to speak of. Slots: 9 replicas (216 slots)
meet the 180 sequences of most checks, but not the ten at 234: 4% of the weight, all of it late,
over budget; 10 replicas (240 slots) are late 0.4% in all: 10, slots binding.

**Prefill and decode pools** (``role``, ``scaler.roles``). A disaggregated deployment runs each
resource in its own pool, each scaled by its own ScaledObject from the same arrivals: each pool's
demand is read from its own series, and its target is sized on its own resource only.

* ``role: prefill`` sizes the prefill resource alone, exactly as above: the prompt work on the
  pool's prefill rate, the wait it allows ``ttftObjectiveSeconds - prompt / P``. The pool's queue
  is the prompts waiting (the queue signal reads it, at ``P / prompt`` per replica).
* ``role: decode`` sizes the slots alone. The decode pool computes no prompt, so a request holds
  its slot for its decode alone: generated tokens per request over what one sequence decodes per
  second, which Little's law reads from the pool's own series as ``running / served``; prefill
  does not slow that decode, so nothing is stretched. A request that waits for a decode slot has
  its first token stalled (and, in a stream, every token after): the wait it may have is what is
  left of the objective after its prefill. The decode pool's mean TTFT while nobody waits for a
  slot is that prefill (the prefill pool's queue and compute, the KV transfer) and is read as
  ``prompt / P`` exactly as the prefill rate is measured (``scaler.decider.capacity``); while it is not
  known the allowance is 0: every wait counts as late. The queue signal reads the pool's waiting,
  at ``S / time in service`` per replica.
* ``both`` is every replica doing both: the sum above, unchanged.

*Example* (decode pool, the same objective and budget): 1.3 requests/s of 1,500 generated tokens
at 25 tokens/s a sequence hold a slot 60 s each: 78 Erlangs. The pool's mean TTFT with nobody
waiting for a slot is 0.6 s, so a request may wait 1.4 s for one. With 24 slots a replica, 4
replicas (96 slots) leave 2.1% of first tokens late (3.1% if the allowance were unknown, 0), 5
leave 0.0002%: 5, slots binding. A wait of 1.4 s is short beside a hold of 60 s, so the decode
pool is sized almost by Erlang's delay probability alone: a slot frees when a sequence ends.
The prefill pool of the same traffic, 1,300-token prompts at 5,000 tokens/s a replica, is 0.34
Erlangs of 0.26 s each allowed 1.74 s: 1 replica leaves 0.40% late, within the budget.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from scaler.decider.demand import Demand
from scaler.decider.forecast import Forecast
from scaler.decider.params import DEFAULT, DeciderParams
from scaler.decider.queueing import batch_late_share, batch_wait, erlang_c, late_share
from scaler.decider.signals.queue import Net
from scaler.decider.spec import DeciderSpec
from scaler.decider.stages import ALL, Stages
from scaler.decider.units import FLOAT_SLACK, PERCENT
from scaler.model import Capacity, Observation, Proposal, Signal


@dataclass(frozen=True, slots=True)
class Stretch:
    """How the time in service stretches with the fleet where prefill slows decoding
    (``scaler.decider.capacity``).

    With ``N`` replicas the prefill keeps each ``f(N) = prefill / N`` busy, and the decode part
    of the time in service is ``decode x (1 - beta f_now) / (1 - beta f(N))``."""

    decode_s: float  # the decode part of the time in service now
    beta: float
    busy_now: float  # the share prefill keeps a replica busy now
    prefill: float  # prefill load at the forecast point, in replicas

    def factor(self, replicas: int, hold_s: float, error: float = 0.0) -> float:
        """The time in service with ``replicas`` at the demand times ``1 + error``, over the time in
        service now; infinite where prefill would leave decoding no time at all."""
        left = 1.0 - self.beta * self.prefill * (1.0 + error) / replicas
        if left <= 0:
            return math.inf
        stretched = self.decode_s * (1.0 - self.beta * self.busy_now) / left
        return (hold_s - self.decode_s + stretched) / hold_s


@dataclass(frozen=True, slots=True)
class Batch:
    """A replica's batch whose time in service grows with it (module docstring): a request holds its
    slot ``base_s + per_sequence_s x k`` seconds with ``k`` sequences decoding on its replica.

    ``base_s = ttft + D a`` and ``per_sequence_s = D b``, ``D = (hold - ttft) / itl`` the tokens a
    request decodes. *Example*: 60 s in service, 0.5 s of it to the first token, at 35 ms a token
    measured, on the line ``26 ms + 0.62 ms x``: ``D = 1,700`` tokens, a slot held ``44.7 s + 1.05 s``
    for every sequence decoding beside it on its replica."""

    base_s: float
    per_sequence_s: float

    def chain(
        self, per_replica: float, replicas: int, arrivals_per_s: float, pooled: bool
    ) -> tuple[float, float, float, float]:
        """The chain's ``(slots, arrivals/s, base_s, per_sequence_s)`` for ``replicas`` at
        ``arrivals_per_s`` (``scaler.decider.queueing.batch_wait``): one chain over every replica's
        slots, each replica holding ``1/N`` of the sequences (pooled), or each replica its own with
        ``1/N`` of the arrivals."""
        if pooled:
            return replicas * per_replica, arrivals_per_s, self.base_s, self.per_sequence_s / replicas
        return per_replica, arrivals_per_s / replicas, self.base_s, self.per_sequence_s


@dataclass(frozen=True, slots=True)
class Resource:
    """One resource of a replica at the planned demand: servers per replica, load, times."""

    name: str  # "prefill" or "slots"
    per_replica: float  # servers one replica holds
    load: float  # Erlangs at the forecast point (no error)
    load_now: float  # Erlangs at the demand's level now
    hold_s: float  # mean time a request holds a server
    allowance_s: float  # the wait the objective leaves a request
    stretch: Stretch | None = None  # how the hold time (and so the load) changes with the fleet
    pooled: bool = True  # one queue over the fleet's servers; False: each replica its own (dispatch)
    batch: Batch | None = None  # the slots of a batch that slows as it grows (module docstring)

    def late(
        self, replicas: int, errors: Sequence[tuple[float, int]], weight: float, stop: float, exact: int
    ) -> float:
        """The expected share of late first tokens with ``replicas``: the module docstring's sum
        over ``errors`` (each an error and how many checks had it, largest first), over their
        total ``weight``. The sum stops once what is left of it cannot exceed ``stop``
        (``DeciderParams.expectation_tolerance`` of the budget); ``exact`` is
        ``DeciderParams.exact_servers``."""
        if replicas < 1:
            return 0.0 if self.load <= 0 else 1.0
        # Pooled: one queue of every replica's servers. Not pooled: each replica a queue of its own
        # servers with its share of the load, every replica alike (scaler.decider.capacity.dispatch).
        servers = replicas * self.per_replica if self.pooled else self.per_replica
        share_of = 1.0 if self.pooled else 1.0 / replicas
        total, left = 0.0, weight
        for e, count in errors:
            share = self._late_at(replicas, servers, share_of, e, exact)
            total += count * (1.0 + e) * share
            left -= count * (1.0 + e)
            if share * left < stop * weight:
                break
        return total / weight

    def _late_at(self, replicas: int, servers: float, share_of: float, error: float, exact: int) -> float:
        """P(wait > allowance) with ``replicas`` at the planned load times ``1 + error``."""
        if self.batch is not None:
            arrivals = self.load * (1.0 + error) / self.hold_s
            chain = self.batch.chain(self.per_replica, replicas, arrivals, self.pooled)
            return batch_late_share(*chain, self.allowance_s)
        hold, scale = self.hold_s, 1.0
        if self.stretch is not None:  # the load is arrivals times the (stretched) hold
            scale = self.stretch.factor(replicas, self.hold_s, error)
            hold = hold * scale
        if not math.isfinite(scale):
            return 1.0
        return late_share(
            servers, self.load * scale * (1.0 + error) * share_of, hold, self.allowance_s, exact
        )

    def mean_wait(self, replicas: int, exact: int) -> float:
        """The mean wait for this resource with ``replicas`` at the demand's level now, as ``_late_at``
        reads it: ``P(wait) / decay`` (a wait's tail decays at ``decay`` a second), 0 where nobody
        waits, infinite where the queue grows."""
        waits, decay = self._waiting(replicas, exact, stretched=True)
        if waits <= 0:
            return 0.0
        return waits / decay if decay > 0 else math.inf

    def wait_quantile(self, replicas: int, quantile: float, exact: int) -> float:
        """The wait the model gives this resource's ``quantile`` of requests with ``replicas`` at the
        demand's level now: ``ln(P(wait) / (1 - q)) / decay``, Erlang's ``decay = (c - a) / h`` or the
        batch's (``Batch``); 0 where fewer than ``1 - q`` wait at all, infinite where the queue grows.
        The hold is not stretched with the fleet here (``mean_wait``'s is)."""
        waits, decay = self._waiting(replicas, exact, stretched=False)
        if waits <= 1.0 - quantile:
            return 0.0
        return math.log(waits / (1.0 - quantile)) / decay if decay > 0 else math.inf

    def _waiting(self, replicas: int, exact: int, stretched: bool) -> tuple[float, float]:
        """``(P(wait), decay)`` with ``replicas`` at the demand's level now: Erlang's (``decay = (c -
        a) / h``, the hold stretched with the fleet where ``stretched``) or the batch's chain's.
        ``(0, inf)`` where nobody waits, ``(1, 0)`` where the queue grows."""
        if replicas < 1:
            return (1.0, 0.0) if self.load_now > 0 else (0.0, math.inf)
        if self.batch is not None:
            arrivals = self.load_now / self.hold_s
            return batch_wait(*self.batch.chain(self.per_replica, replicas, arrivals, self.pooled))
        hold, scale = self.hold_s, 1.0
        if stretched and self.stretch is not None:
            scale = self.stretch.factor(replicas, self.hold_s)
            hold = hold * scale
        servers = replicas * self.per_replica if self.pooled else self.per_replica
        load = self.load_now * scale * (1.0 if self.pooled else 1.0 / replicas)
        c = math.floor(servers)
        if not math.isfinite(scale) or (load > 0 and load >= c):
            return 1.0, 0.0
        if load <= 0 or hold <= 0:
            return 0.0, math.inf
        return erlang_c(c, load, exact), (c - load) / hold

    def stable(self) -> int:
        """The fewest replicas with more servers than the forecast's load."""
        return max(1, math.floor(self.load / self.per_replica + FLOAT_SLACK) + 1) if self.load > 0 else 0


@dataclass(frozen=True, slots=True)
class ResourceNeed:
    """One resource at the load signal's answer: its load now and planned, its late share there."""

    resource: str
    replicas: int
    load_now: float  # replicas of capacity the demand takes now, no headroom
    load_planned: float  # at the forecast point
    late: float  # expected share late at the load signal's proposal

    def describe(self) -> str:
        """The need in words."""
        late = f"{self.late:.2%} late"
        return f"{self.resource} {self.load_planned:.2f} replicas of capacity forecast, {late}"


@dataclass(frozen=True, slots=True)
class LoadNeed:
    """The load signal's answer: the replicas for the budget, each resource's need, and why."""

    replicas: int
    late: float  # expected share of late first tokens at ``replicas``
    needs: tuple[ResourceNeed, ...]
    unknown: tuple[str, ...]  # resources left out, each with why
    margin: float  # the forecast's error quantile at the objective's percentile, for display
    checks: int  # forecast errors the expectation ran over
    binding_resource: str = ""  # the resource that made the last replica necessary
    held_s: float = 0.0  # how long ago the binding resource's planned demand was planned
    sized: int | None = None  # what this refresh sized, where a larger answer of the last lead holds
    sized_s: float = 0.0  # how long ago the answer held was sized
    net: str = ""  # why the safety net raised it, if it did (scaler.decider.signals.queue)
    backlog: bool = False  # the backlog's drain is in it (a service rate was known to size it with)

    @property
    def binding(self) -> ResourceNeed | None:
        """The resource that made the last replica necessary, or None when none could be sized."""
        return next((n for n in self.needs if n.resource == self.binding_resource), None)

    @property
    def busy_now(self) -> float:
        """Replicas of capacity the demand takes now, in the resource that takes most."""
        return max((n.load_now for n in self.needs), default=0.0)

    @property
    def busy_planned(self) -> float:
        """Replicas of capacity at the forecast point, in the resource that takes most."""
        return max((n.load_planned for n in self.needs), default=0.0)


@dataclass(frozen=True)
class Sizing:
    """What the load signal sizes the fleet for: the spec, a replica's capacity, the demand
    measured, its forecasts (prompt tokens/s and requests in service; None where not forecast)
    and the observation now, which today's prefill load is read from."""

    spec: DeciderSpec
    capacity: Capacity
    demand: Demand
    prompt: Forecast | None
    concurrency: Forecast | None
    now: Observation | None = None


def resources(
    sizing: Sizing, why: str, stages: Stages = ALL
) -> tuple[list[tuple[Resource, Forecast]], list[str]]:
    """The resources the demand can be sized on, each with its forecast, and why any other is left
    out (``why``: why the demand is unknown, where it is)."""
    spec, capacity, demand = sizing.spec, sizing.capacity, sizing.demand
    prompt, concurrency, now = sizing.prompt, sizing.concurrency, sizing.now
    objective, role = spec.ttft_objective_seconds, spec.role
    out: list[tuple[Resource, Forecast]] = []
    unknown: list[str] = []
    pooled = capacity.pooled is not False  # until measured, one queue over the fleet
    per_request, p = demand.prompt_tokens_per_request, capacity.prefill_tokens_per_s
    prefill_s = per_request / p if p and per_request else 0.0
    if role == "decode":
        unknown.append("prefill: the prefill pool's own (role: decode)")
    elif p is None:
        unknown.append(
            "prefill: capacity unknown (promptTokensPerSecondPerReplica unset, no TTFT mean measured yet)"
        )
    elif prompt is None:
        unknown.append(f"prefill: demand unknown ({why})")
    else:
        allowance = objective - prefill_s if prefill_s else 0.0
        resource = Resource(
            "prefill", 1.0, prompt.planned / p, prompt.level / p, prefill_s, allowance, None, pooled
        )
        out.append((resource, prompt))
    if role == "prefill" or not stages.size_slots:
        unknown.append(
            "slots: the decode pool's own (role: prefill)"
            if role == "prefill"
            else "slots: removed (Stages.size_slots)"
        )
    elif capacity.slots is None:
        unknown.append("slots: capacity unknown (nobody has waited and no KV cache was a quarter full yet)")
    elif concurrency is None:
        unknown.append(f"slots: demand unknown ({why})")
    else:
        hold = demand.time_in_service_s or 0.0
        allowance = objective - prefill_s if hold > 0 else 0.0
        if role == "decode" and not prefill_s:  # what prefill leaves of the objective is unknown
            allowance = 0.0
        # The slots the inter-token-latency objective allows, where one is set and learned.
        per = float(max(1, math.floor(min(capacity.slots, capacity.itl_slots or math.inf))))
        stretch, batch = None, _batch(capacity, now, hold) if stages.batch_slowdown else None
        beta = capacity.decode_slowdown
        # A decode pool computes no prompt, so prefill does not slow its decoding.
        both = role == "both"
        if (
            batch is None
            and both
            and beta
            and p
            and prompt is not None
            and now is not None
            and now.ready_replicas
            and hold > 0
        ):
            mean, rate = now.ttft_mean_seconds, now.prompt_tokens_per_s
            busy_now = rate / (now.ready_replicas * p) if rate is not None else 1.0
            # A fit that says decoding stops at today's prefill load is not one to stretch by.
            if mean is not None and hold > mean and beta * busy_now < 1.0:
                stretch = Stretch(hold - mean, beta, busy_now, prompt.planned / p)
        slots = Resource(
            "slots", per, concurrency.planned, concurrency.level, hold, allowance, stretch, pooled, batch
        )
        out.append((slots, concurrency))
    return out, unknown


def _batch(capacity: Capacity, now: Observation | None, hold_s: float) -> Batch | None:
    """The slots' ``Batch`` (module docstring), or None: no latency line that grows with the batch, no
    latency measured now, or no time in service beyond the first token."""
    a, b = capacity.itl_base_s, capacity.itl_per_sequence_s
    if now is None or a is None or b is None or b <= 0 or hold_s <= 0:
        return None
    itl = now.itl_mean_seconds
    if not itl:
        return None
    first = min(hold_s, now.ttft_mean_seconds or 0.0)
    tokens = (hold_s - first) / itl
    if tokens <= 0:
        return None
    return Batch(first + tokens * a, tokens * b)


@dataclass(frozen=True, slots=True)
class LoadState:
    """What the load signal remembers: its last answer, where the next search starts, and what it
    sized within the last lead, which its answer holds (``held``)."""

    sized: tuple[tuple[float, int], ...] = ()  # (when, replicas sized) within the last lead, oldest first

    @property
    def hint(self) -> int | None:
        """The last answer sized, where the next search starts (None before the first)."""
        return self.sized[-1][1] if self.sized else None

    def held(self, t: float, replicas: int, lead_s: float) -> tuple[LoadState, int, float]:
        """The state after sizing ``replicas`` at ``t``, the replicas to ask (the most sized within
        the last ``lead_s``, as the plan is the largest demand planned within it:
        ``scaler.decider.forecast``) and how long ago those were sized.

        A replica released now cannot be Ready again sooner than one lead, so the fleet comes down
        only as far as every answer of the last lead agrees: a dip the next refreshes take back (a
        forecast error checked, the scale calibrated, a capacity read) releases nothing. Up, the
        answer is asked at once. *Example* (lead 180 s): sized 7 at 0 s, then 6 at every refresh
        from 15 s: asks 7 until 180 s (sized 180 s ago), 6 from 195 s.
        """
        sized = (*(s for s in self.sized if s[0] >= t - lead_s), (t, replicas))
        when, most = max(sized, key=lambda s: (s[1], s[0]))  # the latest of the largest
        return LoadState(sized), most, t - when


def plus(forecast: Forecast | None, extra: float) -> Forecast | None:
    """``forecast`` with ``extra`` added to what it plans (the backlog's drain)."""
    if forecast is None or extra <= 0:
        return forecast
    return replace(forecast, planned=forecast.planned + extra)


def with_net(load: LoadNeed, net: Net | None, alarm: str | None) -> LoadNeed:
    """``load`` at least what the safety net asks (``scaler.decider.signals.queue``), where it is armed."""
    if net is None or alarm is None or net.replicas <= load.replicas:
        return load
    return replace(load, replicas=net.replicas, net=f"safety net: {alarm}; {net.how}")


def whole_percent(errors: Sequence[float]) -> tuple[tuple[float, int], ...]:
    """The errors rounded up to a whole percent (the safe side), each with how many checks had it,
    largest first; ``((0.0, 1),)`` with none. *Example*: ``(0.304, 0.3, 0.0)`` -> ``((0.31, 1),
    (0.3, 1), (0.0, 1))``."""
    counted = Counter([math.ceil(e * PERCENT - FLOAT_SLACK) / PERCENT for e in errors])
    return tuple(sorted(counted.items(), reverse=True)) or ((0.0, 1),)


def need(
    spec: DeciderSpec,
    capacity: Capacity,
    demand: Demand,
    prompt: Forecast | None,
    concurrency: Forecast | None,
    why: str,
    hint: int | None = None,
    now: Observation | None = None,
    params: DeciderParams = DEFAULT,
    stages: Stages = ALL,
) -> LoadNeed | None:
    """The load signal's need (module docstring), or None when no demand is forecast at all.

    ``hint``, the last answer, only shortens the search; ``now`` is the observation the stretch and
    the batch read today's prefill load and inter-token latency from."""
    if prompt is None and concurrency is None:
        return None
    found, unknown = resources(Sizing(spec, capacity, demand, prompt, concurrency, now), why, stages)
    if not found:
        return LoadNeed(0, 0.0, (), tuple(unknown), 0.0, 0)
    budget = spec.late_budget
    limit = max(spec.max_replicas, *(r.stable() for r, _ in found)) + 1
    errors = {r.name: whole_percent(f.errors) for r, f in found}
    weights = {name: sum(n * (1.0 + e) for e, n in errs) for name, errs in errors.items()}
    stop = params.expectation_tolerance * budget
    memo: dict[tuple[str, int], float] = {}

    def late(r: Resource, n: int) -> float:
        key = (r.name, n)
        if key not in memo:
            if stages.queueing_headroom:
                memo[key] = r.late(n, errors[r.name], weights[r.name], stop, params.exact_servers)
            else:  # ablation: just above the load at the largest error, no queueing
                memo[key] = 0.0 if n * r.per_replica > r.load * (1.0 + errors[r.name][0][0]) else 1.0
        return memo[key]

    def total(n: int) -> float:
        return sum(late(r, n) for r in rs)

    rs = [r for r, _ in found]
    lowest = max(r.stable() for r in rs)
    # The late share falls as replicas are added: walk from the hint (the last answer) to the
    # fewest within the budget. The hint only shortens the walk; the answer does not depend on it.
    n = min(max(hint or lowest, lowest), limit)
    if total(n) <= budget:
        while n > lowest and total(n - 1) <= budget:
            n -= 1
    else:
        while n < limit and total(n + 1) > budget:
            n += 1
        n = min(n + 1, limit)
    replicas = n
    shares = {r.name: late(r, replicas) for r in rs}
    before = {r.name: late(r, replicas - 1) if replicas > lowest else 0.0 for r in rs}
    needs = tuple(
        ResourceNeed(r.name, replicas, r.load_now / r.per_replica, r.load / r.per_replica, shares[r.name])
        for r in rs
    )
    # Binding: the resource that made the last replica necessary (its late share one replica
    # fewer), or, at the fewest that hold the load at all, the one whose load needs them.
    if replicas > lowest:
        binding = max(rs, key=lambda r: before[r.name]).name
    else:
        binding = max(rs, key=lambda r: r.stable()).name
    margin = max(f.margin for _, f in found)
    checks = min(f.checks for _, f in found)
    held = next(f.held_s for r, f in found if r.name == binding)
    return LoadNeed(
        replicas, sum(n.late for n in needs), needs, tuple(unknown), margin, checks, binding, held
    )


@dataclass(frozen=True, slots=True)
class ModelNow:
    """The model at the demand's level now (no forecast error), for a fleet of any size: what the
    calibration (``scaler.decider.calibration``) compares the measured late share, queue time and
    TTFT tail with. ``prefill_s`` is a request's own prefill (its prompt over the prefill rate)."""

    resources: tuple[Resource, ...]
    prefill_s: float

    def late(self, replicas: int, exact: int) -> float:
        """The share of first tokens expected late with ``replicas``: the resources' late shares."""
        current = (replace(r, load=r.load_now) for r in self.resources)
        return min(1.0, sum(r.late(replicas, ((0.0, 1),), 1.0, 0.0, exact) for r in current))

    def mean_wait(self, replicas: int, exact: int) -> float:
        """The mean wait a request is given with ``replicas``: the sum of its resources'
        (``Resource.mean_wait``)."""
        return math.fsum(r.mean_wait(replicas, exact) for r in self.resources)

    def ttft_quantile(self, replicas: int, quantile: float, exact: int) -> float:
        """The TTFT of the ``quantile`` of first tokens with ``replicas``: the request's own prefill
        and the longest of the resources' waits at that quantile."""
        return self.prefill_s + max(r.wait_quantile(replicas, quantile, exact) for r in self.resources)


def model_now(sizing: Sizing, stages: Stages = ALL) -> ModelNow | None:
    """The model of the resources the demand is sized on (``resources``) at its level now, or None
    where no resource has a forecast to size on."""
    if sizing.prompt is None and sizing.concurrency is None:
        return None
    found, _ = resources(sizing, "", stages)
    if not found:
        return None
    p, per_request = sizing.capacity.prefill_tokens_per_s, sizing.demand.prompt_tokens_per_request
    prefill_s = per_request / p if p and per_request else 0.0
    return ModelNow(tuple(r for r, _ in found), prefill_s)


def propose(load: LoadNeed | None, why_not: str) -> Proposal:
    """The load signal's proposal: the replicas for the budget, or why it abstains."""
    if load is None:
        return Proposal(Signal.LOAD, None, why_not)
    binding = load.binding
    if binding is None:
        return Proposal(Signal.LOAD, None, "; ".join(load.unknown) or why_not)
    parts = [n.describe() for n in load.needs] + list(load.unknown)
    reason = (
        f"{binding.resource} binds: {load.replicas} for {load.late:.2%} late expected"
        f" (forecast margin {load.margin:.0%} over {load.checks} checks); {'; '.join(parts)}"
    )
    if load.held_s > 0:
        reason += f"; the demand planned {load.held_s:.0f}s ago is held for one cold start"
    if load.sized is not None:
        reason += (
            f"; {load.replicas} sized {load.sized_s:.0f}s ago are held for one cold start"
            f" (sized now: {load.sized})"
        )
    if load.net:
        reason = f"{load.net}; the model sized {reason}"
    return Proposal(
        Signal.LOAD,
        load.replicas,
        reason,
        {"busy_replicas_now": load.busy_now, "busy_replicas_planned": load.busy_planned},
    )
