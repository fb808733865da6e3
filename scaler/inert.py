"""Is the autoscaler doing anything? Why a target cannot act, named, from what the sources read. Pure.

An autoscaler can look healthy (KEDA shows the ScaledObject Ready and Active, a target is served at
every poll) and do nothing. Each refresh looks for these, for every target:

===============  ===================================================================================
``no_series``    the labelSelector matches no series of the engine (none of its families, fresh or
                 within the lookback) while the Deployment has Ready pods: the label values that do
                 exist are named, with a did-you-mean (``difflib``, case ignored)
``stale``        its series exist but the newest the selector picks is older than
                 ``max(2 x scrape interval, STALE_FLOOR_S)``: "stale", never "no series match"
``not_scraped``  the scrape targets those series came from are down (``up == 0``), or Ready pods
                 have no series at all: no scrape target for them, or theirs is down
``stranded``     a router's per-endpoint series (llm-d's ``llm_d_epp_inflight_requests`` and
                 ``llm_d_epp_inflight_tokens``) name an endpoint that is no live pod: the EPP does
                 not delete them when a pod goes. Never read as demand: this scaler reads them only as
                 a sign that the EPP runs (``scaler.readings``: its absent queue is then empty)
``held``         for ``HELD_REFRESHES`` refreshes the target equalled the current replicas while the
                 offered demand moved beyond the HPA's tolerance since the hold began
                 (``scaler.decider.held``)
``not_landed``   the landing monitor's gap has a reason the HPA's own rules do not explain
                 (``scaler.decider.landing.ALERTING``) and has lasted longer than one cold start
                 (``scaler.decider.landing.inert``)
===============  ===================================================================================

The first four come from what Prometheus holds (``Layout``, read at the edge by
``scaler.sources.probe``) and the pods Kubernetes lists (``Pods``): ``layout_reasons``. The
families they concern are then unknown, the reason their why (``Found.unknown``), so a stale or
missing input holds the last complete demand (``last_known``) and is said by name. The last two
come from the decisions themselves: ``scaler.decider.held.InertMonitor``, one per target, which the
engine runs on each decision. A stale or missing input never lowers the target; with these it is also said.

*Example* (no_series): ``labelSelector: model_name="llama-3-8b"`` where the servers write
``model_name="meta-llama/Llama-3-8B"``: "labelSelector matches no series of engine vllm; model_name
has meta-llama/Llama-3-8B (did you mean meta-llama/Llama-3-8B?)".
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scaler.inputs import Input, Reading
from scaler.matchers import LabelMatcher, MatchOp, matches_all
from scaler.model import Inert, InertReason
from scaler.readings import ITL_INPUTS, TTFT_INPUTS

STALE_SCRAPES = 2  # scrape intervals without a sample after which a series is stale
# The shortest staleness, s: a scrape takes up to its timeout and its samples a moment to be
# stored, so with sub-second scrapes two intervals would call a healthy series stale.
STALE_FLOOR_S = 5.0
# The scrape interval assumed where the targets API does not list the series' target (federation,
# remote write, backfilled history), s: Prometheus' own default global scrape_interval, the longest
# in common use, so that a healthy series is not called stale.
DEFAULT_SCRAPE_INTERVAL_S = 60.0
# Label values named per label in a no_series reason: the first ones, sorted, then how many more.
VALUES_SHOWN = 5
# How close a label value must be to the one written to be suggested (difflib's ratio, case ignored):
# "llama-3-8b" to "meta-llama/Llama-3-8B" is 0.65.
SUGGEST_CUTOFF = 0.6
# llm-d names the endpoint of a data-parallel rank after its pod: "<pod>-rank-<n>".
_RANK = re.compile(r"-rank-\d+$")

# The inputs each family's field gives (a Reading derives several; scaler.readings).
_INPUTS_OF: Mapping[str, tuple[str, ...]] = {
    Reading.TTFT: TTFT_INPUTS,
    Reading.TTFT_SUM: (Input.TTFT_MEAN_SECONDS,),
    Reading.ITL: ITL_INPUTS,
    Reading.ITL_SUM: (Input.ITL_MEAN_SECONDS,),
    Reading.ROUTER_STALE_ENDPOINTS: (Input.ROUTER_SATURATION,),
    Reading.ROUTER_TTFT: (),
    Reading.REPLICAS_REPORTING: (),
}


def inputs_of(field_: str) -> tuple[str, ...]:
    """The observation inputs a family's field gives: the input itself, or what a reading derives."""
    return _INPUTS_OF.get(field_, (field_,))


