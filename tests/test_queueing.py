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
