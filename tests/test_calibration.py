"""The objective's measurement sizes the fleet in both directions (scaler.decider.calibration), and
the capacity model reads overlapping chunked prefills as a shared replica, not a slower one: scenario
tests that step ``now``, the fleet following each target at once."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from scaler.config import engine_for, parse_metadata
from scaler.decider.calibration import TAILS, Calibration
from scaler.decider.capacity import CapacityModel
from scaler.decider.demand import DemandReader
from scaler.decider.params import DeciderParams
from scaler.model import Observation
from scaler.outputs.dryrun import CompactLines, format_line

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
STEP = timedelta(seconds=15)
LLAMA = {
    "minReplicas": "1",
    "maxReplicas": "60",
    "promptTokensPerSecondPerReplica": "5000",
    "generationTokensPerSecondPerReplica": "432",
    "coldStartSeconds": "180",
}
RATE = 10.0  # requests/s
PROMPT, OUTPUT = 1200.0, 200.0


def refresh(
    i: int,
    ready: int,
    *,
    p99: float,
    late: float,
    in_service_s: float,
    queue_s: float | None = None,
    mean_s: float | None = None,
) -> Observation:
    """One refresh of a steady fleet serving RATE requests/s, with nothing that measures a replica's
    capacities (no prefill time, no KV cache): the model keeps the configured ones. ``queue_s``: the
    mean queue time measured (vLLM's queue-time histogram), None where unread; ``mean_s``: the mean
    TTFT, half the p99 unless given."""
    return Observation(
        queue_time_mean_seconds=queue_s,
        now=T0 + i * STEP,
        queue_waiting=0.0,
        requests_running=RATE * in_service_s,
        prompt_tokens_per_s=RATE * PROMPT,
        generation_tokens_per_s=RATE * OUTPUT,
        requests_per_s=RATE,
        ttft_mean_seconds=p99 / 2 if mean_s is None else mean_s,
        ttft_p99_seconds=p99,
        ttft_over_objective=late,
        current_replicas=ready,
        ready_replicas=ready,
        gpu_schedulable_replicas=100,
    )


def follow(engine, refreshes: range, first: int, **shown: float) -> list[int]:  # type: ignore[no-untyped-def]
    """The targets of ``refreshes``, the fleet standing at each one from the next refresh on."""
    ready, targets = first, []
    for i in refreshes:
        ready = engine.decide(refresh(i, ready, **shown)).replicas
        targets.append(ready)
    return targets


def test_a_fleet_never_late_while_the_model_asks_twice_what_it_needs_comes_down_within_minutes() -> None:
    """Capacities configured at half a replica's (5,000 prompt tokens/s where it computes 10,000): the
    model sizes twice the fleet. The fleet it stands at meets the objective with a TTFT tail of a
    prompt's own 0.12 s, where the model says 0.24 s: within 35 minutes the target is two thirds of
    what the model asked, or less (7 at 17 minutes, 6 at 31: each step down waits a cold start for
    the answers to agree, ``scaler.decider.signals.load.LoadState.held``)."""
    engine = engine_for(LLAMA)
    shown = {"p99": PROMPT / 10_000.0, "late": 0.0, "in_service_s": PROMPT / 10_000.0 + OUTPUT / 36.0}
    targets = follow(engine, range(0, 140), 10, **shown)
    asked = max(targets[20:30])  # the model's own size, settled, before anything is measured
    assert asked >= 4
    assert targets[-1] <= asked * 2 / 3
    scale = engine.decide(refresh(140, targets[-1], **shown)).forecast.capacity_scale
    assert scale is not None
    assert scale > 1.4


def test_a_fleet_late_beyond_the_budget_at_the_models_size_goes_up_within_two_refreshes() -> None:
    """A fleet at the size the model asked for, late 5% (ten times the budget) with nobody queued
    behind it: within two refreshes the target is above that size."""
    engine = engine_for(LLAMA)
    healthy = {"p99": 0.4, "late": 0.0, "in_service_s": PROMPT / 5000.0 + OUTPUT / 18.0}
    targets = follow(engine, range(0, 40), 8, **healthy)
    standing = targets[-1]
    late = follow(engine, range(40, 42), standing, **{**healthy, "p99": 3.0, "late": 0.05})
    assert max(late) > standing


def test_a_cut_scale_is_said_beside_the_capacity_it_scales_and_not_as_it() -> None:
    """A fleet late 5% at the size the model asked for cuts the scale below 1. The decision still
    records what a replica holds, as the capacity model measured it (from the configured 5,000 prompt
    tokens/s and the mean TTFT). The scale the fleet was sized at is said beside it, in the decision
    and on the dry-run's line: a capacity labelled "measured" or "configured" at a figure that is
    neither would read as a wrong measurement or a parsing error."""
    engine = engine_for(LLAMA)
    healthy = {"p99": 0.4, "late": 0.0, "in_service_s": PROMPT / 5000.0 + OUTPUT / 18.0}
    standing = follow(engine, range(0, 40), 8, **healthy)[-1]
    cut = engine.decide(refresh(40, standing, **{**healthy, "p99": 3.0, "late": 0.05}))
    scale = cut.forecast.capacity_scale
    assert scale is not None
    assert scale < 0.95
    held = engine.capacity.capacity()  # what the capacity model holds after this refresh
    assert cut.capacity == held
    assert held.prefill_tokens_per_s is not None
    line = format_line(cut)
    assert f"capacity: per replica: {held.prefill_tokens_per_s:,.0f} prompt tokens/s (measured" in line
    assert f"; sized at {scale:.2f}x them (the measured objective's scale)" in line
    assert f"; sized at {scale:.2f}x them" in CompactLines()(cut)  # the default line says it too


@pytest.mark.parametrize(("tails", "settles_at"), [(None, 0.5), (0.7, 0.7), (1.3, 1.3)])
def test_a_cut_forgotten_leaves_its_scale_until_the_tails_call_for_more(
    tails: float | None, settles_at: float
) -> None:
    """A cut to 0.5 an hour and a refresh old is forgotten. With no tails measured since, the scale
    stays at 0.5; with tails that call for 0.7, it rises to 0.7 and no further; with tails that call
    for 1.3, to 1.3. Never to the model's own 1 on the cut's expiry alone."""
    params = DeciderParams()
    raised = () if tails is None else tuple((3000.0 + i, tails) for i in range(TAILS))
    state = Calibration(raised=raised, cut=((0.0, 0.5),), scale=0.5, t=3600.0)
    for i in range(1, 180):  # 45 minutes of 15 s refreshes after the cut expired, the tails not yet
        state = state.forget(3600.0 + 15.0 * i, params).settle(15.0, params)
    assert state.cut == ()
    assert state.scale == pytest.approx(settles_at)


def test_lateness_while_the_fleet_is_smaller_than_planned_teaches_nothing() -> None:
    """Half the first tokens late while the fleet stands two replicas below what the decider asked a
    lead before (a scale-up still starting, GPUs short) leave the scale alone: the lag's lateness, not
    the model's."""
    engine = engine_for(LLAMA)
    healthy = {"p99": 0.4, "late": 0.0, "in_service_s": PROMPT / 5000.0 + OUTPUT / 18.0}
    targets = follow(engine, range(0, 40), 8, **healthy)
    short = max(1, targets[-1] - 2)  # a rate window and more at two replicas fewer than asked
    before = [engine.decide(refresh(i, short, **healthy)).forecast.capacity_scale for i in range(40, 46)]
    after = [engine.decide(refresh(i, short, **{**healthy, "p99": 30.0, "late": 0.5})) for i in range(46, 49)]
    assert [d.forecast.capacity_scale for d in after] == [before[-1]] * 3


def test_a_backlog_seen_at_one_refresh_does_not_change_the_target() -> None:
    """300 waiting at one refresh and gone at the next: the target moves neither up nor back down."""
    engine = engine_for(LLAMA)
    healthy = {"p99": 0.4, "late": 0.0, "in_service_s": PROMPT / 5000.0 + OUTPUT / 18.0}
    targets = follow(engine, range(0, 40), 8, **healthy)
    standing = targets[-1]
    spike = refresh(40, standing, **healthy)
    spiked = engine.decide(replace(spike, queue_waiting=300.0)).replicas
    after = [engine.decide(refresh(i, standing, **healthy)).replicas for i in range(41, 45)]
    assert [spiked, *after] == [standing] * 5


def test_a_busy_share_above_one_from_overlapping_chunked_prefills_is_a_shared_replica() -> None:
    """Three replicas serving 12 requests/s of 1,155-token prompts, each prompt 0.35 s in prefill:
    1.4 prompts in prefill at once on a replica (chunked prefill computes several in one step). The
    replica computes 1.4 x 1,155 / 0.35 = 4,620 prompt tokens/s, not the 3,300 one prompt sees, and
    with nobody waiting longer than a prompt takes the refresh is not read as prefill-bound."""
    model = CapacityModel(parse_metadata({}).spec)
    reader = DemandReader()
    for i in range(40):
        obs = Observation(
            now=T0 + i * STEP,
            queue_waiting=4.0,
            requests_running=90.0,
            prompt_tokens_per_s=12 * 1155.0,
            generation_tokens_per_s=12 * 211.0,
            requests_per_s=12.0,
            ttft_mean_seconds=0.45,
            queue_time_mean_seconds=0.1,
            prefill_time_mean_seconds=0.35,
            current_replicas=3,
            ready_replicas=3,
        )
        model.observe(obs, reader.read(obs))
    capacity = model.capacity()
    assert capacity.prefill_tokens_per_s == pytest.approx(1.4 * 1155 / 0.35, rel=0.01)
    assert capacity.saturation == "room"


@pytest.mark.parametrize(("stood", "cut"), [(4, False), (5, True)])
def test_lateness_while_a_replica_that_joined_fills_teaches_nothing(stood: int, cut: bool) -> None:
    """Least-outstanding dispatch hands a replica that joins every request until it holds its share of
    those in service (a time in service over the Ready replicas, Little's law: 11.35 s / 9 = 1.3 s
    here), and their prompts queue on it together. Lateness in a rate window that holds those first
    tokens says nothing of a replica's capacity: 5% late at 60 s after a ninth replica joined leaves
    the scale alone; the same 5% at 75 s, once the window holds only the fleet as it stands, cuts it."""
    engine = engine_for(LLAMA)
    healthy = {"p99": 0.4, "late": 0.0, "in_service_s": PROMPT / 5000.0 + OUTPUT / 18.0}
    targets = follow(engine, range(0, 40), 8, **healthy)
    joined = targets[-1] + 1
    before = [
        engine.decide(refresh(i, joined, **healthy)).forecast.capacity_scale for i in range(40, 40 + stood)
    ]
    late = engine.decide(refresh(40 + stood, joined, **{**healthy, "p99": 3.0, "late": 0.05}))
    assert before[-1] is not None
    assert late.forecast.capacity_scale is not None
    assert (late.forecast.capacity_scale < before[-1]) is cut


@pytest.mark.parametrize(
    ("queue_s", "mean_s", "waiting", "raised"),
    [
        (None, 0.2, 0.0, True),
        (0.0, 0.2, 0.0, False),
        (0.005, 0.2, 0.0, False),
        (2.0, 2.2, 0.0, True),
        (0.0, 0.2, 12.0, True),
    ],
)
def test_lateness_whose_requests_did_not_wait_cuts_no_scale(
    queue_s: float | None, mean_s: float, waiting: float, raised: bool
) -> None:
    """A fleet at the size the model asked for, late 5% with its mean TTFT a prompt's own. Cutting the
    scale says the fleet is short of capacity, so its requests wait: a cut goes no lower than the
    scale at which the model's mean wait is the one measured. Requests seen to wait nothing (0 s) or
    5 ms on average were late for another reason (their own long prompts, a step's length): the scale
    stands and so does the target. Seen to wait 2 s on average, or with no queue time read, the target
    is above that size within two refreshes; and so it is where the finished requests waited nothing
    but 12 wait now, at 10 arriving a second (1.2 s each by Little's law: the histogram is observed as
    requests finish, after a burst)."""
    engine = engine_for(LLAMA)
    healthy = {"p99": 0.4, "late": 0.0, "in_service_s": PROMPT / 5000.0 + OUTPUT / 18.0}
    targets = follow(engine, range(0, 40), 8, **healthy)
    standing = targets[-1]
    before = engine.decide(refresh(40, standing, **healthy)).forecast.capacity_scale
    shown = {**healthy, "p99": 3.0, "late": 0.05}
    late = [
        engine.decide(
            replace(refresh(i, standing, **shown, queue_s=queue_s, mean_s=mean_s), queue_waiting=waiting)
        )
        for i in range(41, 43)
    ]
    scale = late[-1].forecast.capacity_scale
    assert before is not None
    assert scale is not None
    assert (max(d.replicas for d in late) > standing) is raised
    assert (scale < before) is raised