# ---- what the edge reads -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SeriesGroup:
    """A group of one metric's series as the probe read them: the labels it keeps (the selectors'
    names, ``job``, ``instance``, ``namespace``, ``pod``) and the Unix time of its newest sample."""

    metric: str
    labels: Mapping[str, str]
    last_sample: float


@dataclass(frozen=True, slots=True)
class FamilySeries:
    """One family of a preset as the target reads it: its field, its metrics (current name first),
    the target's matchers for it, and every group of those metrics Prometheus holds (fresh or within
    the lookback)."""

    field: str
    metrics: tuple[str, ...]
    matchers: tuple[LabelMatcher, ...]
    groups: tuple[SeriesGroup, ...]


@dataclass(frozen=True, slots=True)
class PresetSeries:
    """A preset's families for one target: the engine's, or the router's in front of it."""

    preset: str
    kind: str  # "engine" or "router"
    families: tuple[FamilySeries, ...]
    per_pod: bool = True  # each server pod exports its series (False: one frontend, the fleet's sums)


@dataclass(frozen=True, slots=True)
class ScrapeTarget:
    """One ``up`` series: its labels (``job``, ``instance`` and, through Kubernetes discovery,
    ``namespace`` and ``pod``), whether the last scrape succeeded, and why not (the targets API's
    ``lastError``, where it answers)."""

    labels: Mapping[str, str]
    up: bool
    error: str = ""


@dataclass(frozen=True, slots=True)
class EndpointSeries:
    """A router series kept per endpoint (``Preset.endpoint_series``): its metric, namespace, endpoint."""

    metric: str
    namespace: str
    endpoint: str


@dataclass(frozen=True)
class Layout:
    """What Prometheus holds for one target at one refresh (``scaler.sources.probe``)."""

    presets: tuple[PresetSeries, ...]
    lookback_s: float  # how far back the groups' last samples were looked for
    targets: tuple[ScrapeTarget, ...] | None = None  # None: ``up`` was not read
    # (job, instance) -> seconds between scrapes, where the targets API says.
    intervals: Mapping[tuple[str, str], float] = field(default_factory=dict)
    endpoints: tuple[EndpointSeries, ...] | None = None  # None: not read


@dataclass(frozen=True, slots=True)
class Pods:
    """What Kubernetes lists for a target: its Deployment, that Deployment's Ready pods, and every
    live pod of the namespace (the endpoints a router may name)."""

    namespace: str
    deployment: str
    ready: tuple[str, ...]
    live: frozenset[str]


@dataclass(frozen=True)
class Found:
    """The reasons a target is inert, and the families (by field) they leave unknown, with why."""

    reasons: tuple[Inert, ...] = ()
    unknown: Mapping[str, str] = field(default_factory=dict)


# ---- from the layout: no_series, stale, not_scraped, stranded ------------------------------


def _ago(seconds: float) -> str:
    """A duration in words: 45s, 8m, 2h 5m."""
    if seconds < 120:
        return f"{seconds:.0f}s"
    minutes = round(seconds / 60)
    return f"{minutes}m" if minutes < 120 else f"{minutes // 60}h {minutes % 60}m"


def _target(labels: Mapping[str, str]) -> tuple[str, str]:
    return labels.get("job", ""), labels.get("instance", "")


def _interval(layout: Layout, groups: Iterable[SeriesGroup]) -> float:
    """The scrape interval of the targets ``groups`` came from (the shortest), else the default."""
    known = [layout.intervals[t] for t in {_target(g.labels) for g in groups} if t in layout.intervals]
    return min(known) if known else DEFAULT_SCRAPE_INTERVAL_S


def stale_after(interval_s: float) -> float:
    """Seconds without a sample after which a series scraped every ``interval_s`` is stale."""
    return max(STALE_SCRAPES * interval_s, STALE_FLOOR_S)


def _values(families: Sequence[FamilySeries]) -> dict[str, list[str]]:
    """Per label a selector names, the values the families' series have, most series first."""
    counts: dict[str, dict[str, int]] = {}
    for family in families:
        for matcher in family.matchers:
            seen = counts.setdefault(matcher.name, {})
            for group in family.groups:
                value = group.labels.get(matcher.name)
                if value is not None:
                    seen[value] = seen.get(value, 0) + 1
    return {name: sorted(seen, key=lambda v: (-seen[v], v)) for name, seen in counts.items()}


