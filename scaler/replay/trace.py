"""Request traces for the replay.

Two shapes of CSV are read (a header line, then one row per line):

* a **request trace** ``timestamp_s,prompt_tokens,output_tokens``: one row per real
  request, seconds since the trace began (the Azure LLM inference trace's shape);
* a **rate trace** ``window_start_s,req_per_s``: one request rate per window (ServeGen's
  10-minute rates). It carries no request sizes, so ``expand_rates`` draws arrivals with a
  seeded Poisson process (constant rate inside each window) and takes each request's
  prompt and output sizes from a request trace, sampled with replacement;
* a **measured rate trace** ``window_start_s,req_per_s,prompt_tokens_per_req,output_tokens_per_req``
  (what ``scaler replay --prometheus --export`` writes, ``scaler.replay.history``): the same,
  with each window's mean prompt and output tokens per request, which its requests get.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from scaler.errors import InputError

REQUEST_COLUMNS = ("timestamp_s", "prompt_tokens", "output_tokens")
RATE_COLUMNS = ("window_start_s", "req_per_s")
SIZE_COLUMNS = ("prompt_tokens_per_req", "output_tokens_per_req")  # a measured rate trace's


class TraceError(InputError):
    """A trace that cannot be read or used; the message says why."""

    pass


# Where the shipped traces come from, for every figure made from them (benchmarks/traces/README.md).
SOURCES = {
    "azure2023_conv.csv": "Azure LLM inference trace 2023 (conversation), Azure/AzurePublicDataset,"
    " CC-BY-4.0",
    "servegen_language_m-large_rate_10min.csv": "Alibaba ServeGen, language m-large rates,"
    " alibaba/ServeGen, Apache-2.0",
}


def source_of(name: str) -> str:
    """The source and licence of a shipped trace, or the file's name for any other."""
    return SOURCES.get(Path(name).name, f"{Path(name).name} (source and licence not known to the scaler)")


@dataclass(frozen=True)
class RateTrace:
    """Request rates per window: ``rates[i]`` requests/s from ``starts[i]`` for ``window_s``;
    a measured one also has each window's mean prompt and output tokens per request."""

    starts: NDArray[np.float64]
    rates: NDArray[np.float64]
    window_s: float
    source: str
    prompt_tokens: NDArray[np.float64] | None = None
    output_tokens: NDArray[np.float64] | None = None

    @property
    def duration_s(self) -> float:
        """Seconds the trace covers, to the end of its last window."""
        return float(self.starts[-1] + self.window_s) if len(self.starts) else 0.0

    def scaled(self, factor: float) -> RateTrace:
        """The same windows with every rate multiplied by ``factor``."""
        return dataclasses.replace(self, rates=self.rates * factor)

    def sliced(self, start_s: float, end_s: float) -> RateTrace:
        """The windows starting in [start_s, end_s), re-based to start at 0."""
        keep = (self.starts >= start_s) & (self.starts < end_s)
        if not keep.any():
            raise TraceError(f"no window of {self.source} starts in [{start_s:g}, {end_s:g})")
        return dataclasses.replace(
            self,
            starts=self.starts[keep] - start_s,
            rates=self.rates[keep],
            prompt_tokens=None if self.prompt_tokens is None else self.prompt_tokens[keep],
            output_tokens=None if self.output_tokens is None else self.output_tokens[keep],
        )


@dataclass(frozen=True)
class Trace:
    """Requests sorted by arrival: seconds since the start, prompt and output tokens."""

    arrivals: NDArray[np.float64]
    prompt_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    source: str
    note: str = ""

    def __post_init__(self) -> None:
        n = len(self.arrivals)
        if len(self.prompt_tokens) != n or len(self.output_tokens) != n:
            raise TraceError("arrivals, prompt_tokens and output_tokens differ in length")
        if n and np.any(np.diff(self.arrivals) < 0):
            raise TraceError("arrivals must be sorted")

    def __len__(self) -> int:
        return len(self.arrivals)

    @property
    def duration_s(self) -> float:
        """Seconds from the start to the last arrival."""
        return float(self.arrivals[-1]) if len(self.arrivals) else 0.0

    def sizes(self) -> dict[str, float | None]:
        """The mean prompt and output (completion) tokens of a request, None without requests."""
        if not len(self):
            return {"prompt_tokens_mean": None, "output_tokens_mean": None}
        return {
            "prompt_tokens_mean": float(self.prompt_tokens.mean()),
            "output_tokens_mean": float(self.output_tokens.mean()),
        }

    def sizes_line(self) -> str:
        """The report's line on what a request is: its mean prompt and completion tokens.

        *Example*: ``tokens per request: 912 prompt, 221 completion (means over 429,684 requests)``.
        """
        sizes = self.sizes()
        if sizes["prompt_tokens_mean"] is None or sizes["output_tokens_mean"] is None:
            return "tokens per request: none (no request)"
        return (
            f"tokens per request: {sizes['prompt_tokens_mean']:,.0f} prompt,"
            f" {sizes['output_tokens_mean']:,.0f} completion (means over {len(self):,} requests)"
        )

    def window(self, start_s: float, end_s: float) -> Trace:
        """The requests arriving in [start_s, end_s), re-based to start at 0."""
        keep = (self.arrivals >= start_s) & (self.arrivals < end_s)
        return Trace(
            self.arrivals[keep] - start_s,
            self.prompt_tokens[keep],
            self.output_tokens[keep],
            self.source,
            self.note,
        )


