"""Prometheus reader: batched instant queries per (address, engine), split per target.

One refresh runs each query family of a preset once per Prometheus address and engine,
aggregated by the label names the targets' ``labelSelector``s use; each target then sums
(or maxes) the returned series its matchers select. The number of queries does not grow
with the number of ScaledObjects that share an address and an engine. The answers at a
refresh time are kept until the next, so the first decisions of new targets that arrive in
between read them too. The warm-up's range reads are ``scaler.sources.history``'s.

Named absences, never a silent zero:
* the query failed (connection refused, timeout, HTTP error, invalid JSON): every field of
  that family is unknown for every target of the group, with the error as the reason;
* no series matches a target's selector: unknown, "no series match labelSelector";
* NaN or infinite samples are dropped; if nothing else is left: unknown, "only NaN";
* a selector whose regular expressions go over their share of the refresh
  (``scaler.matchers.MatchBudget``): the families it had not split yet are unknown for its
  targets alone, with that reason; every other target reads on.
"""

from __future__ import annotations

import ast
import contextlib
import json
import math
import re
import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
from prometheus_api_client import PrometheusConnect
from urllib3.util.retry import Retry

from scaler.config import TargetPolicy
from scaler.errors import UnreachableError
from scaler.inputs import Input, Key, Reading
from scaler.matchers import (
    SELECTOR_STEPS_PER_REFRESH,
    LabelMatcher,
    MatchBudget,
    MatchOp,
    OverBudget,
    matches_all,
)
from scaler.model import INPUTS
from scaler.presets import (
    ROUTERS,
    Combine,
    Family,
    Preset,
    RouterQueue,
    Select,
    preset_for,
    router_queue_queries,
)
from scaler.readings import Readings
from scaler.roles import RoleLabel, role_matcher
from scaler.sources.unreached import why_unreached

# Input -> the TargetPolicy field with its PromQL under engine: custom (the input table's).
CUSTOM_FIELDS = {name: spec.custom_query for name, spec in INPUTS.items() if spec.custom_query}
# What a preset's engine may not export that a reader looks for: named as such when it does not.
NAMED_WHEN_ABSENT: tuple[Key, ...] = (Input.KV_CACHE_USAGE, Reading.TTFT)