def _suggest(matcher: LabelMatcher, values: Sequence[str]) -> str | None:
    """The existing value closest to what an ``=`` matcher wrote, when one is close enough."""
    if matcher.op is not MatchOp.EQ or not values:
        return None
    lowered = {v.lower(): v for v in values}
    found = difflib.get_close_matches(matcher.value.lower(), list(lowered), n=1, cutoff=SUGGEST_CUTOFF)
    return lowered[found[0]] if found else None


def _no_series_text(preset: PresetSeries, pods: Pods | None) -> str:
    """What the selector misses: the matchers, the values that exist per label, a did-you-mean."""
    matchers = {m for f in preset.families for m in f.matchers}
    written = ", ".join(sorted(str(m) for m in matchers)) or "(no matchers)"
    values = _values(preset.families)
    parts = []
    for matcher in sorted(matchers, key=lambda m: m.name):
        have = values.get(matcher.name, [])
        if not have:
            parts.append(f"no series has a {matcher.name} label")
            continue
        shown = ", ".join(have[:VALUES_SHOWN]) + (
            f" and {len(have) - VALUES_SHOWN} more" if len(have) > VALUES_SHOWN else ""
        )
        guess = _suggest(matcher, have)
        parts.append(
            f"{matcher.name} has {shown}" + (f' (did you mean {matcher.name}="{guess}"?)' if guess else "")
        )
    ready = (
        " while Kubernetes has no view of its pods"
        if pods is None
        else f" while Deployment {pods.namespace}/{pods.deployment} has {len(pods.ready)} Ready"
        f" pod{'s' if len(pods.ready) != 1 else ''}"
    )
    return f"{written} matches no series of {preset.kind} {preset.preset}{ready}; " + "; ".join(parts)


def _fields(families: Iterable[FamilySeries]) -> list[str]:
    return [f.field for f in families]


def _inputs(fields: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(name for f in fields for name in inputs_of(f)))


class _Collect:
    """Reasons by kind (one Inert each, its texts and inputs joined), and the families they leave unknown."""

    def __init__(self) -> None:
        self.texts: dict[InertReason, list[str]] = {}
        self.fields: dict[InertReason, list[str]] = {}
        self.unknown: dict[str, str] = {}

    def add(self, reason: InertReason, text: str, fields: Sequence[str] = (), why: str | None = None) -> None:
        """Say ``text`` under ``reason``; ``fields`` are unknown for it, each for ``why`` (else the text)."""
        self.texts.setdefault(reason, []).append(text)
        self.fields.setdefault(reason, []).extend(fields)
        for name in fields:
            self.unknown.setdefault(name, f"{reason.value}: {why or text}")

    def found(self) -> Found:
        reasons = tuple(
            Inert(reason, "; ".join(self.texts[reason]), _inputs(self.fields[reason]))
            for reason in InertReason
            if reason in self.texts
        )
        return Found(reasons, self.unknown)


def _down(layout: Layout, groups: Iterable[SeriesGroup]) -> list[ScrapeTarget]:
    """The scrape targets ``groups`` came from whose last scrape failed."""
    if layout.targets is None:
        return []
    wanted = {_target(g.labels) for g in groups}
    return [t for t in layout.targets if not t.up and _target(t.labels) in wanted]


def _named(targets: Sequence[ScrapeTarget]) -> str:
    names = sorted({f"{t.labels.get('job', '?')}/{t.labels.get('instance', '?')}" for t in targets})
    errors = sorted({t.error for t in targets if t.error})
    return ", ".join(names) + (f" ({'; '.join(errors)})" if errors else "")