def _header(path: Path) -> list[str]:
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            row = next(csv.reader(handle), None)
    except OSError as exc:
        raise TraceError(f"cannot read {path}: {exc}") from None
    if row is None:
        raise TraceError(f"{path} is empty")
    return [c.strip() for c in row]


def trace_kind(path: str | Path) -> str:
    """``request`` or ``rate``, from the header line."""
    header = tuple(_header(Path(path)))
    if header[:3] == REQUEST_COLUMNS:
        return "request"
    if header[:2] == RATE_COLUMNS:
        return "rate"
    raise TraceError(
        f"{path}: unknown columns {','.join(header)}; expected"
        f" {','.join(REQUEST_COLUMNS)} (requests) or {','.join(RATE_COLUMNS)} (rates)"
    )


def _rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """Each data row with its line number in the file, skipping what ``np.loadtxt`` skips.

    The header (line 1), blank lines and ``#`` comments are skipped. *Example*: a header, a
    blank line and ``0,1,2`` give ``(3, ["0", "1", "2"])``.
    """
    with path.open(encoding="utf-8", newline="") as handle:
        for number, line in enumerate(handle, start=1):
            text = line.split("#", 1)[0].strip()
            if number > 1 and text:
                yield number, [field.strip() for field in text.split(",")]


def _first_bad_row(path: Path, columns: int) -> str | None:
    """The first row that is not numbers, has too few or a changed count of values, or a value < 0.

    *Example*: ``1,abc,20`` on line 3 of a request trace gives ``trace.csv:3: prompt_tokens
    'abc' is not a number``.
    """
    names = _header(path)
    width: int | None = None
    for number, fields in _rows(path):
        where = f"{path}:{number}"
        width = len(fields) if width is None else width
        if len(fields) < columns:
            return f"{where}: {len(fields)} values; each row needs {columns}: {','.join(names[:columns])}"
        if len(fields) != width:
            return f"{where}: {len(fields)} values where the first row has {width}"
        for index, text in enumerate(fields):
            name = names[index] if index < len(names) else f"column {index + 1}"
            try:
                value = float(text)
            except ValueError:
                return f"{where}: {name} {text!r} is not a number"
            if index < columns and not (math.isfinite(value) and value >= 0):
                return f"{where}: {name} {text} must be a finite number >= 0"
    return None


def _load(path: Path, columns: int) -> NDArray[np.float64]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numpy's warning for a file with no rows: said below
            data = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2, dtype=np.float64)
    except OSError as exc:
        raise TraceError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        # numpy counts rows from the first data row and adds advice for its own API: find the line.
        reason = str(exc).split("; use `usecols`")[0]
        raise TraceError(_first_bad_row(path, columns) or f"cannot parse {path}: {reason}") from None
    if data.size == 0:
        raise TraceError(f"{path} holds no row after its header")
    values = data[:, :columns]
    if data.shape[1] < columns or not np.all(np.isfinite(values)) or np.any(values < 0):
        raise TraceError(_first_bad_row(path, columns) or f"{path}: values must be finite and >= 0")
    return data


