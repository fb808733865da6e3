"""Prometheus history: the warm-up of new targets, in batches, and one target's history for the replay.

A new target learns from the last ``history_seconds`` of its series before its first decision
(``Engine.warm``). The warm-up reads them the way the instant reads do
(``scaler.sources.prometheus``): one range query per input family (``WARM_FAMILIES``) for every
target that shares a Prometheus and an engine, aggregated by the label names their
``labelSelector``s use, each target then summing the series its matchers select. The answers are
kept (``History``) while new targets keep coming, so targets that arrive apart (a restart: KEDA
asks about each ScaledObject at its own moment of its polling interval) share them too:

    a batch whose labels the kept answers cover, at the same refresh time:   no query
    the same, k refresh steps later:     one range query per family for those k steps
    labels the kept answers lack, or none kept:   one range query per family over the hour,
                                          by the labels of both (so the answers cover them all)

*Example*: a restart of the scaler with 1,000 vLLM ScaledObjects over 10 models, whose first
calls spread over KEDA's 30 s polling interval (two or three 15 s refresh times): one range
query per family over the hour (10: token rates, queue, running, KV cache, TTFT and ITL
histograms and sums, pods reporting) for the first batch, and 10 one-step range queries at each
later refresh time: 30 in all, as for one ScaledObject, against 10 per batch of new targets before.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import threading
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from scaler.config import TargetPolicy
from scaler.inputs import Input, Key, Reading
from scaler.matchers import LabelMatcher, matches_all
from scaler.model import Observation
from scaler.presets import ROUTERS, Combine, Family, Preset, preset_for
from scaler.readings import Readings
from scaler.sources.prometheus import (
    Labels,
    PrometheusClient,
    PrometheusQueryError,
    PrometheusReader,
    TargetQuery,
    group_labels,
    selector_for,
)

# The families the warm-up reads: what Engine.warm learns from (the token rates, the queue, the
# running requests, the KV cache, the TTFT and inter-token latency histograms with their sums, the
# phase times) and the pods reporting, which stand for the Ready replicas Prometheus does not hold.
WARM_FAMILIES: tuple[Key, ...] = (
    Input.PROMPT_TOKENS_PER_S,
    Input.GENERATION_TOKENS_PER_S,
    Input.QUEUE_WAITING,
    Input.REQUESTS_RUNNING,
    Input.KV_CACHE_USAGE,
    Reading.TTFT,
    Reading.TTFT_SUM,
    Reading.ITL,
    Reading.ITL_SUM,
    Reading.QUEUE_TIME_SUM,
    Reading.QUEUE_TIME_COUNT,
    Reading.PREFILL_TIME_SUM,
    Reading.PREFILL_TIME_COUNT,
    Input.REQUESTS_RUNNING_MAX,
    Input.KV_CACHE_USAGE_MAX,
    Reading.PREFILL_TIME_SUM_MAX,
    Reading.REPLICAS_REPORTING,
)
# The token rates: a point is made of them, so their failure fails the warm-up; any other family's
# failure leaves it out of the points.
REQUIRED = (Input.PROMPT_TOKENS_PER_S, Input.GENERATION_TOKENS_PER_S)
# How long the answers are kept after the refresh time a warm-up last read them at. A restart's
# first calls arrive within KEDA's pollingInterval (30 s by default) and, for the HPA's own calls,
# its 15 s sync: two minutes holds every first call of a restart with room to spare, and the answers
# (an hour of a few hundred series) are not held for the process's lifetime.
KEEP_S = 120.0
ENGINE = "engine"  # read_history's problem when the engine has no preset
# Prometheus refuses a range query of more than 11,000 points per series; longer spans go in chunks.
MAX_RANGE_POINTS = 10_000

Points = dict[float, float]  # timestamp -> value
Buckets = dict[float, dict[float, float]]  # timestamp -> le -> summed bucket rate


@dataclass
class _Answers:
    """One (address, engine)'s range answers: per family, each series' points, on one step grid."""

    by: tuple[str, ...]
    step: float
    start: float
    end: float
    series: dict[Key, dict[frozenset[tuple[str, str]], tuple[Labels, Points]]] = field(default_factory=dict)

    def covers(self, by: Sequence[str], step: float, start: float, end: float) -> bool:
        """Whether extending these answers to ``end`` gives the span ``start``..``end`` for ``by``."""
        steps = (end - self.end) / step
        return (
            set(by) <= set(self.by)
            and step == self.step
            and start >= self.start - 1e-6
            and steps >= -1e-6
            and abs(steps - round(steps)) < 1e-6
        )

    def add(self, family: Key, rows: Sequence[tuple[Labels, list[tuple[float, float]]]]) -> None:
        """Merge one range answer of ``family`` (new series and new points)."""
        kept = self.series.setdefault(family, {})
        for labels, values in rows:
            kept.setdefault(frozenset(labels.items()), (labels, {}))[1].update(values)

    def extend(self, later: _Answers) -> None:
        """Merge the answers of a later span (``later.end`` becomes the end)."""
        for family, series in later.series.items():
            kept = self.series.setdefault(family, {})
            for key, (labels, points) in series.items():
                kept.setdefault(key, (labels, {}))[1].update(points)
        self.end = later.end

    def trim(self, start: float) -> None:
        """Drop the points before ``start``."""
        self.start = start
        for kept in self.series.values():
            for _, points in kept.values():
                for ts in [ts for ts in points if ts < start - 1e-6]:
                    del points[ts]

    def rows(self, family: Key) -> list[tuple[Labels, Points]]:
        """``family``'s series, if it was read."""
        return list(self.series.get(family, {}).values())


