"""Queueing estimates: the share of first tokens a fleet of N replicas would deliver late. Pure.

The decider sizes each resource of a replica (``scaler.decider.signals.load``) with the same
question: at the forecast load, how many replicas keep the share of requests whose first
token misses ``ttftObjectiveSeconds`` within the objective's budget? Two resources queue:

* **batch slots**: a replica runs at most ``S`` sequences at once (vLLM's ``max_num_seqs``,
  or as many as its KV cache holds); a request holds one from admission to its last token,
  ``T`` seconds on average. A request that finds every slot busy waits for one to free.
* **prefill**: a replica computes the prompts of admitted requests at ``P`` tokens/s; a
  request's first token comes after its own prompt and those before it.

Both are read as an M/M/c queue, Erlang's delay model, with ``c`` servers pooled across the
fleet (routers that send each request to the least loaded replica, as llm-d's endpoint picker,
Dynamo and the replay do, come close to pooling; plain round-robin does worse):

    a            = offered load in servers (Erlangs): arrivals/s x mean holding time
    C(c, a)      = Erlang C, the probability that an arrival waits (a < c)
    P(wait > t)  = C(c, a) x exp(-(c - a) x t / h)           h: the mean holding time

and a request misses the objective when its wait exceeds the time the objective leaves after
its own prefill, ``t = objective - prompt / P`` (at least 0). The fewest replicas whose
``P(wait > t)`` is within the budget is the resource's need.

*Example* (batch slots): 60 sequences in service on average (a = 60), each held 12 s,
24 slots per replica, objective 2 s of which 0.25 s is the prompt's prefill, budget 0.25%:
3 replicas (72 slots) give ``C = 0.090``, ``P(wait > 1.75 s) = 0.090 x exp(-12 x 1.75 / 12) = 1.6%``;
4 replicas (96 slots) give ``C = 0.00001`` and ``0.00001 x exp(-36 x 1.75 / 12)``, next to
nothing: 4. The fleet runs its slots at 62%: with long holding times every wait is long, so
the slots need room; a pool of 1,000 Erlangs meets the same budget on 1,040 servers (96%), as
Erlang's square-root rule says.
"""

from __future__ import annotations

import functools
import math
from statistics import NormalDist

from scaler.decider.params import DEFAULT

_STANDARD_NORMAL = NormalDist()  # phi and Phi of Halfin-Whitt's formula
# Erlang C answers kept (a float pair each, about 100 bytes): a few decisions' worth for every
# target a process serves; what a decision asks again is within its own few dozen calls.
ERLANG_C_KEPT = 4096


def erlang_c(servers: float, load: float, exact: int = DEFAULT.exact_servers) -> float:
    """Erlang C: the probability an arrival waits, ``servers`` pooled servers, ``load`` Erlangs.

    1 when ``load >= servers`` (the queue grows without bound). Fractional servers are
    rounded down; above ``exact`` servers the Halfin-Whitt approximation answers
    (``DeciderParams.exact_servers``). *Example*: ``erlang_c(3, 2) = 0.444``.
    """
    c = math.floor(servers)
    if load <= 0:
        return 0.0
    if c < 1 or load >= c:
        return 1.0
    if c > exact:
        return _halfin_whitt(c, load)
    return _erlang_c(c, load)


@functools.lru_cache(maxsize=ERLANG_C_KEPT)
def _erlang_c(c: int, load: float) -> float:
    """Erlang C for ``c`` servers (``1 <= c``, ``load < c``) by Erlang B's recurrence, kept: a decision
    asks the same (servers, load) of several quantiles and resources (about half its calls repeat
    one), and the loop is O(c)."""
    b = 1.0  # Erlang B, by the stable recurrence B(k) = a B(k-1) / (k + a B(k-1))
    for k in range(1, c + 1):
        b = load * b / (k + load * b)
    return c * b / (c - load * (1.0 - b))


def _halfin_whitt(c: int, load: float) -> float:
    """Halfin-Whitt: ``1 / (1 + beta Phi(beta) / phi(beta))``, ``beta = (c - a) / sqrt(a)``; 0 where
    the normal density underflows (far more servers than load: nobody waits)."""
    beta = (c - load) / math.sqrt(load)
    phi = _STANDARD_NORMAL.pdf(beta)
    if phi <= 0.0:
        return 0.0
    big_phi = _STANDARD_NORMAL.cdf(beta)
    return 1.0 / (1.0 + beta * big_phi / phi)


def late_share(
    servers: float, load: float, hold_s: float, allowance_s: float, exact: int = DEFAULT.exact_servers
) -> float:
    """P(wait > allowance) in an M/M/c queue: the share of arrivals that wait longer than ``allowance_s``.

    ``hold_s`` is the mean time a server is held. *Example*: ``late_share(72, 60, 12, 1.75)``
    = ``erlang_c(72, 60) x exp(-12 x 1.75 / 12)`` = ``0.0895 x 0.174`` = 1.56%.
    """
    if load <= 0:
        return 0.0
    c = math.floor(servers)
    if load >= c:
        return 1.0
    wait = erlang_c(c, load, exact)
    if hold_s <= 0:
        return wait if allowance_s <= 0 else 0.0
    return wait * math.exp(-(c - load) * max(0.0, allowance_s) / hold_s)