def load_requests(path: str | Path) -> Trace:
    """A request trace CSV, sorted by arrival and re-based to start at 0; sizes at least 1."""
    p = Path(path)
    if trace_kind(p) != "request":
        raise TraceError(f"{p} is not a request trace ({','.join(REQUEST_COLUMNS)})")
    data = _load(p, 3)
    order = np.argsort(data[:, 0], kind="stable")
    data = data[order]
    arrivals = data[:, 0] - (data[0, 0] if len(data) else 0.0)
    return Trace(
        arrivals,
        np.maximum(1, data[:, 1].astype(np.int64)),
        np.maximum(1, data[:, 2].astype(np.int64)),
        p.name,
    )


def load_rates(path: str | Path) -> RateTrace:
    """A rate trace CSV, re-based to start at 0; TraceError unless windows are evenly spaced."""
    p = Path(path)
    if trace_kind(p) != "rate":
        raise TraceError(f"{p} is not a rate trace ({','.join(RATE_COLUMNS)})")
    measured = tuple(_header(p)[2:4]) == SIZE_COLUMNS
    data = _load(p, 4 if measured else 2)
    starts = data[:, 0] - data[0, 0]
    steps = np.diff(starts)
    if len(steps) and (np.any(steps <= 0) or not np.allclose(steps, steps[0])):
        bad = int(np.argmax((steps <= 0) | ~np.isclose(steps, steps[0]))) + 1
        line = next(number for i, (number, _) in enumerate(_rows(p)) if i == bad)
        raise TraceError(
            f"{p}:{line}: window_start_s {data[bad, 0]:g} breaks the windows' even, increasing spacing"
            f" ({steps[0]:g} s from the first row to the second)"
        )
    window = float(steps[0]) if len(steps) else 600.0
    if measured:
        return RateTrace(starts, data[:, 1].copy(), window, p.name, data[:, 2].copy(), data[:, 3].copy())
    return RateTrace(starts, data[:, 1].copy(), window, p.name)


def write_rates(path: str | Path, rates: RateTrace) -> None:
    """Write a rate trace as CSV (a measured one with its tokens per request), exactly: ``load_rates``
    reads back the same floats."""
    columns = RATE_COLUMNS if rates.prompt_tokens is None else (*RATE_COLUMNS, *SIZE_COLUMNS)
    table = [rates.starts, rates.rates]
    if rates.prompt_tokens is not None and rates.output_tokens is not None:
        table += [rates.prompt_tokens, rates.output_tokens]
    # repr() of a Python float is the shortest text that reads back as the same float.
    lines = [",".join(columns)] + [",".join(repr(float(v)) for v in row) for row in zip(*table, strict=True)]
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def _spread(means: NDArray[np.float64], counts: NDArray[np.int64]) -> NDArray[np.int64]:
    """Whole token counts for each window's requests, whose mean is the window's (to one token
    over the window): ``round(mean * n)`` tokens shared out, the first requests one more."""
    n = np.maximum(counts, 1)
    totals = np.rint(means * counts).astype(np.int64)
    base, extra = totals // n, totals % n
    first = np.cumsum(counts) - counts
    index = np.arange(int(counts.sum())) - np.repeat(first, counts)
    return np.maximum(1, np.repeat(base, counts) + (index < np.repeat(extra, counts)))


def window_counts(
    expected: NDArray[np.float64], counted: bool, rng: np.random.Generator
) -> NDArray[np.int64]:
    """Requests per window, ``expected`` on average: a Poisson draw around a rate, or, for counts
    that happened (``counted``: a history's), the count itself, its fraction rounded up with that
    probability.

    A history's windows are one realisation already: drawn again around them, their variance
    doubles (a window that counted 120 requests, +-11 from the arrival process, replays +-15.5),
    and a loaded fleet replays later than it ran. *Example*: a week of a fleet whose prefill slows
    its decoding, 97.50 % of first tokens within 2.5 s as it ran; replayed as it ran from Poisson
    draws around its two-minute counts, 96.64-97.06 % over four seeds; from the counts, as below,
    97.77-97.81 % (``tests/test_replay_ownfleet_week.py``)."""
    if not counted:
        return rng.poisson(expected)
    whole = np.floor(expected)
    return (whole + (rng.random(len(expected)) < expected - whole)).astype(np.int64)


