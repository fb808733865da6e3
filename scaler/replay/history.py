"""Prometheus history -> a rate trace with request sizes as measured (``scaler replay --prometheus``).

The reader (``scaler.sources.history.read_history``, through the engine preset's queries
and the ScaledObject's ``labelSelector``) returns a point every step at ``t_k = since + k *
step``, k = 0..N, each rate taken over the step before it: point k describes window
``[t_(k-1), t_k)``. Per window:

    served   = the TTFT histogram's count rate              first tokens (requests served) per s
    arrivals = max(0, served + (Q(t_k) - Q(t_(k-1))) / step)    Q: requests waiting (with a
                                                                 ``router``, its queue's too)
    prompt   = prompt tokens per s / served                 mean prompt tokens per request
    output   = generated tokens per s / served              mean output tokens per request

A request still waiting at the end of a window arrived in it and is served later, so the
queue's growth is added to the first tokens: the arrivals are the demand, not what the old
fleet managed to serve (the rule ``scaler.decider.demand`` applies live).

*Worked example* (step 60 s): in the minute to 10:01 the TTFT count rose by 120 (2.0/s),
the requests waiting went from 4 to 10, the prompt-token counter rose by 144,000 (2,400/s)
and the generated-token counter by 24,000 (400/s). Arrivals: 2.0 + 6/60 = 2.1/s (126
requests); 1,200 prompt and 200 output tokens per request.

A ScaledObject that reads no router may still have one in front of its servers: llm-d's
endpoint picker with flow control holds the backlog in its own queue while the servers' queue
levels off. Given a ``RouterFinder``, ``from_prometheus`` lists the router queues Prometheus
holds at the span's end, and when one holds requests for these servers
(``scaler.presets.holds_for``: its model is the one the labelSelector names) it reads that
queue too, so that what waited there counts as arrivals, and says so.

Windows without a request rate or token rates are gaps. Those before the first window with
data and after the last are cut; the others get rates and sizes interpolated linearly from
the windows either side, and so do the sizes of windows that served nothing. Each window's
requests are its count (one that happened, not a rate to draw around: ``trace.window_counts``)
at times drawn uniformly in it by ``trace.expand_rates``, each with the window's mean sizes.
What the history cannot say is listed in ``Measured.limits``.

The same points measure the replica the replayed fleet is made of (``scaler.replay.replica``:
the decider's capacity model warmed over them), in ``Measured.replica``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from scaler.config import TargetPolicy
from scaler.inputs import Input
from scaler.model import Observation
from scaler.presets import NO_ROUTER, PRESETS, RouterQueue, holds_for
from scaler.replay import replica as replica_module
from scaler.replay.progress import Progress
from scaler.replay.span import Span
from scaler.replay.trace import RateTrace, Trace, TraceError, expand_rates

# Always true of a trace read from a server's counters, whatever was read.
STANDING_LIMITS = (
    "requests a router, gateway or client dropped before they reached a server (rejected,"
    " rate-limited, timed out in front of it) are in no server counter: the trace holds the"
    " demand that reached the servers, so the replay cannot show what those requests would have met",
    "every request of a window gets the window's mean prompt and output tokens (the counters hold"
    " sums, not sizes): a long prompt inside a window is spread over its neighbours, so the"
    " replay's TTFT tails are kinder than the servers' were",
    "the replayed replica (prefill rate, batch slots, decode rate, physics, GPUs) is measured from"
    " the history where it can be, as the decider measures it, else --cluster's or the default (the"
    " replica: block says which, and how sure): compare the keda baseline's row with the measured"
    " line to see how well the model fits your servers",
)


class HistoryError(TraceError):
    """The history holds no usable request rate; the message says what was missing and why."""


class HistoryReader(Protocol):
    """Reads one target's history (``scaler.sources.history.read_history``): the points, and
    what could not be read (input name -> why); RuntimeError when nothing can be read."""

    def __call__(
        self, address: str, policy: TargetPolicy, start: datetime, end: datetime, step_s: float
    ) -> tuple[list[Observation], dict[str, str]]:
        """The points from ``start`` to ``end`` every ``step_s``, and the problems."""


@dataclass(frozen=True)
class Measured:
    """A rate trace read from history, with what ran then and what the history cannot say."""

    rates: RateTrace  # arrivals per window, with each window's tokens per request
    start: datetime  # wall time of the first window's start: the trace's second 0
    served: float  # first tokens counted in the windows with data
    arrivals: float  # requests in the rate trace (its windows' rates times the step)
    objective_s: float
    within_objective: float | None  # share of first tokens within the objective, from the histogram
    ttft_mean_s: float | None
    replica_seconds: float | None  # pods reporting, integrated over the windows that report them
    peak_pods: int | None
    gaps: tuple[tuple[float, float], ...]  # (start, length) in seconds of the trace, interpolated
    limits: tuple[str, ...]
    replica: replica_module.MeasuredReplica | None = None  # what the points say of one replica
    gap_arrivals: float = 0.0  # requests in the gaps' windows, at the rates interpolated there
    # Ready replicas per window of ``rates`` (pods reporting; interpolated over the gaps): the fleet as
    # it ran, which scaler.replay.ownfleet replays to check the replica model. None: not read.
    pods: tuple[float, ...] | None = None

    def trace(self, seed: int, rate_scale: float = 1.0) -> Trace:
        """The requests the replay runs: each window's count (scaled), at times drawn uniformly in it,
        with its measured sizes (``trace.window_counts``)."""
        trace = expand_rates(self.rates.scaled(rate_scale), None, seed, counted=True)
        if rate_scale == 1.0:
            return trace
        note = f"{trace.note}; rates scaled by {rate_scale:g}"
        return Trace(trace.arrivals, trace.prompt_tokens, trace.output_tokens, trace.source, note)

    def line(self, gpus_per_replica: int) -> str:
        """What ran, as Prometheus measured it, to set beside the table's rows; what a gap (a scrape
        outage) leaves out of the served count is said with it.

        *Example*: ``measured (what ran): 428,736 requests served (not counted: the 20 min of 1 gap
        without samples, about 26,598 requests at the rates either side, which the replay runs),
        ...``.
        """
        parts = [f"{self.served:,.0f} requests served"]
        if self.gaps:
            minutes = sum(length for _, length in self.gaps) / 60
            parts[0] += (
                f" (not counted: the {minutes:,.0f} min of {len(self.gaps)} gap(s) without samples, about"
                f" {self.gap_arrivals:,.0f} requests at the rates either side, which the replay runs)"
            )
        if self.within_objective is not None:
            parts.append(f"{100 * self.within_objective:.2f}% within {self.objective_s:g}s (TTFT histogram)")
        if self.ttft_mean_s is not None:
            parts.append(f"TTFT mean {self.ttft_mean_s:.2f}s")
        if self.replica_seconds is not None:
            hours = self.replica_seconds / 3600
            parts.append(
                f"{hours:,.2f} replica-hours of pods reporting ({hours * gpus_per_replica:,.2f} GPU-h at"
                f" {gpus_per_replica} per replica), peak {self.peak_pods}"
            )
        return "measured (what ran): " + ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """The figures and limits, for summary.json."""
        return {
            "start": self.start.isoformat(),
            "windows": len(self.rates.starts),
            "step_s": self.rates.window_s,
            "served": self.served,
            "arrivals": self.arrivals,
            "objective_s": self.objective_s,
            "within_objective": self.within_objective,
            "ttft_mean_s": self.ttft_mean_s,
            "replica_hours": None if self.replica_seconds is None else self.replica_seconds / 3600,
            "peak_pods": self.peak_pods,
            "gaps": [{"start_s": s, "length_s": n} for s, n in self.gaps],
            "gap_arrivals": self.gap_arrivals,
            "limits": list(self.limits),
            "points": None if self.replica is None else self.replica.points,
        }


def describe(policy: TargetPolicy) -> str:
    """The series a policy selects: its engine, labelSelector and role."""
    selector = f"labelSelector {policy.label_selector}" if policy.label_selector else "no labelSelector"
    role = f", role {policy.role}" if policy.role != "both" else ""
    return f"engine {policy.engine}, {selector}{role}"


class RouterFinder(Protocol):
    """Lists the router queue series a Prometheus holds at an instant
    (``scaler.sources.prometheus.router_queues``); RuntimeError when it cannot."""

    def __call__(self, address: str, at: datetime) -> Sequence[RouterQueue]:
        """One per router, pool and model."""


def from_prometheus(
    reader: HistoryReader,
    address: str,
    policy: TargetPolicy,
    span: Span,
    routers: RouterFinder | None = None,
    progress: Progress | None = None,
) -> Measured:
    """Read ``span`` of ``policy``'s series through ``reader`` and turn it into a rate trace, and
    measure the replica from it; with ``routers``, a router queue in front of the servers that
    ``policy`` reads none of is read too (module docstring). Each step is a stage of ``progress``."""
    if progress is not None:
        progress.stage(
            f"reading the history from Prometheus ({span.steps:,} windows of {span.step_s:g}s)", unit="step"
        )
    policy, found = _with_router_found(address, policy, span, routers)
    try:
        points, problems = reader(address, policy, span.start, span.end, span.step_s)
    except RuntimeError as exc:  # the reader's failure to read anything (PrometheusQueryError)
        raise HistoryError(str(exc)) from None
    measured = measure(points, problems, span, policy)
    if progress is not None:
        progress.stage(f"measuring the replica from {len(points):,} points", unit="step")
    replica = replica_module.measure(points, policy)
    return dataclasses.replace(measured, limits=(*found, *measured.limits), replica=replica)


def _with_router_found(
    address: str, policy: TargetPolicy, span: Span, routers: RouterFinder | None
) -> tuple[TargetPolicy, list[str]]:
    """``policy`` reading the router queue that holds requests for its servers, when it reads none
    and one is found; and the lines that say so (or that the routers could not be listed)."""
    if routers is None or policy.router != NO_ROUTER or policy.engine not in PRESETS:
        return policy, []
    try:
        queues = routers(address, span.end)
    except RuntimeError as exc:
        return policy, [
            f"the routers' queues could not be listed ({exc}): requests a router held in front of the"
            " servers are counted when a server took them"
        ]
    held = [q for q in queues if holds_for(policy.engine, policy.matchers, q)]
    if not held:
        return policy, []
    first = held[0]
    where = f"the {first.router} router" + (f" (pool {first.pool})" if first.pool else "")
    others = (
        f"; {len(held) - 1} other router queue(s) for these servers are not read" if len(held) > 1 else ""
    )
    written = f"router: {first.router}" + (f", inferencePool: {first.pool}" if first.pool else "")
    line = (
        f"{where} holds requests for these servers and the ScaledObject reads none of its queue: the"
        f" trace counts what waited there as arrivals{others}; the replayed fleet has a router only if"
        f" --cluster sets router: {first.router}, and without one the replayed ScaledObject sees the"
        " whole backlog in the servers' queue, which it would not have seen live (scaler doctor:"
        f" router-queue-unread; {written} in this scaler's trigger reads it)"
    )
    update = {"router": first.router, "inference_pool": first.pool or None}
    return policy.model_copy(update=update), [line]


def _column(values: Sequence[float | None]) -> NDArray[np.float64]:
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def _at(origin: datetime, seconds: float) -> str:
    return (origin + timedelta(seconds=seconds)).astimezone(UTC).strftime("%Y-%m-%dT%H:%MZ")


def _runs(mask: NDArray[np.bool_]) -> list[tuple[int, int]]:
    """(first index, length) of each run of True."""
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [(int(a), int(b - a)) for a, b in zip(starts, ends, strict=True)]


def _fill(values: NDArray[np.float64], known: NDArray[np.bool_]) -> NDArray[np.float64]:
    index = np.arange(len(values))
    return np.interp(index, index[known], values[known])


def _no_rate(
    problems: dict[str, str], points: Sequence[Observation], span: Span, policy: TargetPolicy
) -> str:
    where = f"{describe(policy)}, from {span.start.isoformat()} to {span.end.isoformat()}"
    if "ttft" in problems:
        why = f"the TTFT histogram, whose count is the request rate, could not be read: {problems['ttft']}"
    elif not points:
        why = "no token-rate series match"
    else:
        why = "the TTFT histogram's count (the request rate) returned no series that match"
    return (
        f"no request rate in the history for {where}: {why} (each rate is taken over one --step,"
        " so a step shorter than two scrape intervals reads nothing)"
    )


def _weighted(
    values: NDArray[np.float64], weights: NDArray[np.float64], mask: NDArray[np.bool_]
) -> float | None:
    total = weights[mask].sum()
    return float((weights[mask] * values[mask]).sum() / total) if total > 0 else None


def _coverage(
    span: Span, start: datetime, first: int, last: int, gaps: Sequence[tuple[float, float]]
) -> list[str]:
    """The limits of the span read: the edges cut, the gaps interpolated."""
    step, limits = span.step_s, []
    cut = [f"before {_at(span.start, first * step)}"] if first > 0 else []
    cut += [f"after {_at(span.start, (last + 1) * step)}"] if last < span.steps - 1 else []
    if cut:
        covers = f"{_at(start, 0)} to {_at(start, (last - first + 1) * step)}"
        limits.append(f"no data {' nor '.join(cut)}: the replay covers {covers} only")
    if gaps:
        longest = max(gaps, key=lambda g: g[1])
        limits.append(
            f"{len(gaps)} gap(s) without data, {sum(g[1] for g in gaps) / 60:,.0f} min in all"
            f" (longest {longest[1] / 60:,.0f} min from {_at(start, longest[0])}): replayed at rates and"
            " tokens per request interpolated from the windows either side"
        )
    return limits


def _unread(
    problems: dict[str, str], policy: TargetPolicy, queue: bool, router: bool, pods: bool
) -> list[str]:
    """The limits of what could not be read: the queue, the router's queue, the pods reporting."""
    limits = []
    if not queue:
        why = problems.get(Input.QUEUE_WAITING, "no queue series match")
        limits.append(
            f"requests waiting could not be read ({why}): arrivals are counted at their first token,"
            " so demand the fleet could not serve at once shows up late, when it was served"
        )
    if policy.router != "none" and not router:
        why = problems.get(Input.ROUTER_QUEUE_WAITING, "no router queue series match")
        limits.append(
            f"the {policy.router} router's queue could not be read ({why}): requests waiting there are"
            " counted when a server takes them, so the demand it held back shows up late"
        )
    if "replicas_reporting" in problems or not pods:
        why = problems.get("replicas_reporting", "no series")
        limits.append(f"pods reporting could not be read ({why}): no measured replica-hours")
    return limits


