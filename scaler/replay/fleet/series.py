"""What a replayed fleet exports, counted as its servers count it and read as Prometheus reads it.

The one model of the simulated series that the replay (``scaler.replay.replay``) and the
disaggregated replay (``scaler.replay.disagg_run``) show their policies:

* **Token counters** (``TokenCounters``), binned by the second: prompt tokens counted when a
  prefill ends, generated tokens spread evenly over a request's decode (a rate difference
  array). Read as ``rate(counter[1m])`` reads them::

      rate at second s = (counter(s) - counter(s - w)) / 60,   w = min(60, s)

  Every counter and histogram opens at zero at the simulation's first second, and the policies
  are first consulted a rate window later (``Warmed.watched``): a scaler starts against servers
  Prometheus has watched for a minute, every series a full window. (The token counters once
  opened at the first minute's rates while the first-token histogram, which the served requests
  are read from, opened empty: in the warm-up's first minute a request read as four times its
  prompt, and a decider read its replicas' prefill four times too fast. Consulted from the first
  second with every series at zero, a decider read the first minute's ramp as the demand.)
  *Example*: 3,000 prompt tokens counted by second 30 read ``3,000 / 60 = 50`` tokens/s there;
  6,000 counted over seconds 30 to 90, ``6,000 / 60 = 100`` tokens/s at second 90.
* **Histograms** (``Histogram``): observations binned every ``HIST_BIN_S`` (a first token into
  vLLM's ``time_to_first_token_seconds`` buckets, +Inf last), read over the last minute as
  ``sum(rate(..._bucket[1m]))`` and ``rate(..._sum[1m])`` read them.
* **The phase times** (``PhaseTimes``): each request's queue time and prefill time, observed
  when it ends as vLLM observes them (``vllm:request_queue_time_seconds``,
  ``vllm:request_prefill_time_seconds``), read as their ``_count`` and ``_sum`` rates.
* **The cold start** (``ColdStartWatch``): measured from the pods as they become Ready.
* **The inputs the live source reads** (``fleet_inputs``), in one place for both replays.
* **The timeline** (``Warmed``): the trace's first ``warmup_s`` seconds replayed once before
  it, unscored, so that every policy starts in the steady state the trace opens with; simulation
  time is trace time plus ``w``, the warm-up copy's length.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from scaler.decider.coldstart import ColdStart, PodTimes
from scaler.decider.coldstart import measure as measure_cold_start
from scaler.inputs import Input, Reading
from scaler.presets.engines import VLLM_ITL_BUCKETS, VLLM_TTFT_BUCKETS
from scaler.replay.trace import Trace

RATE_WINDOW_S = 60  # rate(...[1m])
HIST_BIN_S = 5  # time resolution of the simulated histograms
TTFT_BUCKETS = (*VLLM_TTFT_BUCKETS, math.inf)  # vLLM's vllm:time_to_first_token_seconds buckets, +Inf last
ITL_BUCKETS = (*VLLM_ITL_BUCKETS, math.inf)  # vLLM's vllm:inter_token_latency_seconds buckets, +Inf last


def cumulative_buckets(
    counts: NDArray[np.int64], window_s: float, bounds: Sequence[float] = TTFT_BUCKETS
) -> dict[float, float]:
    """Per-bucket counts over a window as ``sum(rate(..._bucket[window]))`` reads them: cumulative
    ``le`` rates, per second."""
    return dict(zip(bounds, (np.cumsum(counts) / window_s).tolist(), strict=True))


def bins(horizon_s: float) -> int:
    """The per-second bins a simulation to ``horizon_s`` counts in (bins past it are dropped)."""
    return int(horizon_s) + 2


class TokenCounters:
    """The prompt and generation token counters, per second, read as ``rate(...[1m])`` (module
    docstring)."""

    def __init__(self, nbins: int) -> None:
        self.nbins = nbins
        # Arrays, which the compiled loop (scaler.replay.fleet.kernel) counts into too.
        self.prompt_bin = np.zeros(nbins, dtype=np.float64)
        self.gen_diff = np.zeros(nbins, dtype=np.float64)
        self.prompt_cum = [0.0] * (nbins + 1)
        self.gen_cum = [0.0] * (nbins + 1)
        self.done = 0
        self.gen_now = 0.0

    def prompt(self, t: float, tokens: float) -> None:
        """Prompt tokens counted at ``t``."""
        if int(t) < self.nbins - 1:
            self.prompt_bin[int(t)] += tokens

    def generation(self, start: float, end: float, tokens: float) -> None:
        """``tokens`` generated evenly from ``start`` to ``end`` (from the first second not read yet, where
        ``start`` is before it: what was read is not read again)."""
        start = max(start, float(self.done))
        if tokens <= 0:
            return
        if end <= start:
            end = start + 1.0
        rate = tokens / (end - start)
        if int(start) < self.nbins - 1:
            self.gen_diff[int(start)] += rate
            if int(end) < self.nbins - 1:
                self.gen_diff[int(end)] -= rate

    def rates(self, t: float) -> tuple[float, float]:
        """The prompt and generated tokens per second at ``t``, over the last minute."""
        second = min(int(t), self.nbins)
        for k in range(self.done, second):
            self.gen_now += float(self.gen_diff[k])
            self.prompt_cum[k + 1] = self.prompt_cum[k] + float(self.prompt_bin[k])
            self.gen_cum[k + 1] = self.gen_cum[k] + self.gen_now
        self.done = max(self.done, second)
        window = min(RATE_WINDOW_S, second)
        prompt = (self.prompt_cum[second] - self.prompt_cum[second - window]) / RATE_WINDOW_S
        gen = max(0.0, self.gen_cum[second] - self.gen_cum[second - window]) / RATE_WINDOW_S
        return prompt, gen


class Binned:
    """Rows of ``HIST_BIN_S`` seconds up to the horizon (the last row takes what comes after it)."""

    def __init__(self, nbins: int) -> None:
        self.rows = nbins // HIST_BIN_S + 2
        self.last = self.rows - 1

    def row(self, t: float) -> int:
        """The row that counts an observation at ``t``."""
        return min(int(t) // HIST_BIN_S, self.last)

    def window(self, t: float) -> slice:
        """The rows of the rate window that ends at ``t``."""
        end = min(int(t) // HIST_BIN_S, self.last)
        return slice(max(0, end - RATE_WINDOW_S // HIST_BIN_S), end)


class Histogram(Binned):
    """A latency histogram over time (vLLM's TTFT buckets unless others are given): per row, the count
    in each bucket and the sum (seconds)."""

    def __init__(self, nbins: int, bounds: Sequence[float] = TTFT_BUCKETS) -> None:
        super().__init__(nbins)
        self.bounds = tuple(bounds)
        self.counts = np.zeros((self.rows, len(self.bounds)), dtype=np.int64)
        self.sums = np.zeros(self.rows, dtype=np.float64)

    def observe(self, row: int, value: float) -> None:
        """One observation of ``value`` seconds in ``row``."""
        self.counts[row, bisect.bisect_left(self.bounds, value)] += 1
        self.sums[row] += value

    def observe_spread(self, start: float, end: float, value: float, count: int) -> None:
        """``count`` observations of ``value`` seconds made evenly from ``start`` to ``end``."""
        column = bisect.bisect_left(self.bounds, value)
        first, last = self.row(start), self.row(end)
        if first == last or end <= start:
            self.counts[last, column] += count
            self.sums[last] += value * count
            return
        left = count
        for row in range(first, last + 1):
            share = min(end, (row + 1) * HIST_BIN_S) - max(start, row * HIST_BIN_S)
            n = left if row == last else min(left, round(count * share / (end - start)))
            self.counts[row, column] += n
            self.sums[row] += value * n
            left -= n

    def buckets(self, window: slice) -> dict[float, float]:
        """The buckets' rates over ``window``, as ``sum(rate(..._bucket[1m]))``."""
        return cumulative_buckets(self.counts[window].sum(axis=0), RATE_WINDOW_S, self.bounds)

    def sum_rate(self, window: slice) -> float:
        """The rate of the histogram's ``_sum`` over ``window``."""
        return float(self.sums[window].sum()) / RATE_WINDOW_S


class PhaseTimes(Binned):
    """The phase-time histograms' ``_count`` and ``_sum``s per row, observed when a request ends."""

    def __init__(self, nbins: int) -> None:
        super().__init__(nbins)
        # Arrays, which the compiled loop (scaler.replay.fleet.kernel) counts into too.
        self.count = np.zeros(self.rows, dtype=np.int64)
        self.queue_sum = np.zeros(self.rows, dtype=np.float64)
        self.prefill_sum = np.zeros(self.rows, dtype=np.float64)

    def observe(self, end: float, queue_s: float, prefill_s: float) -> None:
        """A request that ended at ``end``, ``queue_s`` waiting to be scheduled, ``prefill_s`` from
        then to its first token."""
        row = self.row(end)
        self.count[row] += 1
        self.queue_sum[row] += queue_s
        self.prefill_sum[row] += prefill_s

    def rates(self, window: slice) -> dict[str, float]:
        """The ``_count`` and ``_sum`` rates over ``window``, per second of the rate window."""
        # Summed in order, one float after another (as a list sums), not pairwise as numpy sums.
        count = sum(self.count[window].tolist()) / RATE_WINDOW_S
        return {
            Reading.QUEUE_TIME_COUNT: count,
            Reading.QUEUE_TIME_SUM: sum(self.queue_sum[window].tolist()) / RATE_WINDOW_S,
            Reading.PREFILL_TIME_COUNT: count,
            Reading.PREFILL_TIME_SUM: sum(self.prefill_sum[window].tolist()) / RATE_WINDOW_S,
        }


class ColdStartWatch:
    """The cold start measured from a pool's pods (``scaler.decider.coldstart``), measured again only when
    a pod has become Ready since."""

    def __init__(self) -> None:
        self._key: tuple[int, object] | None = None
        self.cold_start = measure_cold_start(())

    def measure(self, ready_times: Sequence[PodTimes]) -> ColdStart:
        """The cold start the pods that became Ready show."""
        key = (len(ready_times), ready_times[-1] if ready_times else None)
        if key != self._key:
            self._key, self.cold_start = key, measure_cold_start(ready_times)
        return self.cold_start


class Counts(Protocol):
    """The pod counts a view of a fleet or a pool shows."""

    @property
    def pending(self) -> int:
        """Pods Pending."""

    @property
    def starting(self) -> int:
        """Pods scheduled, not yet Ready."""

    @property
    def ready(self) -> int:
        """Pods Ready."""

    @property
    def gpus_free(self) -> int:
        """GPUs no pod holds."""

    @property
    def replicas(self) -> int:
        """Pods the Deployment counts."""


def fleet_inputs(
    view: Counts,
    waiting: float,
    running: float,
    tokens: tuple[float, float],
    gpus_per_replica: int,
    cold: ColdStart,
    spec: int,
    ttft_sum: float,
    more: Mapping[str, float],
    kv: float | None,
) -> dict[str, float]:
    """The inputs the live source would read of a fleet or pool (``tokens``: its prompt and generated
    tokens per second; ``more``: the inputs only one replay reads), those that are unknown left out."""
    prompt, gen = tokens
    read: dict[str, float] = {
        Input.QUEUE_WAITING: waiting,
        Input.REQUESTS_RUNNING: running,
        Input.PROMPT_TOKENS_PER_S: prompt,
        Input.GENERATION_TOKENS_PER_S: gen,
        Input.CURRENT_REPLICAS: view.replicas,
        Input.READY_REPLICAS: view.ready,
        Input.GPU_SCHEDULABLE_REPLICAS: max(0, view.gpus_free) // gpus_per_replica,
        Input.PENDING_REPLICAS: view.pending,
        Input.STARTING_REPLICAS: view.starting,
        Input.COLD_START_SAMPLES: cold.samples,
        Input.DEPLOYMENT_REPLICAS: spec,
        Reading.TTFT_SUM: ttft_sum,
        **more,
    }
    for name, value in (
        (Input.KV_CACHE_USAGE, kv),
        (Input.COLD_START_SECONDS, cold.lead_p90_s),
        (Input.COLD_START_PENDING_SECONDS, cold.pending_p90_s),
    ):
        if value is not None:
            read[name] = value
    return read


@dataclass(frozen=True)
class Warmed:
    """A trace behind its warm-up copy (module docstring): the requests in simulation time, and how
    many of them (``skip``) are the warm-up's, not scored."""

    w: float  # the warm-up copy's length: simulation time = trace time + w
    arrivals: Sequence[float] | NDArray[np.float64]
    prompts: Sequence[float] | NDArray[np.float64]
    outputs: Sequence[float] | NDArray[np.float64]
    skip: int

    def watched(self, t: float) -> bool:
        """Whether the policies are consulted at ``t`` (module docstring): from a rate window into the
        warm-up, or from its end where it is shorter (none: from the first second)."""
        return t >= min(RATE_WINDOW_S, self.w)

    @classmethod
    def of(cls, trace: Trace, warmup_s: float, arrays: bool = False) -> Warmed:
        """``trace`` behind a copy of its first ``warmup_s`` seconds (none when 0 or empty): as lists
        (what a Python loop reads fastest), or with ``arrays`` as numpy arrays (what the compiled loop
        reads, ``scaler.replay.fleet.kernel``)."""
        pre = trace.window(0.0, warmup_s) if warmup_s > 0 else trace.window(0.0, 0.0)
        w = warmup_s if len(pre) else 0.0
        columns = (
            np.concatenate([pre.arrivals, trace.arrivals + w]),
            np.concatenate([pre.prompt_tokens, trace.prompt_tokens]),
            np.concatenate([pre.output_tokens, trace.output_tokens]),
        )
        arrivals, prompts, outputs = columns
        if arrays:  # whole tokens as floats: the same values
            f = np.float64
            return cls(w, arrivals.astype(f), prompts.astype(f), outputs.astype(f), len(pre))
        return cls(w, arrivals.tolist(), prompts.tolist(), outputs.tolist(), len(pre))

    def horizon(self, duration_s: float) -> float:
        """The simulation's end: the trace's ``duration_s`` up to a whole minute, after the warm-up."""
        return math.ceil(duration_s / 60.0) * 60.0 + self.w
