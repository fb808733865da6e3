"""The fluid physics' requests, compiled: the replay's inner loop where numba is installed.

Between two control ticks nothing feeds back from the policy into the fleet, so the requests that
arrive between them are served in one call: routed, scheduled and counted into the series the
fleet exports (the TTFT histogram, the phase times, the token counters), exactly as
``scaler.replay.fleet.cluster.Cluster.assign`` and ``scaler.replay.replay.ControlLoop.serve`` do one at a
time in Python. ``serve_batch`` is that loop; numba (``pip install 'llm-gpu-scaler[fast]'``)
compiles it, and ``COMPILED`` says whether it did. Without numba the replay runs the Python
classes, with the same figures (``tests/test_replay_kernel.py`` replays both and compares every
figure and series); a day of a 30-pod fleet at 15 requests/s then takes ``scaler replay`` about
5 times as long (``benchmarks/replay_speed.py``, BENCHMARKS.md). The compiled functions are cached
beside this module (``__pycache__``, numba's ``cache=True``): the first replay after an install
compiles them, in a few seconds.

What the Python classes keep per pod in heaps and deques is kept here in arrays indexed by pod
(``FluidState``): each pod's batch slots as a min-heap of the times they free, when its prefill
queue frees, its prefill busy fraction (shared physics), the requests it holds and how many of
them wait. Two heaps over the whole fleet hold the times requests end and stop waiting; popping
them up to an instant (``expire``) gives every pod's counts at that instant, which is what the
Python pods' ``outstanding`` and ``waiting`` compute from their own heaps.

Served here: the fluid physics (``shared``, ``separate``), either waiting model, the
``least-outstanding`` and ``round-robin`` dispatch, no router. The rest (``step``, ``random``
dispatch, ``router: llm-d``) runs in Python.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
from numpy.typing import NDArray

from scaler.replay.fleet.cluster import FLUID, ClusterConfig, ClusterError, FleetView, fleet_view
from scaler.replay.fleet.series import HIST_BIN_S, Histogram, PhaseTimes, TokenCounters
from scaler.sim.pods import Pod, PodLifecycle, PodState

F = TypeVar("F", bound=Callable[..., Any])

try:  # an optional extra: the replay runs without it, slower
    import numba
except ImportError:  # pragma: no cover - the dev install has numba; tests/test_replay_kernel.py runs both
    numba = None  # type: ignore[assignment]

COMPILED = numba is not None
SHARE_CAP = 0.9  # the share of a pod's GPU prefill may take from decoding (as Cluster.assign caps it)
# serve_batch's outcomes: every request served, a pod event due first (the caller advances the pods),
# no pod to serve a request (the caller raises ClusterError).
DONE, EVENT, NO_POD = 0, 1, 2


def jit(function: F) -> F:
    """``function`` compiled by numba (cached beside the module, or in the user's cache directory
    where the module's is read-only), or as it is without numba. Where no directory can hold the
    cache (numba's RuntimeError "no locator available"), it is compiled afresh by each process."""
    if numba is None:  # pragma: no cover - see COMPILED
        return function
    try:
        return cast("F", numba.njit(cache=True, nogil=True)(function))
    except RuntimeError:
        return cast("F", numba.njit(nogil=True)(function))


@jit
def _heap_push(times: NDArray[np.float64], pods: NDArray[np.int64], n: int, t: float, pod: int) -> int:
    """Push (``t``, ``pod``) on the min-heap of the first ``n`` entries; the new size."""
    i = n
    times[i] = t
    pods[i] = pod
    while i > 0:
        parent = (i - 1) >> 1
        if times[parent] <= t:
            break
        times[i] = times[parent]
        pods[i] = pods[parent]
        i = parent
    times[i] = t
    pods[i] = pod
    return n + 1


@jit
def _heap_pop(times: NDArray[np.float64], pods: NDArray[np.int64], n: int) -> int:
    """Remove the smallest of the min-heap of the first ``n`` entries; the new size."""
    n -= 1
    t = times[n]
    pod = pods[n]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and times[child + 1] < times[child]:
            child += 1
        if times[child] >= t:
            break
        times[i] = times[child]
        pods[i] = pods[child]
        i = child
    if n > 0:
        times[i] = t
        pods[i] = pod
    return n


@jit
def _expire(
    now: float,
    times: NDArray[np.float64],
    pods: NDArray[np.int64],
    size: NDArray[np.int64],
    counts: NDArray[np.int64],
) -> None:
    """Pop every entry at or before ``now``, one fewer in its pod's count each."""
    n = size[0]
    while n > 0 and times[0] <= now:
        counts[pods[0]] -= 1
        n = _heap_pop(times, pods, n)
    size[0] = n


@jit
def _replace_first_slot(row: NDArray[np.float64], end: float) -> None:
    """The pod's first-free slot is taken until ``end`` (``end`` not earlier than it): sift down."""
    n = row.shape[0]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and row[child + 1] < row[child]:
            child += 1
        if row[child] >= end:
            break
        row[i] = row[child]
        i = child
    row[i] = end


@jit
def expire(
    now: float,
    ends_t: NDArray[np.float64],
    ends_p: NDArray[np.int64],
    ends_n: NDArray[np.int64],
    starts_t: NDArray[np.float64],
    starts_p: NDArray[np.int64],
    starts_n: NDArray[np.int64],
    pods_i: NDArray[np.int64],
) -> None:
    """Every pod's counts at ``now``: the requests that ended and the ones first scheduled by then
    leave them (``pods_i``: ``serve_batch``'s)."""
    _expire(now, ends_t, ends_p, ends_n, pods_i[:, 0])
    _expire(now, starts_t, starts_p, starts_n, pods_i[:, 1])


@jit
def serve_batch(  # noqa: PLR0912, PLR0915 - one compiled loop takes the fleet's arrays as they are
    lo: int,
    hi: int,
    arrivals: NDArray[np.float64],
    prompts: NDArray[np.float64],
    outputs: NDArray[np.float64],
    next_event: float,
    ready: NDArray[np.int64],
    fallback: int,
    least: bool,
    turn: int,
    shared: bool,
    waits_for_prefill: bool,
    prefill_rate: float,
    decode_rate: float,
    tau: float,
    slots: NDArray[np.float64],
    pods_f: NDArray[np.float64],
    pods_i: NDArray[np.int64],
    ends_t: NDArray[np.float64],
    ends_p: NDArray[np.int64],
    ends_n: NDArray[np.int64],
    starts_t: NDArray[np.float64],
    starts_p: NDArray[np.int64],
    starts_n: NDArray[np.int64],
    user_ttft: NDArray[np.float64],
    ttft_counts: NDArray[np.int64],
    ttft_sums: NDArray[np.float64],
    ttft_bounds: NDArray[np.float64],
    phases: bool,
    phase_count: NDArray[np.int64],
    phase_queue: NDArray[np.float64],
    phase_prefill: NDArray[np.float64],
    bin_s: int,
    last_row: int,
    prompt_bin: NDArray[np.float64],
    gen_diff: NDArray[np.float64],
    nbins: int,
    done: int,
) -> tuple[int, int, int]:
    """Serve requests ``lo`` to ``hi`` (module docstring); returns the first not served, the
    round-robin turn, and the outcome (``DONE``, ``EVENT`` when a request arrives at or after
    ``next_event``, ``NO_POD``).

    ``pods_f`` columns: prefill queue free at, prefill busy fraction, its time, prefill seconds, Ready
    at, last end; ``pods_i`` columns: outstanding, waiting, requests assigned. ``ready``: the Ready pods
    in the fleet's order; ``fallback``: the pod a request waits for while none is Ready (-1: none)."""
    outstanding = pods_i[:, 0]
    waiting = pods_i[:, 1]
    n_ready = ready.shape[0]
    i = lo
    while i < hi:
        now = arrivals[i]
        if now >= next_event:
            return i, turn, EVENT
        _expire(now, ends_t, ends_p, ends_n, outstanding)
        _expire(now, starts_t, starts_p, starts_n, waiting)
        if n_ready > 0:
            if least:  # the fewest outstanding, then the earliest free prefill, then the first
                pod = -1
                best_count = 1 << 62
                best_free = math.inf
                for k in range(n_ready):
                    candidate = ready[k]
                    count = outstanding[candidate]
                    free = pods_f[candidate, 0]
                    if count < best_count or (count == best_count and free < best_free):
                        pod, best_count, best_free = candidate, count, free
            else:
                pod = ready[turn % n_ready]
                turn += 1
        elif fallback >= 0:
            pod = fallback
        else:
            return i, turn, NO_POD
        prompt = prompts[i]
        output = outputs[i]
        # Cluster.assign: FIFO over the pod's slots, then its prefill queue.
        slot_free = slots[pod, 0]
        ready_at = pods_f[pod, 4]
        start = max(now, pods_f[pod, 0], ready_at, slot_free)
        prefill = prompt / prefill_rate
        pods_f[pod, 3] += prefill
        first = start + prefill
        if shared:
            dt = start - pods_f[pod, 2]
            if dt > 0:
                pods_f[pod, 1] *= math.exp(-dt / tau)
                pods_f[pod, 2] = start
            pods_f[pod, 1] += prefill / tau
            share = min(SHARE_CAP, pods_f[pod, 1])
            end = first + max(0.0, output - 1) / (decode_rate * (1.0 - share))
        else:
            end = first + max(0.0, output - 1) / decode_rate
        _replace_first_slot(slots[pod], end)
        ends_n[0] = _heap_push(ends_t, ends_p, ends_n[0], end, pod)
        outstanding[pod] += 1
        pods_i[pod, 2] += 1
        pods_f[pod, 5] = max(pods_f[pod, 5], end)
        scheduled = start if waits_for_prefill else max(now, ready_at, slot_free)
        if scheduled > now:
            starts_n[0] = _heap_push(starts_t, starts_p, starts_n[0], scheduled, pod)
            waiting[pod] += 1
        pods_f[pod, 0] = first
        # ControlLoop.serve: the phase times, the TTFT, the token counters.
        if phases:
            row = min(int(end) // bin_s, last_row)
            phase_count[row] += 1
            phase_queue[row] += scheduled - now
            phase_prefill[row] += first - scheduled
        user_ttft[i] = first - now
        value = first - now
        row = min(int(first) // bin_s, last_row)
        column = np.searchsorted(ttft_bounds, value)
        ttft_counts[row, column] += 1
        ttft_sums[row] += value
        second = int(first)
        if second < nbins - 1:
            prompt_bin[second] += prompt
        tokens = output - 1
        begin = max(first, float(done))
        if tokens > 0:
            stop = end
            if stop <= begin:
                stop = begin + 1.0
            rate = tokens / (stop - begin)
            if int(begin) < nbins - 1:
                gen_diff[int(begin)] += rate
                if int(stop) < nbins - 1:
                    gen_diff[int(stop)] -= rate
        i += 1
    return i, turn, DONE


# ---- the fleet whose requests the loop serves ----------------------------------------------------

F_FREE, F_LOAD, F_LOAD_T, F_PREFILL_S, F_READY_AT, F_LAST_END = range(6)  # pods_f's columns
I_OUTSTANDING, I_WAITING, I_ASSIGNED = range(3)  # pods_i's columns


class FluidState:
    """Every pod's serving state in arrays (module docstring), grown as pods and requests come."""

    def __init__(self, slots: int, pods: int = 16, heap: int = 1024) -> None:
        self.slot_count = slots
        self.slots = np.zeros((pods, slots), dtype=np.float64)
        self.pods_f = np.zeros((pods, 6), dtype=np.float64)
        self.pods_f[:, F_READY_AT] = math.inf
        self.pods_i = np.zeros((pods, 3), dtype=np.int64)
        self.ends_t = np.zeros(heap, dtype=np.float64)
        self.ends_p = np.zeros(heap, dtype=np.int64)
        self.ends_n = np.zeros(1, dtype=np.int64)
        self.starts_t = np.zeros(heap, dtype=np.float64)
        self.starts_p = np.zeros(heap, dtype=np.int64)
        self.starts_n = np.zeros(1, dtype=np.int64)
        self.expired_to = -math.inf

    def hold(self, pod: int) -> None:
        """Room for pod ``pod``."""
        size = len(self.pods_f)
        if pod < size:
            return
        grown = max(2 * size, pod + 1)
        self.slots = np.concatenate([self.slots, np.zeros((grown - size, self.slot_count))])
        more_f = np.zeros((grown - size, 6))
        more_f[:, F_READY_AT] = math.inf
        self.pods_f = np.concatenate([self.pods_f, more_f])
        self.pods_i = np.concatenate([self.pods_i, np.zeros((grown - size, 3), dtype=np.int64)])

    def room(self, requests: int) -> None:
        """Room in both heaps for ``requests`` more entries."""
        need = int(max(self.ends_n[0], self.starts_n[0])) + requests + 1
        size = len(self.ends_t)
        if need <= size:
            return
        grown = max(2 * size, need)
        for name in ("ends_t", "starts_t"):
            setattr(self, name, np.concatenate([getattr(self, name), np.zeros(grown - size)]))
        for name in ("ends_p", "starts_p"):
            old = getattr(self, name)
            setattr(self, name, np.concatenate([old, np.zeros(grown - size, dtype=np.int64)]))

    def expire(self, now: float) -> None:
        """The pods' counts at ``now`` (time only moves forward)."""
        if now > self.expired_to:
            expire(
                now,
                self.ends_t,
                self.ends_p,
                self.ends_n,
                self.starts_t,
                self.starts_p,
                self.starts_n,
                self.pods_i,
            )
            self.expired_to = now


class FastPod(Pod):
    """One pod whose serving state is a row of ``FluidState``'s arrays (``ServingPod``'s reads)."""

    __slots__ = ("fluid",)

    def __init__(self, index: int, now: float, fluid: FluidState) -> None:
        fluid.hold(index)
        self.fluid = fluid
        super().__init__(index, now)

    @property
    def ready_at(self) -> float:
        """When the pod is (or was) Ready: the compiled loop reads it from the arrays."""
        return float(self.fluid.pods_f[self.index, F_READY_AT])

    @ready_at.setter
    def ready_at(self, value: float) -> None:
        self.fluid.pods_f[self.index, F_READY_AT] = value

    @property
    def prefill_s(self) -> float:
        """Seconds of prefill assigned to the pod so far (its prefill-time histogram's _sum)."""
        return float(self.fluid.pods_f[self.index, F_PREFILL_S])

    @property
    def free_at(self) -> float:
        """When the pod's prefill queue frees."""
        return float(self.fluid.pods_f[self.index, F_FREE])

    def holds_requests(self) -> bool:
        """Whether requests were routed here that may not have finished. Asked of a starting pod only
        (``scaler.sim.pods``), whose requests no one counts as they end (``ServingPod`` pops its ends only
        while it is Ready): whether it was given any."""
        return bool(self.fluid.pods_i[self.index, I_ASSIGNED])

    def last_request_end(self, now: float) -> float:
        """When the last request routed here ends (``now`` if they all have)."""
        return max(now, float(self.fluid.pods_f[self.index, F_LAST_END]))

    def outstanding(self, now: float) -> int:
        """Requests assigned to the pod and not finished by ``now``."""
        self.fluid.expire(now)
        return int(self.fluid.pods_i[self.index, I_OUTSTANDING])

    def waiting(self, now: float) -> int:
        """Requests assigned to the pod not yet first scheduled at ``now``."""
        self.fluid.expire(now)
        return int(self.fluid.pods_i[self.index, I_WAITING])


class FastCluster(PodLifecycle[FastPod]):
    """``scaler.replay.fleet.cluster.Cluster`` whose requests ``serve`` serves a batch at a time, compiled
    (module docstring). The same pods, the same schedule, the same series."""

    def __init__(self, config: ClusterConfig, initial_ready: int, now: float = 0.0) -> None:
        if not supports(config):
            raise ValueError(f"the compiled loop does not serve {config.describe()}")
        self.config = config
        self.fluid = fluid = FluidState(config.decode_slots)
        super().__init__(
            lambda index, t: FastPod(index, t, fluid),
            config.gpus_free,
            config.gpus_per_replica,
            config.cold_start_s,
            initial_ready,
            now,
        )
        self._least = config.dispatch == "least-outstanding"
        self._turn = 0
        self._read_at = -1  # ``changes`` when the pods' indices below were read
        self._ready = self._serving = np.zeros(0, dtype=np.int64)

    def _indices(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """The Ready pods' indices in the fleet's order, and the serving ones' (Ready, then draining)."""
        if self.changes != self._read_at:
            self._read_at = self.changes
            self._ready = np.asarray([p.index for p in self.ready], dtype=np.int64)
            self._serving = np.asarray([p.index for p in self.ready + self.draining], dtype=np.int64)
        return self._ready, self._serving

    def serve(self, lo: int, hi: int, series: Series) -> None:
        """Serve requests ``lo`` to ``hi`` (all before the next control tick), counting them into
        ``series``; ClusterError when a request has no pod to go to."""
        fluid, config = self.fluid, self.config
        fluid.room(hi - lo)
        arrivals = series.arrivals
        i = lo
        while i < hi:
            if arrivals[i] >= self._next_event:
                self.advance(float(arrivals[i]))
            fallback = -1
            if not self.ready:  # a request waits for the first pod to be Ready (``first_to_be_ready``)
                starting = [p for p in self.active if p.state is PodState.STARTING]
                fallback = min(starting, key=lambda p: p.ready_at).index if starting else -1
            i, self._turn, outcome = serve_batch(
                i,
                hi,
                arrivals,
                series.prompts,
                series.outputs,
                self._next_event,
                self._indices()[0],
                fallback,
                self._least,
                self._turn,
                config.physics == "shared",
                config.waiting == "prefill",
                config.prefill_tokens_per_s,
                config.decode_tokens_per_s_per_seq,
                config.busy_time_constant_s,
                fluid.slots,
                fluid.pods_f,
                fluid.pods_i,
                fluid.ends_t,
                fluid.ends_p,
                fluid.ends_n,
                fluid.starts_t,
                fluid.starts_p,
                fluid.starts_n,
                series.user_ttft,
                series.ttft.counts,
                series.ttft.sums,
                series.bounds,
                series.phases is not None,
                series.phase_count,
                series.phase_queue,
                series.phase_prefill,
                HIST_BIN_S,
                series.ttft.last,
                series.tokens.prompt_bin,
                series.tokens.gen_diff,
                series.tokens.nbins,
                series.tokens.done,
            )
            if outcome == NO_POD:
                raise ClusterError("no pod can ever serve: the fleet has no Ready or starting replica")
        if hi > lo:
            fluid.expired_to = max(fluid.expired_to, float(arrivals[hi - 1]))

    def view(self, now: float) -> FleetView:
        """Advance to ``now`` and return what Kubernetes and Prometheus would show of the fleet."""
        self.advance(now)
        self.fluid.expire(now)
        counts = self.fluid.pods_i[self._indices()[1]]
        waiting = int(counts[:, I_WAITING].sum())
        running = int(counts[:, I_OUTSTANDING].sum()) - waiting
        return fleet_view(self, self.config.gpus_free, now, waiting, running)

    def ready_loads(self, now: float) -> list[int]:
        """Outstanding requests per Ready pod (for tests and max/avg queries)."""
        return [p.outstanding(now) for p in self.ready]


class Series:
    """What ``FastCluster.serve`` counts each request into: the requests, their TTFT as the user saw
    it, and the fleet's histograms and token counters (``scaler.replay.fleet.series``)."""

    def __init__(
        self,
        arrivals: NDArray[np.float64],
        prompts: NDArray[np.float64],
        outputs: NDArray[np.float64],
        user_ttft: NDArray[np.float64],
        ttft: Histogram,
        phases: PhaseTimes | None,
        tokens: TokenCounters,
    ) -> None:
        self.arrivals, self.prompts, self.outputs = arrivals, prompts, outputs
        self.user_ttft, self.ttft, self.phases, self.tokens = user_ttft, ttft, phases, tokens
        self.bounds = np.asarray(ttft.bounds, dtype=np.float64)
        empty_i, empty_f = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.float64)
        self.phase_count = phases.count if phases is not None else empty_i
        self.phase_queue = phases.queue_sum if phases is not None else empty_f
        self.phase_prefill = phases.prefill_sum if phases is not None else empty_f


def supports(config: ClusterConfig) -> bool:
    """Whether the compiled loop serves this fleet (module docstring)."""
    return config.physics in FLUID and config.router == "none" and config.dispatch != "random"
