"""History to a measured rate trace (scaler.replay.history), its CSV, and the span options. No I/O."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from scaler.config import parse_metadata
from scaler.model import Observation
from scaler.replay.history import STANDING_LIMITS, HistoryError, measure
from scaler.replay.span import Span, SpanError, span, step_for_scrapes, written
from scaler.replay.trace import (
    RateTrace,
    Trace,
    TraceError,
    expand_rates,
    load_rates,
    load_trace,
    write_rates,
)

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
ROUTED = {"engine": "vllm", "labelSelector": 'model_name="llama-70b"'}
POLICY = parse_metadata(ROUTED)


def point(k: int, served: float | None = 2.0, waiting: float | None = 0.0, **extra: float) -> Observation:
    """The reader's point at T0 + k minutes: 1,200 prompt and 200 output tokens a request."""
    values: dict[str, float | None] = {
        "requests_per_s": served,
        "prompt_tokens_per_s": None if served is None else 1200 * served,
        "generation_tokens_per_s": None if served is None else 200 * served,
        "queue_waiting": waiting,
        "ready_replicas": 3,
        **extra,
    }
    return Observation(now=T0 + timedelta(minutes=k), **values)  # type: ignore[arg-type]


def window(minutes: int) -> Span:
    """``minutes`` one-minute windows from T0."""
    return Span(T0, T0 + timedelta(minutes=minutes), 60.0)


def test_the_worked_example() -> None:
    """The module docstring's example: 2.0 first tokens/s and 4 -> 10 waiting give 2.1 arrivals/s."""
    got = measure(
        [point(0, waiting=4), point(1, served=2.0, waiting=10, generation_tokens_per_s=400.0)],
        {},
        window(1),
        POLICY,
    )
    assert got.rates.rates.tolist() == pytest.approx([2.1])
    assert got.rates.rates[0] * 60 == pytest.approx(126)
    assert got.rates.prompt_tokens is not None
    assert got.rates.output_tokens is not None
    assert got.rates.prompt_tokens.tolist() == pytest.approx([1200])
    assert got.rates.output_tokens.tolist() == pytest.approx([200])
    assert got.start == T0


def test_a_draining_queue_lowers_the_arrivals() -> None:
    """Requests served from the queue arrived earlier: served 3/s while 60 drain is 2/s of arrivals."""
    got = measure([point(0, waiting=60), point(1, served=3.0, waiting=0)], {}, window(1), POLICY)
    assert got.rates.rates.tolist() == pytest.approx([2.0])


def test_gaps_are_interpolated_and_said() -> None:
    """Windows without data get rates and sizes from their neighbours, and a limit says where."""
    points = [point(0), point(1, served=1.0), point(4, served=4.0, prompt_tokens_per_s=4 * 1500.0)]
    got = measure(points, {}, window(4), POLICY)
    assert got.rates.rates.tolist() == pytest.approx([1.0, 2.0, 3.0, 4.0])
    assert got.rates.prompt_tokens is not None
    assert got.rates.prompt_tokens.tolist() == pytest.approx([1200, 1300, 1400, 1500])
    assert got.gaps == ((60.0, 120.0),)
    assert any(
        "1 gap(s) without data, 2 min in all (longest 2 min from 2026-11-30T10:01Z)" in x for x in got.limits
    )


def test_the_served_count_says_what_a_gap_leaves_out() -> None:
    """The served count is the windows with samples'; the measured line names the gap's requests left out."""
    points = [point(0), point(1, served=1.0), point(4, served=4.0)]
    got = measure(points, {}, window(4), POLICY)
    assert got.served == pytest.approx((1.0 + 4.0) * 60)
    assert got.gap_arrivals == pytest.approx((2.0 + 3.0) * 60)  # the two windows interpolated
    assert "300 requests served (not counted: the 2 min of 1 gap(s) without samples, about 300 requests" in (
        got.line(1)
    )
    assert got.to_json()["gap_arrivals"] == pytest.approx(300)


def test_without_a_gap_the_served_count_is_all() -> None:
    """With no gap, the measured line says nothing of one."""
    got = measure([point(0), point(1), point(2)], {}, window(2), POLICY)
    assert got.gap_arrivals == 0
    assert "not counted" not in got.line(1)