def expand_rates(rates: RateTrace, sizes: Trace | None, seed: int, counted: bool = False) -> Trace:
    """Arrivals at each window's rate (``window_counts``: Poisson, or the counts a history
    measured), uniform inside it, with sizes drawn from a request trace, or for a measured rate
    trace (``sizes`` None) each window's mean tokens per request."""
    if sizes is None and (rates.prompt_tokens is None or rates.output_tokens is None):
        raise TraceError(f"{rates.source} holds no token sizes: give a request trace to draw them from")
    if sizes is not None and len(sizes) == 0:
        raise TraceError("the request trace for token sizes is empty")
    rng = np.random.default_rng(seed)
    counts = window_counts(rates.rates * rates.window_s, counted, rng)
    total = int(counts.sum())
    # Inside a window a Poisson process's arrivals are uniform given their count.
    offsets = rng.random(total) * rates.window_s
    arrivals = np.repeat(rates.starts, counts) + offsets
    drawn = (
        f"each window's requests as counted in {rates.source}, at times drawn uniformly in it (seed {seed})"
        if counted
        else f"arrivals drawn from {rates.source} by a Poisson process (seed {seed})"
    )
    if sizes is None:
        assert rates.prompt_tokens is not None
        assert rates.output_tokens is not None
        order = np.argsort(arrivals, kind="stable")
        return Trace(
            arrivals[order],
            _spread(rates.prompt_tokens, counts)[order],
            _spread(rates.output_tokens, counts)[order],
            rates.source,
            f"{drawn}; each request has its window's mean prompt and output tokens, as measured",
        )
    arrivals.sort(kind="stable")
    pick = rng.integers(0, len(sizes), size=total)
    note = f"{drawn}, token sizes sampled from {sizes.source}"
    return Trace(arrivals, sizes.prompt_tokens[pick], sizes.output_tokens[pick], rates.source, note)


def load_trace(path: str | Path, sizes_from: str | Path | None, seed: int, rate_scale: float = 1.0) -> Trace:
    """A request trace as it is, or a rate trace expanded into requests."""
    if trace_kind(path) == "request":
        return load_requests(path)
    rates = load_rates(path).scaled(rate_scale)
    if rates.prompt_tokens is not None and sizes_from is not None:
        raise TraceError(f"{path} has its own tokens per request ({','.join(SIZE_COLUMNS)}): no --sizes-from")
    if rates.prompt_tokens is None and sizes_from is None:
        raise TraceError(f"{path} holds rates only: give --sizes-from REQUEST_TRACE.csv for token sizes")
    # A measured rate trace (its own sizes) holds what a history counted: its counts are replayed.
    sizes = None if sizes_from is None else load_requests(sizes_from)
    trace = expand_rates(rates, sizes, seed, counted=sizes is None)
    if rate_scale != 1.0:
        trace = Trace(
            trace.arrivals,
            trace.prompt_tokens,
            trace.output_tokens,
            trace.source,
            trace.note + f"; rates scaled by {rate_scale:g}",
        )
    return trace


def bursty_rates(
    duration_s: float,
    mean_rate: float,
    seed: int,
    burst_factor: float = 3.5,
    burst_s: tuple[float, float] = (60.0, 150.0),
    gap_s: tuple[float, float] = (420.0, 1380.0),
    window_s: float = 5.0,
) -> RateTrace:
    """A synthetic bursty load: short bursts at ``burst_factor`` times the mean, on a calm base.

    Bursts last ``burst_s`` (uniform; shorter than a typical cold start, so no replica
    ordered when one begins is Ready before it ends) and start after calm gaps of
    ``gap_s`` (uniform), both drawn from ``seed``. The calm base is set so that the mean
    over the whole trace is ``mean_rate``, and each burst runs at ``burst_factor`` times
    that mean. The rates come in windows of ``window_s``, to be expanded into requests
    with ``expand_rates`` (Poisson arrivals, sizes from a request trace).
    """
    if not (duration_s > 0 and mean_rate > 0 and burst_factor > 1):
        raise TraceError("bursty_rates needs a duration, a mean rate > 0 and a burst factor > 1")
    rng = np.random.default_rng(seed)
    starts = np.arange(0.0, duration_s, window_s)
    in_burst = np.zeros(len(starts), dtype=bool)
    t = float(rng.uniform(*gap_s))
    while t < duration_s:
        length = float(rng.uniform(*burst_s))
        in_burst |= (starts >= t) & (starts < t + length)
        t += length + float(rng.uniform(*gap_s))
    share = float(in_burst.mean())
    if share * burst_factor >= 1:
        raise TraceError("bursts this long and this high leave no load for the calm base")
    base = mean_rate * (1 - share * burst_factor) / (1 - share)
    rates = np.where(in_burst, burst_factor * mean_rate, base)
    return RateTrace(starts, rates, window_s, f"bursty (seed {seed})")
