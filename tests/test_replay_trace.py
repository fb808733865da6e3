"""Trace loading and the seeded Poisson expansion of rate traces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scaler.replay.trace import TraceError, expand_rates, load_rates, load_requests, load_trace, trace_kind

TRACES = Path(__file__).resolve().parent.parent / "benchmarks" / "traces"
AZURE = TRACES / "azure2023_conv.csv"
SERVEGEN = TRACES / "servegen_language_m-large_rate_10min.csv"


def test_request_trace() -> None:
    """The Azure request trace loads sorted from 0 s, just under an hour, with token counts >= 1."""
    trace = load_requests(AZURE)
    assert len(trace) == 19_366
    assert trace.arrivals[0] == 0.0
    assert np.all(np.diff(trace.arrivals) >= 0)
    assert 55 * 60 < trace.duration_s < 60 * 60
    assert trace.prompt_tokens.min() >= 1
    assert trace.output_tokens.min() >= 1


def test_kinds_and_errors(tmp_path: Path) -> None:
    """Traces are told apart by columns; unknown columns, or rates without sizes, raise TraceError."""
    assert trace_kind(AZURE) == "request"
    assert trace_kind(SERVEGEN) == "rate"
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(TraceError, match="unknown columns"):
        trace_kind(bad)
    with pytest.raises(TraceError, match="holds rates only"):
        load_trace(SERVEGEN, None, seed=0)


def test_poisson_expansion_is_seeded_and_follows_the_rates() -> None:
    """Poisson expansion repeats per seed and follows the rates, drawing sizes from the trace."""
    rates = load_rates(SERVEGEN).scaled(0.01).sliced(0, 86400)
    sizes = load_requests(AZURE)
    a = expand_rates(rates, sizes, seed=7)
    b = expand_rates(rates, sizes, seed=7)
    c = expand_rates(rates, sizes, seed=8)
    assert np.array_equal(a.arrivals, b.arrivals)
    assert np.array_equal(a.prompt_tokens, b.prompt_tokens)
    assert not np.array_equal(a.arrivals, c.arrivals)
    expected = float((rates.rates * rates.window_s).sum())
    assert abs(len(a) - expected) < 4 * expected**0.5  # Poisson: within 4 standard deviations
    assert a.arrivals.max() < 86400
    assert set(np.unique(a.prompt_tokens)) <= set(np.unique(sizes.prompt_tokens))
    assert "Poisson" in a.note
    assert "azure2023_conv.csv" in a.note


def test_window_rebases() -> None:
    """A window of a trace starts its arrivals at 0 and ends them before its length."""
    trace = load_requests(AZURE).window(600, 1200)
    assert trace.arrivals.min() >= 0
    assert trace.arrivals.max() < 600


def test_bursty_rates_keep_the_mean_and_burst_above_three_times_it() -> None:
    """The synthetic bursty trace: its mean is the one asked, its bursts short and at 3.5x that mean."""
    import numpy as np

    from scaler.replay.trace import bursty_rates

    rates = bursty_rates(6 * 3600, 5.5, seed=1)
    assert float(rates.rates.mean()) == pytest.approx(5.5)
    high = rates.rates > 5.5
    assert float(rates.rates.max()) == pytest.approx(3.5 * 5.5)
    # bursts are runs of windows above the mean, each shorter than a 180 s cold start
    edges = np.flatnonzero(np.diff(np.concatenate([[0], high.astype(int), [0]])))
    lengths = (edges[1::2] - edges[::2]) * rates.window_s
    assert len(lengths) >= 10
    assert lengths.max() <= 150
    assert lengths[:-1].min() >= 60  # the last may be cut
    assert bursty_rates(6 * 3600, 5.5, seed=1).rates.tolist() == rates.rates.tolist()  # seeded