def measure(
    points: Sequence[Observation], problems: dict[str, str], span: Span, policy: TargetPolicy
) -> Measured:
    """The rate trace and the measured figures of ``points`` (module docstring); HistoryError
    when no window has a request rate and token rates."""
    if "engine" in problems:
        raise HistoryError(f"{problems['engine']}: the replay reads an engine preset's series")
    step, n = span.step_s, span.steps
    origin = span.start.timestamp()
    by_index = {round((p.now.timestamp() - origin) / step): p for p in points}
    at = [by_index.get(k) for k in range(n + 1)]
    queue = _column([None if p is None else p.queue_waiting for p in at])
    routed = _column([None if p is None else p.router_queue_waiting for p in at])
    router_read = policy.router != "none" and bool(np.isfinite(routed).any())
    if router_read:  # waiting in front of the servers is waiting too; no series there: none held
        queue = queue + np.where(np.isfinite(routed), routed, 0.0)
    window = at[1:]  # point k describes window k - 1

    def col(name: str) -> NDArray[np.float64]:
        return _column([None if p is None else getattr(p, name) for p in window])

    served, prompt, generated = (
        col(Input.REQUESTS_PER_S),
        col(Input.PROMPT_TOKENS_PER_S),
        col(Input.GENERATION_TOKENS_PER_S),
    )
    pods, over, mean = col(Input.READY_REPLICAS), col(Input.TTFT_OVER_OBJECTIVE), col(Input.TTFT_MEAN_SECONDS)
    known = np.isfinite(served) & np.isfinite(prompt) & np.isfinite(generated)
    if not known.any():
        raise HistoryError(_no_rate(problems, points, span, policy))
    arrivals = np.maximum(0.0, served + np.nan_to_num(np.diff(queue) / step, nan=0.0))
    sized = known & (served > 0)
    if not sized.any():
        raise HistoryError(f"no request was served in the history for {describe(policy)}: nothing to replay")
    with np.errstate(divide="ignore", invalid="ignore"):
        prompt_per, output_per = prompt / served, generated / served

    first, last = int(np.argmax(known)), n - 1 - int(np.argmax(known[::-1]))
    keep = slice(first, last + 1)
    start = span.start + timedelta(seconds=first * step)
    rates = RateTrace(
        np.arange(last - first + 1, dtype=np.float64) * step,
        _fill(arrivals[keep], known[keep]),
        step,
        f"Prometheus history ({describe(policy)})",
        _fill(prompt_per[keep], sized[keep]),
        _fill(output_per[keep], sized[keep]),
    )
    gaps = tuple((a * step, length * step) for a, length in _runs(~known[keep]))
    pods_known = np.isfinite(pods)
    limits = [
        *STANDING_LIMITS,
        *_coverage(span, start, first, last, gaps),
        *_unread(problems, policy, bool(np.isfinite(queue).any()), router_read, bool(pods_known.any())),
    ]
    return Measured(
        rates=rates,
        start=start,
        served=float(served[known].sum() * step),
        arrivals=float(rates.rates.sum() * step),
        objective_s=policy.ttft_objective_seconds,
        within_objective=_weighted(1 - over, served, known & np.isfinite(over)),
        ttft_mean_s=_weighted(mean, served, known & np.isfinite(mean)),
        replica_seconds=float(pods[pods_known].sum() * step) if pods_known.any() else None,
        peak_pods=int(pods[pods_known].max()) if pods_known.any() else None,
        gaps=gaps,
        limits=tuple(limits),
        gap_arrivals=float(rates.rates[~known[keep]].sum() * step),
        pods=tuple(_fill(pods[keep], pods_known[keep]).tolist()) if pods_known[keep].any() else None,
    )