def _freshness(
    layout: Layout, preset: PresetSeries, now: float, out: _Collect, read: frozenset[str] = frozenset()
) -> None:
    """stale and not_scraped per family whose selected series exist: newest sample older than allowed.
    A family the selector picks nothing of while it picks others (and the reads found none of): its
    servers do not export it (an older version), said as such rather than as no series matching."""
    by_cause: dict[tuple[InertReason, str], list[str]] = {}
    for family in preset.families:
        chosen = [g for g in family.groups if matches_all(family.matchers, g.labels)]
        if not chosen:
            if family.field not in read and family.metrics:
                out.unknown.setdefault(
                    family.field,
                    f"not exported: the {preset.preset} servers' series the labelSelector picks carry no"
                    f" {family.metrics[0]} (within {_ago(layout.lookback_s)}; an older version)",
                )
            continue
        newest = max(g.last_sample for g in chosen)
        limit = stale_after(_interval(layout, chosen))
        age = now - newest
        if age <= limit:
            continue
        down = _down(layout, chosen)
        renamed = _renamed(layout, family, chosen, now)
        if down:
            cause = (InertReason.NOT_SCRAPED, f"up == 0 for {_named(down)}, the last sample {_ago(age)} ago")
        elif renamed:
            cause = (InertReason.NO_SERIES, _renamed_text(family, chosen, renamed, age))
        else:
            cause = (
                InertReason.STALE,
                f"the last sample is {_ago(age)} old, over {STALE_SCRAPES} scrape intervals ({limit:.0f}s)",
            )
        by_cause.setdefault(cause, []).append(family.field)
    for (reason, text), fields in by_cause.items():
        metrics = [f.metrics[0] for f in preset.families if f.field in fields and f.metrics]
        shown = ", ".join(metrics[:VALUES_SHOWN]) + (
            f" and {len(metrics) - VALUES_SHOWN} more" if len(metrics) > VALUES_SHOWN else ""
        )
        out.add(reason, f"{preset.kind} {preset.preset} series ({shown}): {text}", fields, why=text)


def _source(labels: Mapping[str, str]) -> tuple[str, str, str]:
    """Where a series came from: its scrape target and pod."""
    return labels.get("job", ""), labels.get("instance", ""), labels.get("pod", "")


def _renamed(
    layout: Layout, family: FamilySeries, chosen: Sequence[SeriesGroup], now: float
) -> list[SeriesGroup]:
    """Fresh series of the family the selector does not pick, from the targets and pods its stale
    ones came from: the servers renamed a label (a served model name changed), so they are no_series."""
    sources = {_source(g.labels) for g in chosen}
    return [
        g
        for g in family.groups
        if _source(g.labels) in sources
        and not matches_all(family.matchers, g.labels)
        and now - g.last_sample <= stale_after(_interval(layout, (g,)))
    ]


def _renamed_text(
    family: FamilySeries, chosen: Sequence[SeriesGroup], renamed: Sequence[SeriesGroup], age: float
) -> str:
    """What changed: the selector, the values the same pods write now, a did-you-mean, since when."""
    written = ", ".join(sorted(str(m) for m in family.matchers))
    parts = []
    for matcher in sorted(family.matchers, key=lambda m: m.name):
        now_have = sorted({g.labels[matcher.name] for g in renamed if matcher.name in g.labels})
        before = {g.labels.get(matcher.name) for g in chosen}
        if not now_have or set(now_have) == before:
            continue
        guess = _suggest(matcher, now_have)
        parts.append(
            f"{matcher.name}={', '.join(now_have[:VALUES_SHOWN])}"
            + (f' (did you mean {matcher.name}="{guess}"?)' if guess else "")
        )
    pods = sorted({g.labels.get("pod") or g.labels.get("instance", "?") for g in chosen})
    return (
        f"{written} matches no fresh series: the pods it read ({', '.join(pods[:VALUES_SHOWN])}) now write "
        + ("; ".join(parts) or "other labels")
        + f"; its series stopped {_ago(age)} ago"
    )


def _seen_pods(preset: PresetSeries, now: float, layout: Layout, namespace: str | None) -> set[str] | None:
    """Pods with a fresh series of the preset in ``namespace`` (any selector); None when no series
    carries a ``pod`` label (Kubernetes discovery did not add one: pods cannot be joined)."""
    labelled = False
    seen: set[str] = set()
    for family in preset.families:
        for group in family.groups:
            pod = group.labels.get("pod")
            if pod is None:
                continue
            labelled = True
            in_namespace = namespace is None or group.labels.get("namespace", namespace) == namespace
            if in_namespace and now - group.last_sample <= stale_after(_interval(layout, (group,))):
                seen.add(pod)
    return seen if labelled else None


