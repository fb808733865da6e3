"""Erlang's delay model: the values it is known by and its shape."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.decider import queueing
from scaler.decider.queueing import erlang_c, late_share


@pytest.mark.parametrize(
    ("servers", "load", "expected"),
    [(1, 0.5, 0.5), (2, 1.0, 1 / 3), (3, 2.0, 4 / 9), (10, 8.0, 0.4092), (3, 3.0, 1.0), (3, 0.0, 0.0)],
)
def test_erlang_c_table(servers: int, load: float, expected: float) -> None:
    """Erlang C against values worked by hand (M/M/1: the utilisation; M/M/3 at 2 Erlangs: 4/9)."""
    assert erlang_c(servers, load) == pytest.approx(expected, abs=1e-4)


def test_halfin_whitt_takes_over_above_the_exact_range_within_a_tenth() -> None:
    """Past DeciderParams.exact_servers the approximation answers, within 10% of the recurrence."""
    exact = erlang_c(1999, 1900)
    approx = queueing._halfin_whitt(1999, 1900)
    assert approx == pytest.approx(exact, rel=0.1)
    assert erlang_c(2500, 2400) == queueing._halfin_whitt(2500, 2400)


def test_late_share_worked_example() -> None:
    """The module docstring's example: 60 Erlangs of 12 s on 72 slots, 1.75 s allowed: C x e^-1.75,
    over a budget of 0.25%; on 96 slots (4 replicas of 24) within it."""
    assert late_share(72, 60, 12, 1.75) == pytest.approx(erlang_c(72, 60) * math.exp(-1.75), rel=1e-9)
    assert late_share(72, 60, 12, 1.75) > 0.0025 >= late_share(96, 60, 12, 1.75)


@settings(max_examples=200, deadline=None)
@given(
    servers=st.integers(1, 400),
    load=st.floats(0.01, 399.0),
    hold=st.floats(0.1, 200.0),
    allowance=st.floats(0.0, 10.0),
)
def test_late_share_falls_with_servers_and_rises_with_load(
    servers: int, load: float, hold: float, allowance: float
) -> None:
    """More servers never make more requests late; more load never fewer; always within [0, 1]."""
    share = late_share(servers, load, hold, allowance)
    assert 0.0 <= share <= 1.0
    assert late_share(servers + 1, load, hold, allowance) <= share + 1e-12
    assert late_share(servers, load * 1.1, hold, allowance) >= share - 1e-12


def test_overload_is_all_late_and_no_load_none() -> None:
    """At or above as many Erlangs as servers every request waits; with no load none does."""
    assert late_share(10, 10.0, 5.0, 1.0) == 1.0
    assert late_share(10, 0.0, 5.0, 1.0) == 0.0


def test_far_more_servers_than_load_wait_for_nothing_above_the_exact_range() -> None:
    """5,000 slots for 10 sequences: the approximation's normal density underflows; nobody waits."""
    assert erlang_c(5000, 10.0) == 0.0
    assert late_share(5000, 10.0, 12.0, 1.75) == 0.0


def _chain(servers: int, arrivals: float, base: float, per_sequence: float) -> float:
    """The batch's birth-death chain summed state by state: up ``arrivals``, down ``k / (base +
    per_sequence k)`` below the slots, ``servers / (base + per_sequence servers)`` at and above them."""
    pi = [1.0]
    for k in range(1, servers + 1):
        pi.append(pi[-1] * arrivals * (base + per_sequence * k) / k)
    rho = arrivals * (base + per_sequence * servers) / servers
    if rho >= 1.0:
        return 1.0
    queued = pi[servers] / (1.0 - rho)
    return queued / (sum(pi[:servers]) + queued)


@pytest.mark.parametrize(
    ("servers", "arrivals", "base", "per_sequence"),
    [
        (300, 1.5, 40.0, 0.5),
        (400, 1.5, 40.0, 0.5),
        (50, 0.5, 30.0, 0.2),
        (168, 0.7, 45.0, 1.05),
        (8, 2.0, 1.0, 0.3),
    ],
)
def test_batch_wait_is_its_chain_in_closed_form(
    servers: int, arrivals: float, base: float, per_sequence: float
) -> None:
    """The negative binomial law and the incomplete beta function give what the chain gives summed
    state by state."""
    wait, _ = queueing.batch_wait(servers, arrivals, base, per_sequence)
    assert wait == pytest.approx(_chain(servers, arrivals, base, per_sequence), rel=1e-6)


def test_batch_wait_worked_example() -> None:
    """The docstring's example: 1.5 requests/s at 40 s + 0.5 s a sequence holds 243 on average where
    Erlang's model holds 60: on 300 slots 4.8% wait (Erlang: nobody), on 400 next to nobody, and on
    120 the slots free slower than requests arrive; with 1 s allowed, 4.5% on 300 wait longer."""
    assert queueing.batch_wait(300, 1.5, 40.0, 0.5)[0] == pytest.approx(0.048, abs=0.0005)
    assert erlang_c(300, 60.0) < 1e-12
    assert queueing.batch_wait(400, 1.5, 40.0, 0.5)[0] < 1e-5
    assert queueing.batch_wait(120, 1.5, 40.0, 0.5) == (1.0, 0.0)
    assert queueing.batch_late_share(300, 1.5, 40.0, 0.5, 1.0) == pytest.approx(0.045, abs=0.0005)


@pytest.mark.parametrize("per_sequence", [0.0, 1e-7])
def test_a_batch_that_does_not_slow_is_erlangs(per_sequence: float) -> None:
    """A hold that does not grow with the batch is Erlang's M/M/c, by the same function or as the
    negative binomial law's limit, and so is the wait's decay, ``(c - a) / h``."""
    wait, decay = queueing.batch_wait(72, 5.0, 12.0, per_sequence)
    assert wait == pytest.approx(erlang_c(72, 60.0), rel=1e-4)
    assert decay == pytest.approx((72 - 60.0) / 12.0, rel=1e-4)


def test_a_batch_that_cannot_finish_its_arrivals_waits_always() -> None:
    """``p >= 1``: each arrival adds more decoding than the largest batch finishes in its time, so no
    number of slots frees them as fast as requests arrive."""
    for slots in (10, 1_000, 1_000_000):
        assert queueing.batch_wait(slots, 2.0, 10.0, 0.5)[0] == 1.0
        assert queueing.batch_late_share(slots, 2.0, 10.0, 0.5, 5.0) == 1.0


def test_incomplete_beta_known_values() -> None:
    """``I_0.5(2, 3) = 11/16`` by hand, and ``I_x(a, b) = 1 - I_{1-x}(b, a)`` on either branch."""
    assert queueing._beta_regularized(2.0, 3.0, 0.5) == pytest.approx(11 / 16, rel=1e-12)
    for a, b, x in ((150.0, 500.0, 0.3), (2.5, 0.5, 0.9), (800.0, 30.0, 0.97)):
        assert queueing._beta_regularized(a, b, x) == pytest.approx(
            1.0 - queueing._beta_regularized(b, a, 1.0 - x)
        )