def redact_url(url: str) -> str:
    """The URL without credentials (``http://user:secret@host`` -> ``http://***@host``), for messages."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, f"***@{host}", parts.path, "", ""))


class PrometheusQueryError(UnreachableError):
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
            raise PrometheusQueryError(self.address, query, f"connection failed: {_unreached(exc)}") from None
        except requests.exceptions.RequestException as exc:
            raise PrometheusQueryError(self.address, query, f"request failed: {_unreached(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - PrometheusApiClientException (non-200) and malformed bodies
            raise PrometheusQueryError(self.address, query, _answered(exc, query)) from None
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

    def targets(self) -> list[dict[str, Any]]:
        """The active scrape targets (``/api/v1/targets``: labels, scrapeInterval, health, lastError);
        PrometheusQueryError when it fails or this Prometheus has no such API (Thanos, Mimir)."""
        return self._call(
            "/api/v1/targets",
            lambda _: list(self._api.get_targets(state="active").get("activeTargets") or []),
        )

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


def _unreached(exc: BaseException) -> str:
    """Why a connection failed, in a few words (``scaler.sources.unreached``), else the wrapper's
    text without the URL it repeats."""
    why = why_unreached(exc)
    if why is not None:
        return why
    return "no connection (" + _short(re.sub(r" with url: \S+", "", str(exc)), 120) + ")"


# prometheus-api-client's error for an answer that is not HTTP 200: the status and the body's repr.
_STATUS = re.compile(r"HTTP Status Code (?P<code>\d+) \((?P<body>b?(['\"]).*\3)\)$", re.S)


def _answered(exc: BaseException, query: str) -> str:
    """Why Prometheus (or what answered at the URL) refused a query: its HTTP status, what it said
    (Prometheus' ``error`` for a bad query), the query as written; else the error's text.

    *Example*: a 404 at ``http://host/graph`` -> ``HTTP 404 Not Found: no Prometheus API at this
    URL (is it Prometheus' own, without a path such as /graph?)``.
    """
    found = _STATUS.search(str(exc))
    if found is None:
        return _short(exc)
    code = int(found["code"])
    try:
        body = ast.literal_eval(found["body"])
        text = body.decode(errors="replace") if isinstance(body, bytes) else str(body)
    except (ValueError, SyntaxError):
        text = ""
    try:
        status = f"HTTP {code} {HTTPStatus(code).phrase}"
    except ValueError:  # not a status Python names
        status = f"HTTP {code}"
    if code == HTTPStatus.NOT_FOUND:
        return (
            f"{status}: no Prometheus API at this URL (is it Prometheus' own, without a path such as /graph?)"
        )
    said = text.strip()
    with contextlib.suppress(ValueError, AttributeError):
        said = str(json.loads(text).get("error") or said)
    return f"{status}{': ' + _short(said, 160) if said else ''} (query: {query})"


def _short(exc: BaseException | str, limit: int = 200) -> str:
    text = str(exc).replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "..."


@dataclass(frozen=True, slots=True)
class TargetQuery:
    """What the source needs to know of a target: its key, policy and address."""

    key: Any
    policy: TargetPolicy
    address: str
    namespace: str | None = None  # the ScaledObject's, for a family read per namespace (Select.NAMESPACE)


_WINDOW = re.compile(r"^([0-9]+)(ms|s|m|h)$")
_WINDOW_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def window_seconds(window: str) -> float:
    """A PromQL range (``rate(...[1m])``'s ``1m``) in seconds; ValueError for anything else.
    *Example*: ``window_seconds("90s") = 90.0``, ``window_seconds("1m") = 60.0``."""
    match = _WINDOW.match(window.strip())
    if match is None:
        raise ValueError(f"not a PromQL rate window (e.g. 30s, 1m, 500ms): {window!r}")
    return int(match.group(1)) * _WINDOW_UNITS[match.group(2)]


class PrometheusReader:
    """Batched reads for many targets; blocking (run it in a worker thread)."""

    def __init__(
        self,
        default_address: str | None,
        rate_window: str = "1m",
        timeout_s: float = 5.0,
        selector_steps: int = SELECTOR_STEPS_PER_REFRESH,
    ) -> None:
        self.default_address = default_address.rstrip("/") if default_address else None
        self.selector_steps = selector_steps  # each selector's regex work per read (MatchBudget)
        self.rate_window = rate_window
        self.timeout_s = timeout_s
        self._clients: dict[str, PrometheusClient] = {}
        # The latest answer per (address, query template) at a refresh time: (time, by, samples).
        self._answered: dict[tuple[str, str], tuple[float, tuple[str, ...], list[Sample]]] = {}
        # Reads run in worker threads (the refresh and new targets' first decisions at once): one
        # read of a family at a time, so a second waits for the first's answer instead of asking too.
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        # Per address, the refresh time (Unix s) a query to it last failed at: the series probe asks
        # no more of a Prometheus that failed this refresh's reads (``failed_at``).
        self._failed: dict[str, float] = {}

    @property
    def queries(self) -> int:
        """Queries sent so far, over every address."""
        return sum(c.queries for c in self._clients.values())

    def client(self, address: str) -> PrometheusClient:
        """The shared client for ``address``, created on first use."""
        if address not in self._clients:
            self._clients[address] = PrometheusClient(address, self.timeout_s)
        return self._clients[address]

    def failed_at(self, address: str, at: datetime) -> bool:
        """Whether a read of ``address`` at the refresh time ``at`` failed (timed out, refused, HTTP 5xx)."""
        return self._failed.get(address) == at.timestamp()

    def address_for(self, policy: TargetPolicy) -> str | None:
        """The Prometheus address for ``policy``: its own, else the default; None when neither is set."""
        return policy.prometheus_address or self.default_address

    # ---- instant reads ----------------------------------------------------------------

    def read(self, targets: Sequence[TargetQuery], at: datetime | None = None) -> dict[Any, Readings]:
        """Instant reads evaluated at ``at`` (default: Prometheus' now).

        Replicas that evaluate at the same grid time get the same answers from the same
        Prometheus, which is how several scaler replicas decide alike.
        """
        out: dict[Any, Readings] = {t.key: Readings() for t in targets}
        # Each selector's share of this read's regex work: one slow selector delays only its targets.
        budgets: dict[tuple[LabelMatcher, ...], MatchBudget] = defaultdict(
            lambda: MatchBudget(self.selector_steps)
        )
        groups: dict[tuple[str, str], list[TargetQuery]] = defaultdict(list)
        for t in targets:
            groups[(t.address, t.policy.engine)].append(t)
        for (address, engine), members in groups.items():
            if engine == "custom":
                self._read_custom(address, members, out, at)
            else:
                self._read_preset(address, engine, members, out, at, budgets)
        routed: dict[tuple[str, str], list[TargetQuery]] = defaultdict(list)
        for t in targets:
            if t.policy.router != "none":
                routed[(t.address, t.policy.router)].append(t)
        for (address, router), members in routed.items():
            self._read_families(address, ROUTERS[router], members, out, at, budgets)
        return out

    def _read_preset(
        self,
        address: str,
        engine: str,
        members: list[TargetQuery],
        out: dict[Any, Readings],
        at: datetime | None,
        budgets: dict[tuple[LabelMatcher, ...], MatchBudget],
    ) -> None:
        preset = preset_for(engine)
        if preset is None:
            for t in members:
                out[t.key].missing.update(
                    dict.fromkeys(CUSTOM_FIELDS, f"no query preset for engine {engine}")
                )
            return
        for name in NAMED_WHEN_ABSENT:
            if preset.family(name) is None:
                for t in members:
                    out[t.key].missing[name] = f"engine {engine} exports no metric for it"
        self._read_families(address, preset, members, out, at, budgets)

    def _read_families(
        self,
        address: str,
        preset: Preset,
        members: list[TargetQuery],
        out: dict[Any, Readings],
        at: datetime | None,
        budgets: dict[tuple[LabelMatcher, ...], MatchBudget],
    ) -> None:
        """Each family of ``preset`` once for ``members``, split per target by its selector, each
        selector's regex work charged to its budget in ``budgets``."""
        client = self.client(address)
        for family in preset.families:
            selectors = {t.key: selector_for(t.policy, family, t.namespace) for t in members}
            try:
                samples = self._instant(client, family, group_labels(selectors.values()), at)
            except PrometheusQueryError as exc:
                if at is not None:
                    self._failed[address] = at.timestamp()
                for t in members:
                    out[t.key].missing[family.field] = str(exc)
                continue
            # Targets with the same selector read the same series: split once per selector.
            per_selector: dict[tuple[LabelMatcher, ...], Readings] = {}
            for t in members:
                selector = selectors[t.key]
                part = per_selector.get(selector)
                if part is None:
                    part = per_selector[selector] = Readings()
                    try:
                        _apply(family, samples, selector, part, budgets[selector])
                    except OverBudget as exc:
                        part.missing[family.field] = str(exc)
                out[t.key].update(part)

    def _instant(
        self, client: PrometheusClient, family: Family, by: tuple[str, ...], at: datetime | None
    ) -> list[Sample]:
        """``family``'s samples grouped by (at least) ``by``, evaluated at ``at``.

        At a refresh time (``at`` given) the answer is kept until the next one, and a later read at
        the same time whose labels it covers is served from it: the refresh and the first decisions
        of targets that arrive after it share one query per family. Grouped by more labels than a
        read needs, the split per target sums the same series (a mean family averages the finer
        groups' means, as a refresh of targets with other labels does).
        """
        if at is None:
            return client.instant(family.render(by, self.rate_window), None)
        key, when = (client.address, family.template), at.timestamp()
        with self._locks.setdefault(key, threading.Lock()):
            kept = self._answered.get(key)
            if kept is not None and kept[0] == when:
                if set(by) <= set(kept[1]):
                    return kept[2]
                by = tuple(sorted(set(by) | set(kept[1])))
            samples = client.instant(family.render(by, self.rate_window), at)
            self._answered[key] = (when, by, samples)
            return samples

    def _read_custom(
        self, address: str, members: list[TargetQuery], out: dict[Any, Readings], at: datetime | None
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


def selector_for(
    policy: TargetPolicy, family: Family, namespace: str | None = None
) -> tuple[LabelMatcher, ...]:
    """The matchers that pick ``policy``'s series of ``family`` (``scaler.presets.Select``); a family
    read per namespace picks ``namespace``'s (every namespace's where it is not known)."""
    if family.select is Select.POOL:
        return policy.router_matchers
    if family.select is Select.MODEL:
        role = role_matcher(policy.role, RoleLabel(family.role_label)) if family.role_label else ()
        return (*(m for m in policy.matchers if m.name == family.model_label), *role)
    if family.select is Select.ANY:
        return ()
    if family.select is Select.NAMESPACE:
        return (LabelMatcher("namespace", MatchOp.EQ, namespace),) if namespace else ()
    return policy.series_matchers


def router_queues(address: str, at: datetime | None = None) -> list[RouterQueue]:
    """Every router queue series the Prometheus at ``address`` holds at ``at`` (else now), one per
    router, pool and model (``scaler.presets.router_queue_queries``): one instant query per router
    preset; PrometheusQueryError when one fails."""
    client = PrometheusClient(address)
    return [
        RouterQueue(
            router.name, s.labels.get(router.pool_label or "", ""), model_label, s.labels.get(model_label, "")
        )
        for router, query, model_label in router_queue_queries()
        for s in client.instant(query, at)
    ]


def _apply(
    family: Family,
    samples: list[Sample],
    selector: Sequence[LabelMatcher],
    into: Readings,
    budget: MatchBudget | None = None,
) -> None:
    matchers = tuple(selector)
    selected = [s for s in samples if matches_all(matchers, s.labels, budget)]
    if family.combine is Combine.PODS:  # none selected: no pod shows it, not an unknown
        pods: dict[str, float] = defaultdict(float)
        for s in selected:
            if math.isfinite(s.value):
                pods[s.labels.get("pod") or s.labels.get("instance") or "(no pod label)"] += max(0.0, s.value)
        into.pods[family.field] = dict(pods)
        return
    if not selected:
        into.missing[family.field] = "no series match labelSelector"
        return
    if family.value_label is not None:  # an info gauge: its figure is a label's (Family.value_of)
        selected = [Sample(s.labels, family.value_of(s.labels, s.value)) for s in selected]
    finite = [s for s in selected if math.isfinite(s.value)]
    if family.combine is Combine.HISTOGRAM:
        buckets: dict[float, float] = defaultdict(float)
        for s in finite:
            try:
                buckets[float(s.labels.get("le", "nan")) * family.le_scale] += s.value
            except ValueError:
                continue
        assert isinstance(family.field, Reading)
        into.histograms[family.field] = dict(buckets)
        return
    if not finite:
        into.missing[family.field] = (
            f"the series carry no {family.value_label} label (an older version)"
            if family.value_label is not None
            else "only NaN samples"
        )
        return
    values = [max(0.0, s.value) for s in finite]
    if family.combine is Combine.MEAN:
        combined = sum(values) / len(values)
    elif family.combine is Combine.MAX:
        combined = max(values)
    else:
        combined = sum(values)
    into.values[family.field] = combined * family.le_scale
