"""A prefill or decode pool is sized on its own resource (scaler.decider.signals: load, queue)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from scaler.config import parse_metadata
from scaler.decider.demand import Demand
from scaler.decider.forecast import Forecast
from scaler.decider.signals import load, queue
from scaler.model import Capacity, Observation

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
# The load docstring's decode example: 1.3 requests/s of 1,300-token prompts, each holding a decode
# slot 60 s (1,500 tokens at 25 a second); the decode pool's mean TTFT with nobody waiting for a
# slot is 0.6 s, read as the prefill time prompt / P.
PROMPT, HOLD, ARRIVALS = 1300.0, 60.0, 1.3
BEFORE_A_SLOT_S = 0.6


def demand(arrivals: float = ARRIVALS, prompt: float | None = PROMPT, hold: float = HOLD) -> Demand:
    """Offered demand of ``arrivals`` requests/s of ``prompt`` tokens, each in service ``hold`` s."""
    work = None if prompt is None else arrivals * prompt
    return Demand(0.0, arrivals, arrivals, prompt, hold, work, arrivals * hold)


def flat(value: float) -> Forecast:
    """A forecast that stays at ``value``, with no past error."""
    return Forecast(level=value, trend=0.0, planned=value, held_s=0.0, margin=0.0)


def need(role: str, capacity: Capacity, d: Demand | None = None) -> load.LoadNeed:
    """The load signal's need for ``role`` at the docstring's demand."""
    policy = parse_metadata({"role": role, "maxReplicas": "60"}).spec
    d = d or demand()
    prompt = flat(d.prompt_tokens_per_s) if d.prompt_tokens_per_s is not None else None
    found = load.need(policy, capacity, d, prompt, flat(d.concurrency or 0.0), "")
    assert found is not None
    return found


def test_the_docstring_decode_pool_needs_five_replicas_of_slots_alone() -> None:
    """78 Erlangs of 60 s on 24 slots a replica, 1.4 s allowed: 4 leave 2.1% late, 5 meet 0.5%."""
    capacity = Capacity(PROMPT / BEFORE_A_SLOT_S, 24.0, "measured", "measured")
    decode = need("decode", capacity)
    assert decode.replicas == 5
    assert [n.resource for n in decode.needs] == ["slots"]
    assert decode.binding_resource == "slots"
    assert "prefill: the prefill pool's own (role: decode)" in decode.unknown
    assert "slots binds: 5" in load.propose(decode, "").reason


def test_the_docstring_prefill_pool_is_sized_on_prompts_whatever_the_decode_load() -> None:
    """0.34 Erlangs of prefill: 1 replica, even with ten times the sequences in service, which size
    a replica of both resources far above it."""
    capacity = Capacity(5000.0, 24.0, "configured", "measured")
    heavy = demand(hold=600.0)  # 780 sequences in service
    prefill = need("prefill", capacity, heavy)
    assert prefill.replicas == 1
    assert [n.resource for n in prefill.needs] == ["prefill"]
    assert "slots: the decode pool's own (role: prefill)" in prefill.unknown
    assert need("both", capacity, heavy).replicas >= 33  # 780 / 24 = 32.5 replicas of slots


def slots_of(role: str, capacity: Capacity, now: Observation | None = None) -> load.Resource:
    """The slots resource ``role``'s load signal builds."""
    policy = parse_metadata({"role": role}).spec
    d = demand()
    sizing = load.Sizing(policy, capacity, d, flat(ARRIVALS * PROMPT), flat(ARRIVALS * HOLD), now)
    found, _ = load.resources(sizing, "")
    return next(r for r, _ in found if r.name == "slots")


def test_a_decode_slot_may_be_waited_for_what_prefill_leaves_of_the_objective() -> None:
    """Objective 2 s, 0.6 s before a slot is needed: 1.4 s; unknown: 0, every wait late (a replica
    of both resources keeps the whole objective when its prefill is unknown, as before)."""
    known = Capacity(PROMPT / BEFORE_A_SLOT_S, 24.0, "measured", "measured")
    assert slots_of("decode", known).allowance_s == pytest.approx(1.4)
    unknown = Capacity(None, 24.0, "unknown", "measured")
    assert slots_of("decode", unknown).allowance_s == 0.0
    assert slots_of("both", unknown).allowance_s == 2.0
    assert need("decode", unknown).replicas == 5  # 3.1% late at 4 without the allowance


def test_prefill_does_not_stretch_a_decode_pool() -> None:
    """A decode slowdown fitted from the refreshes stretches the time in service of a replica that
    prefills too, never that of a decode pool, which computes no prompt."""
    capacity = Capacity(5000.0, 24.0, "configured", "measured", decode_slowdown=0.5)
    now = Observation(now=NOW, ready_replicas=4, ttft_mean_seconds=0.5, prompt_tokens_per_s=ARRIVALS * PROMPT)
    assert slots_of("both", capacity, now).stretch is not None
    assert slots_of("decode", capacity, now).stretch is None


@pytest.mark.parametrize(
    ("role", "per_replica", "replicas"),
    [("both", 2.0, 5), ("prefill", 5000.0 / 1200.0, 2), ("decode", 2.0, 5)],
)
def test_a_pool_drains_its_queue_at_its_own_resource_rate(
    role: str, per_replica: float, replicas: int
) -> None:
    """5,000 prompt tokens/s over 1,200-token prompts complete 4.17/s; 24 slots over 12 s, 2/s: a
    replica of both completes the tighter, a prefill pool the prefill rate, a decode pool the slots'.
    2,000 waiting behind 2 Ready serving 1/s: at 4.17/s, 680 are left after 180 s, 2 replicas; at
    2/s, 1,460 are left, 5."""
    capacity = Capacity(5000.0, 24.0, "configured", "measured")
    obs = Observation(now=NOW, queue_waiting=2000, ready_replicas=2)
    d = demand(1.0, 1200.0, 12.0)
    rate = queue.service_rate(capacity, d, obs, role)  # type: ignore[arg-type]
    assert rate is not None
    assert rate.per_replica == pytest.approx(per_replica)
    proposal = queue.propose(obs, d, capacity, 180.0, 10.0, None, role)  # type: ignore[arg-type]
    assert proposal.replicas == replicas
