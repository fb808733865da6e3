"""What Prometheus holds of each target's series, for the inert reasons (``scaler.inert``): the reads.

Beside the instant reads (``scaler.sources.prometheus``), each refresh asks, at the same time ``at``:

* per Prometheus address and preset (an engine, or a router in front), in one query for every target
  that reads it: each series group's newest sample, for every metric of the preset's families, grouped
  by the labels the targets' selectors use and ``job``, ``instance``, ``namespace``, ``pod``
  (``timestamps``)::

      label_replace(max by (<labels>) (timestamp(vllm:num_requests_waiting)),
                    "scaler_metric", "vllm:num_requests_waiting", "__name__", ".*") or ...

  ``timestamp()`` of a series is its sample's time, so a sample 3 minutes old that the instant reads
  still return (Prometheus' 5-minute lookback) is seen to be 3 minutes old. A histogram is read by its
  ``_count``, one series per group rather than one per bucket;
* for the metrics some target has no such series of (a fault, or an engine that does not export
  one), the same over ``lookback_s`` (an hour) through a subquery, one step a minute: their last
  sample, and the label values that do exist (for a did-you-mean)::

      label_replace(max by (<labels>) (max_over_time(timestamp(<metric>)[3600s:60s])), ...) or ...

* per address, in one query: ``max by (job, instance, namespace, pod) (up)`` and the routers'
  per-endpoint series (``Preset.endpoint_series``, llm-d's in-flight gauges) by namespace and
  endpoint, each tagged with its metric as above; and every
  ``intervals_keep_s`` (5 minutes), or at once while a target is down, the targets API
  (``/api/v1/targets``) for each target's scrape interval and last error. A Prometheus without
  that API (Thanos, Mimir) gives no intervals: the default of ``scaler.inert`` applies.

A query that fails leaves its part out (no reason is made up from it): the instant reads carry the
error into the inputs' reasons already. A Prometheus whose reads failed at ``at`` is not probed at
all (``PrometheusReader.failed_at``): a slow one would hold the refresh for every timeout again.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scaler.inert import EndpointSeries, FamilySeries, Layout, PresetSeries, ScrapeTarget, SeriesGroup
from scaler.matchers import matches_all
from scaler.presets import ROUTERS, Family, Preset, preset_for
from scaler.sources.prometheus import (
    PrometheusClient,
    PrometheusQueryError,
    PrometheusReader,
    Sample,
    TargetQuery,
    group_labels,
    selector_for,
)

METRIC_LABEL = "scaler_metric"  # the label the probe copies each series' metric name into
TARGET_LABELS = ("job", "instance", "namespace", "pod")  # what joins a series to its scrape target and pod
LOOKBACK_S = 3600.0  # how far back a series' last sample is looked for, s
RESOLUTION_S = (
    60.0  # the lookback subquery's step, s: within Prometheus' 5-minute lookback, so no sample is missed
)
INTERVALS_KEEP_S = 300.0  # how long the targets API's scrape intervals are kept, s (targets change seldom)
EMPTY_KEEP_S = (
    10.0  # how long an empty answer of it is kept, s: a Prometheus just started lists its targets soon
)
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def probe_metric(family: Family) -> tuple[str, ...]:
    """The metrics the probe reads for ``family``, current first: a histogram by its ``_count``."""
    out = []
    for selector in family.selectors():
        name = f"{selector.base}_count" if selector.type == "histogram" else selector.metric
        if _METRIC_NAME.fullmatch(name):
            out.append(name)
    return tuple(dict.fromkeys(out))


def duration_s(text: str) -> float | None:
    """A Prometheus duration (``15s``, ``1m30s``, ``500ms``) in seconds; None when it is not one."""
    parts = _DURATION.findall(text or "")
    if not parts or "".join(f"{n}{u}" for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def timestamps(metrics: Iterable[str], by: Sequence[str], window: str | None = None) -> str:
    """One query for each group's newest sample of every metric, each tagged with its metric's name.

    ``timestamp()`` gives a sample's own time only of a plain series selector (of anything else, the
    evaluation time), and drops the metric's name: so one selector per metric, its groups' times,
    the name put back as ``scaler_metric``, the metrics joined by ``or``. With ``window`` (a
    subquery's ``[range:step]``) the newest within it.
    """
    parts = []
    for metric in sorted(set(metrics)):
        inner = f"timestamp({metric})" if window is None else f"max_over_time(timestamp({metric}){window})"
        grouped = f"max by ({', '.join(by)}) ({inner})"
        parts.append(f'label_replace({grouped}, "{METRIC_LABEL}", "{metric}", "__name__", ".*")')
    return " or ".join(parts)


def _groups(samples: Iterable[Sample]) -> dict[str, dict[frozenset[tuple[str, str]], SeriesGroup]]:
    """Per metric, each group's newest sample (the value is a Unix time)."""
    out: dict[str, dict[frozenset[tuple[str, str]], SeriesGroup]] = defaultdict(dict)
    for s in samples:
        metric = s.labels.get(METRIC_LABEL)
        if metric is None:
            continue  # not an answer to the probe's query as Prometheus gives it
        labels = {k: v for k, v in s.labels.items() if k != METRIC_LABEL}
        key = frozenset(labels.items())
        kept = out[metric].get(key)
        if kept is None or s.value > kept.last_sample:
            out[metric][key] = SeriesGroup(metric, labels, s.value)
    return out


@dataclass
class _Scrapes:
    """One address's scrape targets, as the targets API said when last asked."""

    read_at: float
    intervals: dict[tuple[str, str], float] = field(default_factory=dict)
    errors: dict[tuple[str, str], str] = field(default_factory=dict)


class SeriesProbe:
    """The probe's reads for many targets at one refresh (module docstring); blocking."""

    def __init__(
        self,
        reader: PrometheusReader,
        lookback_s: float = LOOKBACK_S,
        resolution_s: float = RESOLUTION_S,
        intervals_keep_s: float = INTERVALS_KEEP_S,
    ) -> None:
        self.reader = reader
        self.lookback_s = lookback_s
        self.resolution_s = resolution_s
        self.intervals_keep_s = intervals_keep_s
        self._scrapes: dict[str, _Scrapes] = {}

    def layouts(self, targets: Sequence[TargetQuery], at: datetime) -> dict[Any, Layout]:
        """Each target's Layout at ``at`` (targets of ``engine: custom`` have none: no preset to read).

        A Prometheus whose reads failed at ``at`` is not asked more: the reads' errors already say
        why its inputs are unknown, and a slow one would hold the refresh for every timeout again.
        """
        targets = [t for t in targets if not self.reader.failed_at(t.address, at)]
        by_group: dict[tuple[str, str, str], list[TargetQuery]] = defaultdict(list)
        for t in targets:
            for preset in _presets(t):
                by_group[(t.address, preset.kind, preset.name)].append(t)
        read: dict[tuple[str, str, str], dict[str, tuple[SeriesGroup, ...]] | None] = {}
        for key, members in by_group.items():
            preset = next(p for p in _presets(members[0]) if (p.kind, p.name) == key[1:])
            read[key] = self._series(self.reader.client(key[0]), preset, members, at)
        # Only where some preset's series were read: a Prometheus that answered none needs no more.
        addresses = {key[0] for key, series in read.items() if series is not None}
        scrape_state = {a: self._scrape_state(self.reader.client(a), at) for a in addresses}
        up = {a: state[0] for a, state in scrape_state.items()}
        endpoints = {a: state[1] for a, state in scrape_state.items()}
        # A target down: ask the targets API again for its error (the kept answer is from before).
        intervals = {
            a: self._intervals(self.reader.client(a), at, any(s.value != 1 for s in up[a] or ()))
            for a in addresses
        }
        scraped: dict[str, tuple[ScrapeTarget, ...] | None] = {}
        for a in addresses:
            answer = up[a]
            scraped[a] = (
                None
                if answer is None
                else tuple(
                    ScrapeTarget(s.labels, s.value == 1, intervals[a].errors.get(_key(s.labels), ""))
                    for s in answer
                )
            )
        # Targets that pick the same series share one Layout (a thousand ScaledObjects of ten models
        # make ten), so what is made of it (scaler.inert) can be made once for them too.
        shared: dict[tuple[Any, ...], Layout | None] = {}
        out: dict[Any, Layout] = {}
        for t in targets:
            if t.address not in addresses:
                continue  # none of its presets' series could be read
            picks = tuple(
                (
                    preset.kind,
                    preset.name,
                    tuple(selector_for(t.policy, f, t.namespace) for f in preset.families),
                )
                for preset in _presets(t)
            )
            alike = (t.address, picks)
            if alike not in shared:
                shared[alike] = self._layout(
                    t, read, scraped[t.address], intervals[t.address], endpoints[t.address]
                )
            layout = shared[alike]
            if layout is not None:
                out[t.key] = layout
        return out

    def _layout(
        self,
        t: TargetQuery,
        read: Mapping[tuple[str, str, str], Mapping[str, tuple[SeriesGroup, ...]] | None],
        scraped: tuple[ScrapeTarget, ...] | None,
        scrapes: _Scrapes,
        endpoints: tuple[EndpointSeries, ...] | None,
    ) -> Layout | None:
        """``t``'s Layout from the group's reads; None when none of its presets could be read."""
        presets = []
        for preset in _presets(t):
            series = read[(t.address, preset.kind, preset.name)]
            if series is None:
                continue  # its query failed: the instant reads say why
            presets.append(_preset_series(preset, t, series))
        if not presets:
            return None
        return Layout(tuple(presets), self.lookback_s, scraped, scrapes.intervals, endpoints)

    def _series(
        self, client: PrometheusClient, preset: Preset, members: Sequence[TargetQuery], at: datetime
    ) -> dict[str, tuple[SeriesGroup, ...]] | None:
        """Per metric of ``preset``, every group of its series: fresh, and within the lookback where a
        member has no fresh series of one of its families."""
        metrics = sorted({m for f in preset.families for m in probe_metric(f)})
        if not metrics:
            return {}
        matchers = [selector_for(t.policy, f, t.namespace) for t in members for f in preset.families]
        by = sorted(set(group_labels(matchers)) | set(TARGET_LABELS))
        try:
            answer = client.instant(timestamps(metrics, by), at)
        except PrometheusQueryError:
            return None
        fresh = _groups(answer)
        if answer and not fresh:
            return None  # series, but none tagged as asked: a query API that is not Prometheus' own
        lacking: set[str] = set()
        picks = {
            (f.field, selector_for(t.policy, f, t.namespace)): f for t in members for f in preset.families
        }
        for (_, picked), family in picks.items():
            wanted = probe_metric(family)
            candidates = (g for m in wanted for g in fresh.get(m, {}).values())
            if not any(matches_all(picked, g.labels) for g in candidates):
                lacking.update(wanted)
        if lacking:
            window = f"[{self.lookback_s:.0f}s:{self.resolution_s:.0f}s]"
            try:
                older = _groups(client.instant(timestamps(lacking, by, window), at))
            except PrometheusQueryError:
                older = {}
            for metric, groups in older.items():
                for key, group in groups.items():
                    kept = fresh[metric].get(key)
                    if kept is None or group.last_sample > kept.last_sample:
                        fresh[metric][key] = group
        return {metric: tuple(groups.values()) for metric, groups in fresh.items()}

    def _scrape_state(
        self, client: PrometheusClient, at: datetime
    ) -> tuple[list[Sample] | None, tuple[EndpointSeries, ...] | None]:
        """In one query: ``up`` by scrape target and pod, and the routers' per-endpoint series by
        namespace and endpoint (each tagged with its metric); (None, None) when it fails."""
        up_grouped = f"max by ({', '.join(TARGET_LABELS)}) (up)"
        parts = [f'label_replace({up_grouped}, "{METRIC_LABEL}", "up", "__name__", ".*")']
        labels: dict[str, str] = {}
        for router in ROUTERS.values():
            for metric in router.endpoint_series:
                if _METRIC_NAME.fullmatch(metric):
                    labels[metric] = router.endpoint_label
                    grouped = f"max by (namespace, {router.endpoint_label}) ({metric})"
                    parts.append(f'label_replace({grouped}, "{METRIC_LABEL}", "{metric}", "__name__", ".*")')
        try:
            samples = client.instant(" or ".join(parts), at)
        except PrometheusQueryError:
            return None, None
        up = [
            Sample({k: v for k, v in s.labels.items() if k != METRIC_LABEL}, s.value)
            for s in samples
            if s.labels.get(METRIC_LABEL) == "up"
        ]
        endpoints = tuple(
            EndpointSeries(
                s.labels[METRIC_LABEL],
                s.labels.get("namespace", ""),
                s.labels[labels[s.labels[METRIC_LABEL]]],
            )
            for s in samples
            if s.labels.get(METRIC_LABEL) in labels and s.labels.get(labels[s.labels[METRIC_LABEL]])
        )
        return up, endpoints

    def _intervals(self, client: PrometheusClient, at: datetime, again: bool = False) -> _Scrapes:
        """The address's scrape intervals and last errors, from the targets API, kept a while (asked
        ``again`` when a target is down, for its error)."""
        now = at.timestamp()
        kept = self._scrapes.get(client.address)
        if kept is not None and not again and 0 <= now - kept.read_at < self.intervals_keep_s:
            return kept
        scrapes = _Scrapes(now)
        try:
            listed = client.targets()
        except PrometheusQueryError:
            listed = []  # no targets API here: the default interval applies until it is asked again
        else:
            if not listed:  # none discovered yet (a Prometheus just started): asked again soon
                scrapes.read_at = now - self.intervals_keep_s + EMPTY_KEEP_S
        for target in listed:
            labels = target.get("labels") or {}
            key = _key(labels)
            interval = duration_s(str(target.get("scrapeInterval", "")))
            if interval:
                scrapes.intervals[key] = interval
            if target.get("lastError"):
                scrapes.errors[key] = str(target["lastError"])
        self._scrapes[client.address] = scrapes
        return scrapes


def _key(labels: Mapping[str, str]) -> tuple[str, str]:
    """A scrape target's (job, instance)."""
    return str(labels.get("job", "")), str(labels.get("instance", ""))


def _presets(t: TargetQuery) -> list[Preset]:
    """The presets a target reads: its engine's, then its router's (either absent when it has none)."""
    engine = preset_for(t.policy.engine)
    router = ROUTERS.get(t.policy.router) if t.policy.router != "none" else None
    return [p for p in (engine, router) if p is not None]


def _preset_series(
    preset: Preset, t: TargetQuery, series: Mapping[str, tuple[SeriesGroup, ...]]
) -> PresetSeries:
    """``preset``'s families as ``t`` reads them: its matchers, the groups of each family's metrics."""
    families = []
    for family in preset.families:
        metrics = probe_metric(family)
        groups = tuple(g for m in metrics for g in series.get(m, ()))
        families.append(
            FamilySeries(family.field, metrics, selector_for(t.policy, family, t.namespace), groups)
        )
    return PresetSeries(preset.name, str(preset.kind), tuple(families), preset.per_pod)