def test_windows_without_data_at_the_edges_are_cut() -> None:
    """No data before or after: the trace starts at the first window with data, and a limit says so."""
    points = [point(k) for k in range(2, 5)]
    got = measure(points, {}, window(6), POLICY)
    assert got.start == T0 + timedelta(minutes=1)
    assert len(got.rates.starts) == 3
    assert any(
        x.startswith("no data before 2026-11-30T10:01Z nor after 2026-11-30T10:04Z: the replay covers")
        for x in got.limits
    )


def test_the_standing_limits_are_always_said() -> None:
    """Requests dropped in front of the servers and mean sizes are named in every measured trace."""
    got = measure([point(0), point(1)], {}, window(1), POLICY)
    assert set(STANDING_LIMITS) <= set(got.limits)
    assert any("router" in x for x in got.limits)


def test_an_unread_queue_is_said_with_its_consequence() -> None:
    """Without the queue, arrivals are first tokens, and the limit says why the queue is missing."""
    points = [point(0, waiting=None), point(1, waiting=None)]
    got = measure(points, {"queue_waiting": "prometheus http://p: timed out after 30s"}, window(1), POLICY)
    assert any(
        x.startswith("requests waiting could not be read (prometheus http://p: timed out after 30s)")
        for x in got.limits
    )


def test_the_router_queue_is_waiting_demand() -> None:
    """With a router, requests waiting in its queue count as arrived: 30 more there is 0.5/s more."""
    routed = parse_metadata({**ROUTED, "router": "llm-d", "inferencePool": "pool"})
    got = measure(
        [point(0, waiting=4, router_queue_waiting=0.0), point(1, waiting=4, router_queue_waiting=30.0)],
        {},
        window(1),
        routed,
    )
    assert got.rates.rates.tolist() == pytest.approx([2.5])


def test_a_router_queue_that_appears_late_leaves_the_earlier_queue_growth_counted() -> None:
    """The router's queue series exists only from minute 2 (a router put in front mid-span): before
    it, the servers' queue growth still counts (4 -> 34 waiting is 0.5/s more), not nothing."""
    routed = parse_metadata({**ROUTED, "router": "llm-d", "inferencePool": "pool"})
    got = measure(
        [point(0, waiting=4), point(1, waiting=34), point(2, waiting=34, router_queue_waiting=0.0)],
        {},
        window(2),
        routed,
    )
    assert got.rates.rates.tolist() == pytest.approx([2.5, 2.0])


def test_an_unread_router_queue_is_said() -> None:
    """A router configured whose queue cannot be read: a limit names it and the error."""
    routed = parse_metadata({**ROUTED, "router": "llm-d", "inferencePool": "pool"})
    got = measure(
        [point(0), point(1)], {"router_queue_waiting": "prometheus http://p: HTTP 500"}, window(1), routed
    )
    assert any(
        x.startswith("the llm-d router's queue could not be read (prometheus http://p: HTTP 500)")
        for x in got.limits
    )


@pytest.mark.parametrize(
    ("points", "problems", "says"),
    [
        ([], {}, "no token-rate series match"),
        (
            [
                point(0, served=None),
                point(1, served=None, prompt_tokens_per_s=5.0, generation_tokens_per_s=1.0),
            ],
            {},
            "the TTFT histogram's count",
        ),
        (
            [],
            {"ttft": "prometheus http://p: connection failed"},
            "could not be read: prometheus http://p: connection failed",
        ),
    ],
)
def test_no_request_rate_is_an_error_that_says_why(
    points: list[Observation], problems: dict[str, str], says: str
) -> None:
    """Without a request rate the error names the engine, the selector, the span and the cause."""
    with pytest.raises(HistoryError) as raised:
        measure(points, problems, window(1), POLICY)
    message = str(raised.value)
    assert 'engine vllm, labelSelector model_name="llama-70b", from 2026-11-30T10:00:00+00:00' in message
    assert says in message


def test_an_engine_without_a_preset_is_refused() -> None:
    """engine: custom has no preset, so nothing to read: the error says which engines can be read."""
    with pytest.raises(
        HistoryError, match="engine custom has no query preset: the replay reads an engine preset"
    ):
        measure([], {"engine": "engine custom has no query preset"}, window(1), POLICY)


