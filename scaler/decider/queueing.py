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


# The incomplete beta function's continued fraction (modified Lentz): the relative change of a term
# at which it has converged (double precision has about 16 digits; 12 leave room for rounding).
BETA_FRACTION_TOLERANCE = 1e-12
# The least magnitude a partial numerator or denominator of that fraction is given, so that none
# divides by zero (Lentz's "tiny"; near the smallest normal double, 2.2e-308).
BETA_FRACTION_FLOOR = 1e-300
# Terms of that continued fraction at most: it converges in about sqrt(max(a, b)) of them, and a
# fleet's slots (b) are at most a few tens of thousands.
BETA_FRACTION_TERMS = 2000


def batch_wait(
    servers: float, arrivals_per_s: float, base_s: float, per_sequence_s: float
) -> tuple[float, float]:
    """The batch slots where each sequence's time in service grows with the sequences in service:
    ``(the probability an arrival waits for a slot, the rate in 1/s at which a wait's tail decays)``.

    With ``k`` sequences in service each holds its slot ``h(k) = base_s + per_sequence_s x k``
    seconds (a decode step serves the whole batch, so a larger batch decodes each sequence slower:
    the measured inter-token latency's line times the tokens a request decodes). Arrivals are
    Poisson at ``l`` a second; the sequences in service are a birth-death chain, up ``l``, down
    ``k / h(k)``, and its stationary law below the ``c`` slots is negative binomial,

        pi(k) ~ Gamma(k + r) / (Gamma(r) k!) x p^k       r = 1 + base / per_sequence,  p = l x per_sequence

    (``p >= 1``: more arrive than the largest batch can ever finish, and every arrival waits). With
    every slot busy the slots free at ``c / h(c)`` a second, so the queue beyond them is geometric
    with ratio ``rho = l h(c) / c``, and

        P(wait)        = pi(c) / (1 - rho) / (F(c - 1) + pi(c) / (1 - rho))      F: the law's CDF
        P(wait > t)    = P(wait) x exp(-(c / h(c) - l) x t)

    With ``per_sequence_s = 0`` this is Erlang's M/M/c (``erlang_c``), which is how it is computed
    there. *Example*: 1.5 requests/s, each 40 s in service alone and 0.5 s longer for every other
    sequence beside it: ``p = 0.75``, ``r = 81``, and the batch holds ``r p / (1 - p) = 243``
    sequences on average where one that did not slow would hold 60. On 300 slots 4.8% of arrivals
    wait (Erlang's 60 Erlangs on 300 servers: nobody); on 400, 0.0007%; on 120 the slots free
    slower than requests arrive (``rho = 1.25``) and every arrival waits.
    """
    c = math.floor(servers)
    if arrivals_per_s <= 0:
        return 0.0, math.inf
    if c < 1:
        return 1.0, 0.0
    hold_full = base_s + per_sequence_s * c
    decay = c / hold_full - arrivals_per_s if hold_full > 0 else math.inf
    if decay <= 0:
        return 1.0, 0.0
    if per_sequence_s <= 0:
        return erlang_c(c, arrivals_per_s * base_s), decay
    # Below 1 here: c / h(c) > l is c (1 - p) > l base_s, so a batch that frees slots faster than
    # requests arrive at its cap has p < 1 (and p >= 1 never frees them fast enough, whatever c).
    p = arrivals_per_s * per_sequence_s
    r = 1.0 + base_s / per_sequence_s
    log_at_cap = (
        math.lgamma(c + r) - math.lgamma(r) - math.lgamma(c + 1) + c * math.log(p) + r * math.log1p(-p)
    )
    queued = math.exp(log_at_cap) * c / hold_full / decay  # pi(c) / (1 - rho)
    below = _beta_regularized(r, float(c), 1.0 - p)  # F(c - 1) = I_{1-p}(r, c)
    total = below + queued
    return (queued / total if total > 0 else 1.0), decay


def batch_late_share(
    servers: float, arrivals_per_s: float, base_s: float, per_sequence_s: float, allowance_s: float
) -> float:
    """P(wait > allowance) for batch slots whose time in service grows with the batch (``batch_wait``).
    *Example*: ``batch_wait``'s 1.5 requests/s at 40 s + 0.5 s a sequence on 300 slots, 4.8% waiting:
    with 1 s of allowance ``0.048 x exp(-(300 / 190 - 1.5) x 1) = 4.5%`` wait longer."""
    wait, decay = batch_wait(servers, arrivals_per_s, base_s, per_sequence_s)
    if wait <= 0 or allowance_s <= 0:
        return wait
    return wait * math.exp(-decay * allowance_s) if math.isfinite(decay) else 0.0


def _beta_regularized(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function ``I_x(a, b)`` (``a, b > 0``, ``0 <= x <= 1``), by its
    continued fraction on the side where it converges fast (Numerical Recipes, 6.4). Written here
    rather than taken from SciPy: the decider imports nothing beyond the standard library, and this
    is the one special function it needs beside ``lgamma``. *Example*: ``I_0.5(2, 3) = 0.6875``."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / ((a + 1.0) + (b + 1.0)):  # below the mean of Beta(a + 1, b + 1)
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of ``I_x(a, b)`` by the modified Lentz method."""

    def floor(v: float) -> float:
        return v if abs(v) >= BETA_FRACTION_FLOOR else BETA_FRACTION_FLOOR

    c, d = 1.0, 1.0 / floor(1.0 - (a + b) * x / (a + 1.0))
    h = d
    for m in range(1, BETA_FRACTION_TERMS + 1):
        twice = m + m
        even = m * (b - m) * x / ((a - 1.0 + twice) * (a + twice))
        d = 1.0 / floor(1.0 + even * d)
        c = floor(1.0 + even / c)
        h *= d * c
        odd = -(a + m) * (a + b + m) * x / ((a + twice) * (a + 1.0 + twice))
        d = 1.0 / floor(1.0 + odd * d)
        c = floor(1.0 + odd / c)
        step = d * c
        h *= step
        if abs(step - 1.0) < BETA_FRACTION_TOLERANCE:
            break
    return h
