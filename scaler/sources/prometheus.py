"""Prometheus reader: batched instant queries per (address, engine), split per target.

One refresh runs each query family of a preset once per Prometheus address and engine,
aggregated by the label names the targets' ``labelSelector``s use; each target then sums
(or maxes) the returned series its matchers select. The number of queries does not grow
with the number of ScaledObjects that share an address and an engine.

Named absences, never a silent zero:
* the query failed (connection refused, timeout, HTTP error, invalid JSON): every field of
  that family is unknown for every target of the group, with the error as the reason;
* no series matches a target's selector: unknown, "no series match labelSelector";
* NaN or infinite samples are dropped; if nothing else is left: unknown, "only NaN".
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
from prometheus_api_client import PrometheusConnect
from urllib3.util.retry import Retry

from scaler.config import TargetPolicy
from scaler.histogram import histogram_quantile, ttft_inputs
from scaler.matchers import LabelMatcher, matches_all
from scaler.model import INPUTS, Observation
from scaler.presets import ROUTERS, Combine, Family, Preset, Select, preset_for
from scaler.roles import RoleLabel, role_matcher

# Input -> the TargetPolicy field with its PromQL under engine: custom (the input table's).
CUSTOM_FIELDS = {name: spec.custom_query for name, spec in INPUTS.items() if spec.custom_query}


def redact_url(url: str) -> str:
    """The URL without credentials (``http://user:secret@host`` -> ``http://***@host``), for messages."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, f"***@{host}", parts.path, "", ""))


class PrometheusQueryError(RuntimeError):
    """A failed Prometheus query: the address (redacted in the message), the query and why."""

    def __init__(self, address: str, query: str, reason: str) -> None:
        super().__init__(f"prometheus {redact_url(address)}: {reason.replace(address, redact_url(address))}")
        self.address = address
        self.query = query
        self.reason = reason


Labels = Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Sample:
    """One instant-query series: its labels (without ``__name__``) and value."""

    labels: Labels
    value: float


@dataclass
class TargetInputs:
    """What Prometheus said about one target: values, and reasons for the unknown ones."""

    values: dict[str, float] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    ttft_buckets: dict[float, float] | None = None  # summed per-bucket rates of the TTFT histogram
    router_ttft_buckets: dict[float, float] | None = None  # the router's TTFT histogram, likewise
    itl_buckets: dict[float, float] | None = None  # the inter-token latency histogram, likewise


def group_labels(selectors: Iterable[Sequence[LabelMatcher]]) -> tuple[str, ...]:
    """The label names the queries must keep so every selector can be applied afterwards."""
    return tuple(sorted({m.name for selector in selectors for m in selector}))


class PrometheusClient:
    """I/O only: instant and range queries through prometheus-api-client, errors wrapped with context."""

    def __init__(self, address: str, timeout_s: float = 5.0) -> None:
        self.address = address
        self.timeout_s = timeout_s
        # One quick retry on connection errors and 5xx; the refresh loop is the real retry.
        retry = Retry(total=1, backoff_factor=0.1, status_forcelist=(502, 503, 504), allowed_methods=("GET",))
        self._api = PrometheusConnect(url=address, retry=retry, timeout=timeout_s)
        self.queries = 0

    def _call(self, query: str, fn: Any, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        self.queries += 1
        try:
            result = fn(query, *args, **kwargs)
        except (requests.exceptions.JSONDecodeError, ValueError) as exc:  # the body is not JSON
            raise PrometheusQueryError(self.address, query, f"invalid response: {_short(exc)}") from None
        except requests.exceptions.Timeout:
            raise PrometheusQueryError(self.address, query, f"timed out after {self.timeout_s:g}s") from None
        except requests.exceptions.ConnectionError as exc:
            raise PrometheusQueryError(self.address, query, f"connection failed: {_short(exc)}") from None
        except requests.exceptions.RequestException as exc:
            raise PrometheusQueryError(self.address, query, f"request failed: {_short(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - PrometheusApiClientException (non-200) and malformed bodies
            raise PrometheusQueryError(self.address, query, _short(exc)) from None
        if not isinstance(result, list):
            raise PrometheusQueryError(self.address, query, f"unexpected result type {type(result).__name__}")
        return result

    def instant(self, query: str, at: datetime | None = None) -> list[Sample]:
        """Run an instant query (at ``at``, else now); PrometheusQueryError on failure or bad samples."""
        params = {"time": f"{at.timestamp():.3f}"} if at is not None else None
        rows = self._call(query, self._api.custom_query, params=params)
        out: list[Sample] = []
        for row in rows:
            try:
                labels = {str(k): str(v) for k, v in (row.get("metric") or {}).items() if k != "__name__"}
                out.append(Sample(labels, float(row["value"][1])))
            except (KeyError, IndexError, TypeError, ValueError, AttributeError):
                raise PrometheusQueryError(self.address, query, "malformed sample in result") from None
        return out

    def range(
        self, query: str, start: datetime, end: datetime, step_s: float
    ) -> list[tuple[Labels, list[tuple[float, float]]]]:
        """Run a range query from ``start`` to ``end`` every ``step_s``: each series with its points."""
        # prometheus-api-client rounds start and end to whole seconds; the refresh grid may
        # not be whole seconds, so pass them exactly (these params take precedence).
        exact = {"start": f"{start.timestamp():.3f}", "end": f"{end.timestamp():.3f}"}
        rows = self._call(
            query,
            self._api.custom_query_range,
            start_time=start,
            end_time=end,
            step=f"{step_s:g}s",
            params=exact,
        )
        out: list[tuple[Labels, list[tuple[float, float]]]] = []
        for row in rows:
            try:
                labels = {str(k): str(v) for k, v in (row.get("metric") or {}).items() if k != "__name__"}
                values = [(float(t), float(v)) for t, v in row["values"]]
            except (KeyError, TypeError, ValueError, AttributeError):
                raise PrometheusQueryError(self.address, query, "malformed range result") from None
            out.append((labels, values))
        return out


def _short(exc: BaseException, limit: int = 200) -> str:
    text = str(exc).replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "..."


@dataclass(frozen=True, slots=True)
class TargetQuery:
    """What the source needs to know of a target: its key, policy and address."""

    key: Any
    policy: TargetPolicy
    address: str


class PrometheusReader:
    """Batched reads for many targets; blocking (run it in a worker thread)."""

    def __init__(
        self,
        default_address: str | None,
        rate_window: str = "1m",
        timeout_s: float = 5.0,
        history_seconds: float = 3600.0,
        history_step_s: float = 15.0,
    ) -> None:
        self.default_address = default_address.rstrip("/") if default_address else None
        self.rate_window = rate_window
        self.timeout_s = timeout_s
        self.history_seconds = history_seconds
        self.history_step_s = history_step_s
        self._clients: dict[str, PrometheusClient] = {}

    @property
    def queries(self) -> int:
        """Queries sent so far, over every address."""
        return sum(c.queries for c in self._clients.values())

    def client(self, address: str) -> PrometheusClient:
        """The shared client for ``address``, created on first use."""
        if address not in self._clients:
            self._clients[address] = PrometheusClient(address, self.timeout_s)
        return self._clients[address]

    def address_for(self, policy: TargetPolicy) -> str | None:
        """The Prometheus address for ``policy``: its own, else the default; None when neither is set."""
        return policy.prometheus_address or self.default_address

    # ---- instant reads ----------------------------------------------------------------

    def read(self, targets: Sequence[TargetQuery], at: datetime | None = None) -> dict[Any, TargetInputs]:
        """Instant reads evaluated at ``at`` (default: Prometheus' now).

        Replicas that evaluate at the same grid time get the same answers from the same
        Prometheus, which is how several scaler replicas decide alike.
        """
        out: dict[Any, TargetInputs] = {t.key: TargetInputs() for t in targets}
        groups: dict[tuple[str, str], list[TargetQuery]] = defaultdict(list)
        for t in targets:
            groups[(t.address, t.policy.engine)].append(t)
        for (address, engine), members in groups.items():
            if engine == "custom":
                self._read_custom(address, members, out, at)
            else:
                self._read_preset(address, engine, members, out, at)
        routed: dict[tuple[str, str], list[TargetQuery]] = defaultdict(list)
        for t in targets:
            if t.policy.router != "none":
                routed[(t.address, t.policy.router)].append(t)
        for (address, router), members in routed.items():
            self._read_families(address, ROUTERS[router], members, out, at)
        return out

    def _read_preset(
        self,
        address: str,
        engine: str,
        members: list[TargetQuery],
        out: dict[Any, TargetInputs],
        at: datetime | None,
    ) -> None:
        preset = preset_for(engine)
        if preset is None:
            for t in members:
                out[t.key].missing.update(
                    dict.fromkeys(CUSTOM_FIELDS, f"no query preset for engine {engine}")
                )
            return
        offered = {name for f in preset.families for name in _fields_of(f)}
        for name in ("kv_cache_usage", "ttft_p95_seconds", "ttft_p99_seconds"):
            if name not in offered:
                for t in members:
                    out[t.key].missing[name] = f"engine {engine} exports no metric for it"
        self._read_families(address, preset, members, out, at)

    def _read_families(
        self,
        address: str,
        preset: Preset,
        members: list[TargetQuery],
        out: dict[Any, TargetInputs],
        at: datetime | None,
    ) -> None:
        """Each family of ``preset`` once for ``members``, split per target by its selector."""
        client = self.client(address)
        for family in preset.families:
            selectors = {t.key: selector_for(t.policy, family) for t in members}
            query = family.render(group_labels(selectors.values()), self.rate_window)
            try:
                samples = client.instant(query, at)
            except PrometheusQueryError as exc:
                for t in members:
                    for name in _fields_of(family):
                        out[t.key].missing[name] = str(exc)
                continue
            # Targets with the same selector read the same series: split once per selector.
            per_selector: dict[tuple[LabelMatcher, ...], TargetInputs] = {}
            for t in members:
                selector = selectors[t.key]
                part = per_selector.get(selector)
                if part is None:
                    part = per_selector[selector] = TargetInputs()
                    _apply(family, samples, selector, part)
                out[t.key].values.update(part.values)
                out[t.key].missing.update(part.missing)
                for histogram in ("ttft_buckets", "router_ttft_buckets", "itl_buckets"):
                    if getattr(part, histogram) is not None:
                        setattr(out[t.key], histogram, getattr(part, histogram))

    def _read_custom(
        self, address: str, members: list[TargetQuery], out: dict[Any, TargetInputs], at: datetime | None
    ) -> None:
        client = self.client(address)
        cache: dict[str, list[Sample] | PrometheusQueryError] = {}
        for t in members:
            for name, attribute in CUSTOM_FIELDS.items():
                query = getattr(t.policy, attribute, None)
                if not query:
                    continue
                if query not in cache:
                    try:
                        cache[query] = client.instant(query, at)
                    except PrometheusQueryError as exc:
                        cache[query] = exc
                result = cache[query]
                if isinstance(result, PrometheusQueryError):
                    out[t.key].missing[name] = str(result)
                    continue
                kept = [s.value for s in result if math.isfinite(s.value)]
                if not result:
                    out[t.key].missing[name] = "custom query returned no series"
                elif not kept:
                    out[t.key].missing[name] = "custom query returned only NaN"
                else:
                    out[t.key].values[name] = max(0.0, sum(kept))

    # ---- history ----------------------------------------------------------------------

    def history(
        self, targets: Sequence[TargetQuery], now: datetime, step_s: float | None = None
    ) -> dict[Any, list[Observation]]:
        """Past Observations per target (oldest first), from range queries over ``history_seconds``.

        The range ends at ``now`` and steps back by ``step_s`` (default ``history_step_s``),
        so with ``now`` on the refresh grid the points are the ones a running replica saw.
        They carry what the engine learns from (``Engine.warm``): the token rates, the queue,
        the running requests, the KV cache, the TTFT histogram (count, sum and buckets) and the
        pods reporting, which stand for the Ready replicas Prometheus does not hold. A family
        whose range query fails is left out of the points; only the token rates' failure fails
        the warm-up.
        """
        step = step_s or self.history_step_s
        start = now - timedelta(seconds=step * int(self.history_seconds // step))
        return self.history_between(targets, start, now, step)

    def history_between(
        self,
        targets: Sequence[TargetQuery],
        start: datetime,
        end: datetime,
        step: float,
        problems: dict[str, str] | None = None,
    ) -> dict[Any, list[Observation]]:
        """``history``'s points from ``start`` to ``end`` every ``step``; each family whose range
        query failed is noted in ``problems`` (input name -> the error) when given."""
        out: dict[Any, list[Observation]] = {t.key: [] for t in targets}
        now = end
        groups: dict[tuple[str, str], list[TargetQuery]] = defaultdict(list)
        for t in targets:
            groups[(t.address, t.policy.engine)].append(t)
        for (address, engine), members in groups.items():
            preset = preset_for(engine)
            if preset is None:
                continue
            selectors = {t.key: t.policy.series_matchers for t in members}
            by = group_labels(selectors.values())
            client = self.client(address)
            series: dict[str, dict[Any, dict[float, float]]] = {}
            for name in HISTORY_FIELDS:
                family = preset.family(name)
                if family is None:
                    continue
                try:
                    rows = client.range(family.render(by, self.rate_window), start, now, step)
                except PrometheusQueryError as exc:
                    if name in ("prompt_tokens_per_s", "generation_tokens_per_s"):
                        raise
                    if problems is not None:
                        problems[name] = str(exc)
                    continue
                mean = family.combine is Combine.MEAN
                series[name] = _sum_per_target(rows, members, selectors, mean)
                if family.le_scale != 1.0:
                    for acc in series[name].values():
                        for ts in acc:
                            acc[ts] *= family.le_scale
            ttft = preset.family("ttft")
            buckets = self._bucket_history(client, ttft, by, start, now, step, members, selectors, problems)
            for t in members:
                out[t.key] = _points(t, series, buckets.get(t.key, {}))
        return out

    def _bucket_history(
        self,
        client: PrometheusClient,
        family: Family | None,
        by: tuple[str, ...],
        start: datetime,
        now: datetime,
        step: float,
        members: Sequence[TargetQuery],
        selectors: Mapping[Any, Sequence[LabelMatcher]],
        problems: dict[str, str] | None = None,
    ) -> dict[Any, dict[float, dict[float, float]]]:
        """Per target, per time, the TTFT histogram's summed bucket rates (empty if unavailable)."""
        if family is None:
            return {}
        try:
            rows = client.range(family.render(by, self.rate_window), start, now, step)
        except PrometheusQueryError as exc:
            if problems is not None:
                problems["ttft"] = str(exc)
            return {}
        out: dict[Any, dict[float, dict[float, float]]] = {t.key: defaultdict(dict) for t in members}
        for labels, values in rows:
            try:
                le = float(labels.get("le", "nan")) * family.le_scale
            except ValueError:
                continue
            for t in members:
                if matches_all(tuple(selectors[t.key]), labels):
                    acc = out[t.key]
                    for ts, v in values:
                        if math.isfinite(v):
                            acc[ts][le] = acc[ts].get(le, 0.0) + v
        return out


# What the warm-up reads, besides the TTFT histogram's buckets.
HISTORY_FIELDS = (
    "prompt_tokens_per_s",
    "generation_tokens_per_s",
    "queue_waiting",
    "requests_running",
    "kv_cache_usage",
    "ttft_sum",
    "replicas_reporting",
)

# Prometheus refuses a range query of more than 11,000 points per series; longer spans go in chunks.
MAX_RANGE_POINTS = 10_000


def read_history(
    address: str,
    policy: TargetPolicy,
    start: datetime,
    end: datetime,
    step_s: float,
    timeout_s: float = 30.0,
) -> tuple[list[Observation], dict[str, str]]:
    """One target's history from ``start`` to ``end``, a point every ``step_s`` (``scaler replay
    --prometheus``): the warm-up's Observations (``history``), with every rate taken over one step,
    so that each point counts what happened in the step before it. Read in chunks of at most
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
        problems["engine"] = f"engine {policy.engine} has no query preset"
        return [], problems
    for name in ("ttft", *HISTORY_FIELDS):
        if preset.family(name) is None:
            problems[name] = f"engine {policy.engine} exports no metric for it"
    router = ROUTERS[policy.router].family("router_queue_waiting") if policy.router != "none" else None
    points: dict[datetime, Observation] = {}
    chunk_start = start
    while chunk_start <= end:
        chunk_end = min(end, chunk_start + timedelta(seconds=step_s * (MAX_RANGE_POINTS - 1)))
        chunk = reader.history_between([target], chunk_start, chunk_end, step_s, problems)["history"]
        if router is not None:
            chunk = _with_router_queue(
                reader, target, router, chunk, (chunk_start, chunk_end, step_s), problems
            )
        for point in chunk:
            points[point.now] = point
        chunk_start = chunk_end + timedelta(seconds=step_s)
    return [points[t] for t in sorted(points)], problems


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
        problems["router_queue_waiting"] = str(exc)
        return points
    queue = {
        round(t, 3): v for t, v in _sum_per_target(rows, [target], {target.key: selector})[target.key].items()
    }
    return [
        dataclasses.replace(p, router_queue_waiting=queue.get(round(p.now.timestamp(), 3))) for p in points
    ]


def _sum_per_target(
    rows: list[tuple[Labels, list[tuple[float, float]]]],
    members: Sequence[TargetQuery],
    selectors: Mapping[Any, Sequence[LabelMatcher]],
    mean: bool = False,
) -> dict[Any, dict[float, float]]:
    """Per target, per time, the sum (or with ``mean``, the mean) of the series its selector picks."""
    per_target: dict[Any, dict[float, float]] = {t.key: {} for t in members}
    counts: dict[Any, dict[float, int]] = {t.key: defaultdict(int) for t in members}
    for labels, values in rows:
        for t in members:
            if matches_all(tuple(selectors[t.key]), labels):
                acc = per_target[t.key]
                for ts, v in values:
                    if math.isfinite(v):
                        acc[ts] = acc.get(ts, 0.0) + v
                        counts[t.key][ts] += 1
    if mean:
        for key, acc in per_target.items():
            for ts in acc:
                acc[ts] /= counts[key][ts]
    return per_target


def _points(
    target: TargetQuery,
    series: Mapping[str, Mapping[Any, Mapping[float, float]]],
    buckets: Mapping[float, Mapping[float, float]],
) -> list[Observation]:
    def get(name: str) -> Mapping[float, float]:
        return series.get(name, {}).get(target.key, {})

    prompt, generation = get("prompt_tokens_per_s"), get("generation_tokens_per_s")
    reporting, sums = get("replicas_reporting"), get("ttft_sum")
    objective = target.policy.ttft_objective_seconds
    points = []
    for ts in sorted(set(prompt) | set(generation)):
        ready = reporting.get(ts)
        replicas = None if ready is None else round(ready)
        hist = buckets.get(ts)
        ttft = ttft_inputs(objective, hist, sums.get(ts)) if hist else {}
        points.append(
            Observation(
                now=datetime.fromtimestamp(ts, tz=UTC),
                queue_waiting=get("queue_waiting").get(ts),
                requests_running=get("requests_running").get(ts),
                prompt_tokens_per_s=prompt.get(ts),
                generation_tokens_per_s=generation.get(ts),
                kv_cache_usage=get("kv_cache_usage").get(ts),
                current_replicas=replicas,
                ready_replicas=replicas,
                ttft_p95_seconds=ttft.get("ttft_p95_seconds"),
                ttft_p99_seconds=ttft.get("ttft_p99_seconds"),
                ttft_over_objective=ttft.get("ttft_over_objective"),
                ttft_mean_seconds=ttft.get("ttft_mean_seconds"),
                requests_per_s=ttft.get("requests_per_s"),
            )
        )
    return points


def selector_for(policy: TargetPolicy, family: Family) -> tuple[LabelMatcher, ...]:
    """The matchers that pick ``policy``'s series of ``family`` (``scaler.presets.Select``)."""
    if family.select is Select.POOL:
        return policy.router_matchers
    if family.select is Select.MODEL:
        role = role_matcher(policy.role, RoleLabel(family.role_label)) if family.role_label else ()
        return (*(m for m in policy.matchers if m.name == family.model_label), *role)
    if family.select is Select.ANY:
        return ()
    return policy.series_matchers


def _fields_of(family: Family) -> tuple[str, ...]:
    if family.combine is Combine.HISTOGRAM:
        return ("ttft_p95_seconds", "ttft_p99_seconds") if family.field == "ttft" else (family.field,)
    return (family.field,)


def _apply(
    family: Family, samples: list[Sample], selector: Sequence[LabelMatcher], into: TargetInputs
) -> None:
    selected = [s for s in samples if matches_all(tuple(selector), s.labels)]
    if not selected:
        for name in _fields_of(family):
            into.missing[name] = "no series match labelSelector"
        return
    finite = [s for s in selected if math.isfinite(s.value)]
    if family.combine is Combine.HISTOGRAM:
        buckets: dict[float, float] = defaultdict(float)
        for s in finite:
            try:
                buckets[float(s.labels.get("le", "nan")) * family.le_scale] += s.value
            except ValueError:
                continue
        if family.field != "ttft":
            setattr(into, f"{family.field}_buckets", dict(buckets))
            return
        into.ttft_buckets = dict(buckets)
        for name, q in (("ttft_p95_seconds", 0.95), ("ttft_p99_seconds", 0.99)):
            value = histogram_quantile(q, buckets)
            if value is None or not math.isfinite(value):
                into.missing[name] = "no requests in the rate window"
            else:
                into.values[name] = value
        return
    if not finite:
        into.missing[family.field] = "only NaN samples"
        return
    values = [max(0.0, s.value) for s in finite]
    combined = sum(values) / len(values) if family.combine is Combine.MEAN else sum(values)
    into.values[family.field] = combined * family.le_scale