def test_measured_figures() -> None:
    """First tokens, share within the objective and the mean TTFT are weighted by requests."""
    points = [
        point(0),
        point(1, served=1.0, ttft_over_objective=0.1, ttft_mean_seconds=1.0),
        point(2, served=3.0, ttft_over_objective=0.0, ttft_mean_seconds=0.2),
    ]
    got = measure(points, {}, window(2), POLICY)
    assert got.served == pytest.approx(240)
    assert got.within_objective == pytest.approx(1 - 0.1 / 4)
    assert got.ttft_mean_s == pytest.approx((1.0 + 3 * 0.2) / 4)
    assert got.replica_seconds == pytest.approx(2 * 3 * 60)
    assert "240 requests served, 97.50% within 2s" in got.line(2)
    assert "0.10 replica-hours of pods reporting (0.20 GPU-h at 2 per replica), peak 3" in got.line(2)


def test_a_measured_rate_trace_round_trips_through_its_csv(tmp_path: Path) -> None:
    """write_rates then load_rates gives the same floats, so the same seed gives the same requests."""
    rates = RateTrace(
        np.arange(4, dtype=np.float64) * 60.0,
        np.array([0.1, 2 / 3, 1.25, 0.0]),
        60.0,
        "history",
        np.array([1000.0 / 3, 1200.5, 7.0, 1200.5]),
        np.array([200.25, 1 / 7, 3.0, 200.25]),
    )
    path = tmp_path / "trace.csv"
    write_rates(path, rates)
    assert (
        path.read_text().splitlines()[0]
        == "window_start_s,req_per_s,prompt_tokens_per_req,output_tokens_per_req"
    )
    loaded = load_rates(path)
    for name in ("starts", "rates", "prompt_tokens", "output_tokens"):
        assert np.array_equal(getattr(loaded, name), getattr(rates, name)), name
    assert loaded.window_s == 60.0
    a, b = expand_rates(rates, None, 5, counted=True), load_trace(path, None, 5)
    assert np.array_equal(a.arrivals, b.arrivals)
    assert np.array_equal(a.prompt_tokens, b.prompt_tokens)
    assert np.array_equal(a.output_tokens, b.output_tokens)