class History:
    """The warm-up's range reads for new targets, shared across batches (module docstring)."""

    def __init__(
        self, prometheus: PrometheusReader, history_seconds: float = 3600.0, step_s: float = 15.0
    ) -> None:
        self.prometheus = prometheus
        self.history_seconds = history_seconds
        self.step_s = step_s
        self._answers: dict[tuple[str, str], _Answers] = {}
        # Warm-ups run in worker threads, several at once in a restart: one at a time per group, so
        # that a batch that arrives while another reads waits for its answers instead of reading too.
        # (``forget`` runs outside them: it drops whole entries, which a reader holds on to.)
        self._locks: dict[tuple[str, str], threading.Lock] = {}

    def history(
        self, targets: Sequence[TargetQuery], now: datetime, step_s: float | None = None
    ) -> dict[Any, list[Observation]]:
        """Past Observations per target (oldest first) over ``history_seconds`` up to ``now``.

        The range ends at ``now`` and steps back by ``step_s`` (default ``step_s`` of the
        constructor), so with ``now`` on the refresh grid the points are the ones a running replica
        saw. PrometheusQueryError when the token rates cannot be read.
        """
        step = step_s or self.step_s
        end = now.timestamp()
        start = end - step * int(self.history_seconds // step)
        self.forget(now)
        out: dict[Any, list[Observation]] = {t.key: [] for t in targets}
        for (address, engine), members in _groups(targets).items():
            preset = preset_for(engine)
            if preset is None:
                continue
            selectors = {t.key: t.policy.series_matchers for t in members}
            by = group_labels(selectors.values())
            # One warm-up at a time per group; the split too, as a later one extends the answers.
            with self._locks.setdefault((address, preset.name), threading.Lock()):
                answers = self._read(address, preset, by, start, end, step)
                out.update(_points(preset, answers, members, selectors))
        return out

    @property
    def kept(self) -> int:
        """How many (address, engine) groups' answers are kept."""
        return len(self._answers)

    def forget(self, now: datetime) -> None:
        """Drop the answers no warm-up has read for ``KEEP_S`` before ``now`` (the live source calls it
        at every refresh, so answers are not kept once new targets stop coming)."""
        for key in [k for k, a in self._answers.items() if a.end < now.timestamp() - KEEP_S]:
            del self._answers[key]

    def _read(
        self, address: str, preset: Preset, by: tuple[str, ...], start: float, end: float, step: float
    ) -> _Answers:
        """The group's answers over ``start``..``end``: kept ones, extended, or read anew."""
        key = (address, preset.name)
        kept = self._answers.get(key)
        if kept is not None and kept.covers(by, step, start, end):
            if end > kept.end + 1e-6:
                try:
                    fresh = read_range(self.prometheus, address, preset, kept.by, kept.end + step, end, step)
                except PrometheusQueryError:
                    del self._answers[key]
                    raise
                if set(fresh.series) != set(kept.series):  # a family failed: read it all again next time
                    del self._answers[key]
                kept.extend(fresh)
            kept.trim(start)
            return kept
        if kept is not None and kept.step == step:
            by = tuple(sorted(set(by) | set(kept.by)))
        problems: dict[str, str] = {}
        answers = read_range(self.prometheus, address, preset, by, start, end, step, problems)
        if problems:
            self._answers.pop(key, None)
        else:
            self._answers[key] = answers
        return answers


def _groups(targets: Sequence[TargetQuery]) -> dict[tuple[str, str], list[TargetQuery]]:
    groups: dict[tuple[str, str], list[TargetQuery]] = defaultdict(list)
    for t in targets:
        groups[(t.address, t.policy.engine)].append(t)
    return groups


def read_range(
    reader: PrometheusReader,
    address: str,
    preset: Preset,
    by: tuple[str, ...],
    start: float,
    end: float,
    step: float,
    problems: dict[str, str] | None = None,
) -> _Answers:
    """One range query per warm-up family of ``preset`` from ``start`` to ``end``, grouped by ``by``.

    A family whose query fails is left out and noted in ``problems`` (input name -> the error);
    the token rates' failure raises PrometheusQueryError.
    """
    client: PrometheusClient = reader.client(address)
    answers = _Answers(by, step, start, end)
    since, until = datetime.fromtimestamp(start, tz=UTC), datetime.fromtimestamp(end, tz=UTC)
    for name in WARM_FAMILIES:
        family = preset.family(name)
        if family is None:
            continue
        try:
            rows = client.range(family.render(by, reader.rate_window), since, until, step)
        except PrometheusQueryError as exc:
            if name in REQUIRED:
                raise
            if problems is not None:
                problems[name] = str(exc)
            continue
        answers.add(name, rows)
    return answers


def _values(
    family: Family, rows: Sequence[tuple[Labels, Points]], members: Sequence[TargetQuery], selectors: Any
) -> dict[Any, Points]:
    """Per target, per time, the sum (for Combine.MEAN the mean, for Combine.MAX the largest) of the
    series it selects, in seconds."""
    out: dict[Any, Points] = {t.key: {} for t in members}
    counts: dict[Any, dict[float, int]] = {t.key: defaultdict(int) for t in members}
    for labels, points in rows:
        for t in members:
            if matches_all(tuple(selectors[t.key]), labels):
                acc = out[t.key]
                for ts, raw in points.items():
                    v = family.value_of(labels, raw)
                    if math.isfinite(v):
                        if family.combine is Combine.MAX:
                            acc[ts] = max(acc.get(ts, v), v)
                        else:
                            acc[ts] = acc.get(ts, 0.0) + v
                        counts[t.key][ts] += 1
    for key, acc in out.items():
        for ts in acc:
            if family.combine is Combine.MEAN:
                acc[ts] /= counts[key][ts]
            acc[ts] *= family.le_scale
    return out


def _buckets(
    family: Family, rows: Sequence[tuple[Labels, Points]], members: Sequence[TargetQuery], selectors: Any
) -> dict[Any, Buckets]:
    """Per target, per time, the histogram's summed bucket rates, bounds in seconds."""
    out: dict[Any, Buckets] = {t.key: defaultdict(dict) for t in members}
    for labels, points in rows:
        try:
            le = float(labels.get("le", "nan")) * family.le_scale
        except ValueError:
            continue
        for t in members:
            if matches_all(tuple(selectors[t.key]), labels):
                acc = out[t.key]
                for ts, v in points.items():
                    if math.isfinite(v):
                        acc[ts][le] = acc[ts].get(le, 0.0) + v
    return out


def _points(
    preset: Preset,
    answers: _Answers,
    members: Sequence[TargetQuery],
    selectors: Mapping[Any, Sequence[LabelMatcher]],
) -> dict[Any, list[Observation]]:
    """Each member's Observations from the group's answers."""
    # Split once per distinct selector: the members that have it read what its first one reads.
    firsts: dict[tuple[LabelMatcher, ...], TargetQuery] = {}
    for t in members:
        firsts.setdefault(tuple(selectors[t.key]), t)
    distinct = list(firsts.values())
    values: dict[Key, dict[Any, Points]] = {}
    buckets: dict[Key, dict[Any, Buckets]] = {}
    for name in answers.series:
        family = preset.family(name)
        assert family is not None
        if family.combine is Combine.HISTOGRAM:
            split = _buckets(family, answers.rows(name), distinct, selectors)
            buckets[name] = {t.key: split[firsts[tuple(selectors[t.key])].key] for t in members}
        else:
            split2 = _values(family, answers.rows(name), distinct, selectors)
            values[name] = {t.key: split2[firsts[tuple(selectors[t.key])].key] for t in members}
    # Targets with the same selector and objectives have the same points: built once, shared (frozen).
    built: dict[tuple[Any, ...], list[Observation]] = {}
    out: dict[Any, list[Observation]] = {}
    for t in members:
        p = t.policy
        same = (
            tuple(selectors[t.key]),
            p.ttft_objective_seconds,
            p.itl_objective_seconds,
            p.ttft_objective_percentile,
        )
        if same not in built:
            built[same] = _target_points(
                p,
                {name: per_target[t.key] for name, per_target in values.items()},
                {name: per_target[t.key] for name, per_target in buckets.items()},
            )
        out[t.key] = built[same]
    return out


def _target_points(
    policy: TargetPolicy, series: Mapping[Key, Points], buckets: Mapping[Key, Buckets]
) -> list[Observation]:
    """One target's Observations, a point per time its token rates were read at."""
    times = set(series.get(Input.PROMPT_TOKENS_PER_S, {})) | set(
        series.get(Input.GENERATION_TOKENS_PER_S, {})
    )
    points = []
    for ts in sorted(times):
        read = Readings({name: points[ts] for name, points in series.items() if ts in points})
        for name, per_time in buckets.items():
            hist = per_time.get(ts)
            if hist and isinstance(name, Reading):
                read.histograms[name] = hist
            else:
                read.missing[name] = "no histogram in the history at this step"
        points.append(read.observation(datetime.fromtimestamp(ts, tz=UTC), policy))
    return points


def read_history(
    address: str,
    policy: TargetPolicy,
    start: datetime,
    end: datetime,
    step_s: float,
    timeout_s: float = 30.0,
) -> tuple[list[Observation], dict[str, str]]:
    """One target's history from ``start`` to ``end``, a point every ``step_s`` (``scaler replay
    --prometheus``): the warm-up's Observations, with every rate taken over one step, so that each
    point counts what happened in the step before it. Read in chunks of at most
    ``MAX_RANGE_POINTS`` points. With a ``router``, its queue too (``router_queue_waiting``: requests
    that arrived and wait in front of the servers). Returns the points (oldest first) and what
    could not be read (input name -> why); PrometheusQueryError when the token rates cannot be read
    at all.
    """
    # A PromQL duration is a whole number of a unit: milliseconds take any step.
    reader = PrometheusReader(address, rate_window=f"{round(step_s * 1000)}ms", timeout_s=timeout_s)
    target = TargetQuery("history", policy, address.rstrip("/"))
    problems: dict[str, str] = {}
    preset = preset_for(policy.engine)
    if preset is None:
        problems[ENGINE] = f"engine {policy.engine} has no query preset"
        return [], problems
    for name in WARM_FAMILIES:
        if preset.family(name) is None:
            problems[name] = f"engine {policy.engine} exports no metric for it"
    router = ROUTERS[policy.router].family(Input.ROUTER_QUEUE_WAITING) if policy.router != "none" else None
    # The servers' points are built as for a target with no router: the router's queue is read here
    # after them (_with_router_queue), so it is not absent from them, which scaler.readings would
    # read as a router not seen to run, and the servers' waiting as unknown with it.
    servers = TargetQuery(
        target.key, policy.model_copy(update={"router": "none", "inference_pool": None}), target.address
    )
    selectors = {target.key: policy.series_matchers}
    by = group_labels(selectors.values())
    points: dict[datetime, Observation] = {}
    chunk_start = start
    while chunk_start <= end:
        chunk_end = min(end, chunk_start + timedelta(seconds=step_s * (MAX_RANGE_POINTS - 1)))
        answers = read_range(
            reader,
            target.address,
            preset,
            by,
            chunk_start.timestamp(),
            chunk_end.timestamp(),
            step_s,
            problems,
        )
        chunk = _points(preset, answers, [servers], selectors)[target.key]
        if router is not None:
            chunk = _with_router_queue(
                reader, target, router, chunk, (chunk_start, chunk_end, step_s), problems
            )
        for point in chunk:
            points[point.now] = point
        chunk_start = chunk_end + timedelta(seconds=step_s)
    return [points[t] for t in sorted(points)], problems


# The scrape interval is read as samples per window of this length (ten scrapes of a minute), in
# up to SCRAPE_LOOKS windows spread over the span.
SCRAPE_WINDOW_S = 600.0
SCRAPE_LOOKS = 50


def scrape_interval(
    address: str, policy: TargetPolicy, start: datetime, end: datetime, timeout_s: float = 30.0
) -> float | None:
    """How often Prometheus scraped ``policy``'s servers from ``start`` to ``end``, in seconds: over up
    to ``SCRAPE_LOOKS`` windows of ``SCRAPE_WINDOW_S`` spread across the span and every series of the
    preset's prompt-token counter the labelSelector selects, the window's length over the median
    count of samples in it (a series with fewer than two, a pod that came or went, left out). One
    range query of ``count_over_time``; the labelSelector is applied to the series returned, as
    every read here applies it.

    *Example*: 20 pods scraped every 30 s hold 20 samples in each 10-minute window: 30.0.

    None when the engine has no preset or no selected series has two samples in a window (the
    read that follows says why); PrometheusQueryError when the query fails.
    """
    preset = preset_for(policy.engine)
    family = preset.family(Input.PROMPT_TOKENS_PER_S) if preset is not None else None
    if family is None:
        return None
    client = PrometheusClient(address.rstrip("/"), timeout_s)
    step = max(SCRAPE_WINDOW_S, (end - start).total_seconds() / SCRAPE_LOOKS)
    matchers = policy.series_matchers
    for selector in family.selectors():  # the current name first, then the older ones
        inside = ", ".join(str(m) for m in selector.matchers)
        series = f"{selector.metric}{{{inside}}}" if inside else selector.metric
        query = f"count_over_time({series}[{SCRAPE_WINDOW_S:g}s])"
        counts = [
            value
            for labels, values in client.range(query, start, end, step)
            if matches_all(matchers, labels)
            for _, value in values
            if value >= 2
        ]
        if counts:
            return SCRAPE_WINDOW_S / statistics.median(counts)
    return None


def _with_router_queue(
    reader: PrometheusReader,
    target: TargetQuery,
    family: Family,
    points: list[Observation],
    span: tuple[datetime, datetime, float],
    problems: dict[str, str],
) -> list[Observation]:
    """``points`` with the router's queue at each (its pool's or model's series, as live)."""
    selector = selector_for(target.policy, family)
    start, end, step = span
    try:
        rows = reader.client(target.address).range(
            family.render(group_labels([selector]), reader.rate_window), start, end, step
        )
    except PrometheusQueryError as exc:
        problems[Input.ROUTER_QUEUE_WAITING] = str(exc)
        return points
    series = [(labels, dict(values)) for labels, values in rows]
    summed = _values(family, series, [target], {target.key: selector})[target.key]
    queue = {round(t, 3): v for t, v in summed.items()}
    return [
        dataclasses.replace(p, router_queue_waiting=queue.get(round(p.now.timestamp(), 3))) for p in points
    ]