def _unscraped_pods(layout: Layout, preset: PresetSeries, now: float, pods: Pods, out: _Collect) -> None:
    """not_scraped for Ready pods of the Deployment without a fresh series of the engine."""
    if not pods.ready or not preset.per_pod:
        return
    seen = _seen_pods(preset, now, layout, pods.namespace)
    if seen is None:
        return
    missing = [p for p in pods.ready if p not in seen]
    if not missing:
        return
    targets = layout.targets or ()
    by_pod = {
        t.labels.get("pod"): t for t in targets if t.labels.get("namespace", pods.namespace) == pods.namespace
    }
    down = [p for p in missing if p in by_pod and not by_pod[p].up]
    absent = [p for p in missing if p not in by_pod]
    parts = []
    if down:
        parts.append(f"up == 0 for Ready pods {', '.join(down)}{_errors([by_pod[p] for p in down])}")
    if absent:
        # Only where Kubernetes discovery labels the targets with their pods can a pod's target be looked for.
        named = any("pod" in t.labels for t in targets)
        parts.append(
            f"no fresh series of {preset.kind} {preset.preset} from Ready pods {', '.join(absent)}"
            + (" and no scrape target for them" if named else "")
        )
    # No input is unknown for it: what the selector picks was read fresh (from other pods, then).
    out.add(
        InertReason.NOT_SCRAPED,
        f"{len(missing)} of {len(pods.ready)} Ready pods not scraped: " + "; ".join(parts),
    )


def _errors(targets: Sequence[ScrapeTarget]) -> str:
    errors = sorted({t.error for t in targets if t.error})
    return f" ({'; '.join(errors)})" if errors else ""


def _stranded(layout: Layout, now: float, pods: Pods | None, namespace: str, out: _Collect) -> None:
    """stranded: router per-endpoint series naming endpoints that are no live pod of the namespace."""
    if not layout.endpoints:
        return
    if pods is not None:
        live = set(pods.live)
        prefix = f"{pods.deployment}-"
    else:
        engine = next((p for p in layout.presets if p.kind == "engine"), None)
        seen = _seen_pods(engine, now, layout, namespace) if engine is not None else None
        if seen is None:
            return  # neither Kubernetes nor pod labels on the engine's series: nothing to join against
        live, prefix = seen, ""
    stranded = sorted(
        {
            e
            for e in layout.endpoints
            if e.namespace in ("", namespace)
            and _RANK.sub("", e.endpoint).startswith(prefix)
            and _RANK.sub("", e.endpoint) not in live
            and e.endpoint not in live
        },
        key=lambda e: (e.endpoint, e.metric),
    )
    if not stranded:
        return
    endpoints = sorted({e.endpoint for e in stranded})
    metrics = sorted({e.metric for e in stranded})
    where = "live pod" if pods is not None else "pod with fresh series"
    several = len(endpoints) != 1
    out.add(
        InertReason.STRANDED,
        f"{', '.join(metrics)} still {'hold' if len(metrics) != 1 else 'holds'} series for"
        f" {len(endpoints)} endpoint{'s' if several else ''} that {'are' if several else 'is'} no {where}"
        f" of namespace {namespace} ({', '.join(endpoints[:VALUES_SHOWN])}"
        + (f" and {len(endpoints) - VALUES_SHOWN} more" if len(endpoints) > VALUES_SHOWN else "")
        + "): the router does not delete them when a pod goes, so what reads them sees demand that is"
        " gone; this scaler does not count them",
    )


def layout_reasons(
    layout: Layout, now: float, pods: Pods | None, namespace: str, present: Iterable[str] = ()
) -> Found:
    """The reasons Prometheus' series give for one target at ``now`` (Unix seconds), and the families
    (by field) they leave unknown (module docstring). ``pods``: what Kubernetes lists (None without it);
    ``present``: the families the instant reads found series of (a selector that picks nothing there
    and here is the only no_series: the reads win over the probe)."""
    out = _Collect()
    read = set(present)
    for preset in layout.presets:
        chosen = [g for f in preset.families for g in f.groups if matches_all(f.matchers, g.labels)]
        if chosen:
            _freshness(layout, preset, now, out, frozenset(read))
        elif pods is not None and not pods.ready:
            continue  # no Ready pod: nothing exports yet, and the floor holds
        elif any(f.field in read for f in preset.families):
            continue  # the reads found series the probe did not (a Prometheus without timestamp())
        elif not any(f.groups for f in preset.families):
            within = _ago(layout.lookback_s)
            text = f"Prometheus holds no series of {preset.kind} {preset.preset} at all (within {within})"
            if pods is not None and preset.per_pod:
                out.add(
                    InertReason.NOT_SCRAPED,
                    f"{text}: no scrape target for Ready pods {', '.join(pods.ready)}",
                    _fields(preset.families),
                )
            else:
                out.add(InertReason.NO_SERIES, text, _fields(preset.families))
        else:
            out.add(InertReason.NO_SERIES, _no_series_text(preset, pods), _fields(preset.families))
        if pods is not None and preset.kind == "engine" and chosen:
            _unscraped_pods(layout, preset, now, pods, out)
    _stranded(layout, now, pods, namespace, out)
    return out.found()