def test_a_history_s_counts_are_replayed_not_drawn_around(tmp_path: Path) -> None:
    """A measured rate trace's windows hold what was counted: every seed replays each window's count
    (a fraction rounded up with its probability), where a rate trace's are Poisson draws around it."""
    rates = RateTrace(
        np.arange(4, dtype=np.float64) * 60.0,
        np.array([2.0, 0.5 / 60, 7.5 / 60, 0.0]),  # 120, 0.5, 7.5 and 0 requests a window
        60.0,
        "history",
        np.full(4, 900.0),
        np.full(4, 200.0),
    )
    path = tmp_path / "trace.csv"
    write_rates(path, rates)
    seen = np.array([np.bincount((load_trace(path, None, seed).arrivals // 60).astype(int), minlength=4)
                     for seed in range(400)])  # fmt: skip
    assert set(seen[:, 0]) == {120}
    assert set(seen[:, 1]) == {0, 1}
    assert set(seen[:, 2]) == {7, 8}
    assert set(seen[:, 3]) == {0}
    assert abs(seen[:, 1].mean() - 0.5) < 0.1  # unbiased
    assert abs(seen[:, 2].mean() - 7.5) < 0.1
    drawn = np.array([np.bincount((expand_rates(rates, None, seed).arrivals // 60).astype(int), minlength=4)
                      for seed in range(400)])  # fmt: skip
    assert drawn[:, 0].std() > 5  # a rate's Poisson draws: sd sqrt(120) = 11


def test_each_window_keeps_its_mean_sizes() -> None:
    """Expanded, each window's requests have its mean prompt and output tokens (to one token)."""
    rates = RateTrace(
        np.arange(3, dtype=np.float64) * 600.0,
        np.array([1.0, 2.0, 0.5]),
        600.0,
        "h",
        np.array([100.4, 2000.0, 7.5]),
        np.array([50.0, 1.5, 300.2]),
    )
    trace = expand_rates(rates, None, 1)
    which = (trace.arrivals // 600).astype(int)
    for w in range(3):
        n = int((which == w).sum())
        assert n > 0
        assert abs(trace.prompt_tokens[which == w].sum() - rates.prompt_tokens[w] * n) <= 0.5  # type: ignore[index]
        assert abs(trace.output_tokens[which == w].sum() - rates.output_tokens[w] * n) <= 0.5  # type: ignore[index]
    assert "each request has its window's mean prompt and output tokens" in trace.note


def test_measured_sizes_and_sizes_from_are_not_mixed(tmp_path: Path) -> None:
    """A trace with its own tokens per request refuses --sizes-from, naming the columns."""
    path = tmp_path / "t.csv"
    write_rates(
        path, RateTrace(np.array([0.0, 60.0]), np.array([1.0, 1.0]), 60.0, "h", np.ones(2), np.ones(2))
    )
    with pytest.raises(TraceError, match="has its own tokens per request"):
        load_trace(path, path, 0)


@pytest.mark.parametrize(
    ("since", "until", "step", "says"),
    [
        ("7 days", None, "1m", "'7 days' is not a duration such as 90s, 5m, 6h or 7d"),
        ("7d", "2026-12-07", "1m", "--until '2026-12-07' needs a zone"),
        ("7d", "monday", "1m", "--until 'monday' is not an ISO 8601 time"),
        ("7d", None, "0.5s", "--step '0.5s': at least 1s"),
        ("1m", None, "1m", "--since '1m' must cover at least two steps"),
    ],
)
def test_span_errors_name_the_option(since: str, until: str | None, step: str, says: str) -> None:
    """A bad --since, --until or --step is refused with the option and the value."""
    with pytest.raises(SpanError) as raised:
        span(since, until, step, T0)
    assert says in str(raised.value)


def test_the_span_ends_now_by_default() -> None:
    """--since 7d without --until is the week to the clock passed in (down to a step), in steps of --step."""
    got = span("7d", None, "1m", T0 + timedelta(seconds=59.5))
    assert (got.start, got.end, got.step_s, got.steps) == (T0 - timedelta(days=7), T0, 60.0, 10080)


@pytest.mark.parametrize(
    ("step_s", "scrape_s", "need"),
    [
        (30.0, 30.0, 60.0),  # one scrape a window: the shortest round step of two
        (60.0, 30.0, None),
        (45.0, 30.0, 60.0),
        (60.0, 60.0, 120.0),
        (30.0, 15.0, None),
        (60.0, 28.6, None),  # 21 samples in ten minutes (both ends held): still two a minute
        (60.0, 100.0, 300.0),
        (60.0, None, None),  # the interval unknown: the step is taken as given
    ],
)
def test_a_step_must_hold_two_scrapes(step_s: float, scrape_s: float | None, need: float | None) -> None:
    """step_for_scrapes: None when a window holds two scrapes, else the shortest round step that does."""
    assert step_for_scrapes(step_s, scrape_s) == need


@pytest.mark.parametrize(
    ("seconds", "text"), [(60, "1m"), (90, "90s"), (120, "2m"), (3600, "1h"), (86400, "1d"), (0.5, "0.5s")]
)
def test_durations_are_written_in_their_largest_whole_unit(seconds: float, text: str) -> None:
    """written(): a duration as Prometheus writes it, in its largest whole unit."""
    assert written(seconds) == text


def test_the_sizes_line_gives_the_mean_prompt_and_completion() -> None:
    """A trace's sizes are its requests' mean prompt and completion tokens, in one line and as numbers."""
    trace = load_trace_from_arrays([0.0, 1.0, 2.0, 3.0], [100, 200, 300, 1400], [10, 20, 30, 40])
    assert trace.sizes() == {"prompt_tokens_mean": 500.0, "output_tokens_mean": 25.0}
    assert trace.sizes_line() == "tokens per request: 500 prompt, 25 completion (means over 4 requests)"


def load_trace_from_arrays(arrivals: list[float], prompt: list[int], output: list[int]) -> Trace:
    """A request trace built from lists."""
    return Trace(np.array(arrivals), np.array(prompt), np.array(output), "test")
