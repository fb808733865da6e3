"""The preset registry's types and the registry itself: families, presets, register and look up.

A family reads one metric: the template names its current name first and, joined by
``or``, older names read only where the current one is absent (never summed). Every
template aggregates *by* a set of label names (``{by}``) that the scaler chooses from the
``labelSelector``s of the targets sharing a Prometheus and an engine; the selectors
themselves are applied to the returned series in Python (``scaler.matchers``). So one query
per family serves every ScaledObject, and no user-written text reaches PromQL.
``{window}`` is the rate window (default ``1m``).
"""

from __future__ import annotations

import functools
import math
import re
import string
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from scaler.inputs import Input, InputSource, Reading, key_of
from scaler.matchers import LABEL_NAME, LabelMatcher, SelectorError, parse_selector


class Kind(StrEnum):
    """What a preset reads: the inference servers, or a router in front of them."""

    ENGINE = "engine"  # metadata `engine:`
    ROUTER = "router"  # metadata `router:`


class Combine(StrEnum):
    """How series from several groups are combined for one target."""

    SUM = "sum"
    MEAN = "mean"  # each group's value is already a mean over its pods: averaged over the groups
    MAX = "max"  # each group's value is its busiest pod's: the largest over the groups
    HISTOGRAM = "histogram"  # per-bucket rates, summed, then a quantile in Python
    PODS = "pods"  # one value per pod (grouped by its ``pod`` label, ``Family.keep``), kept apart


class Select(StrEnum):
    """Which of a target's matchers pick its series of a family."""

    TARGET = "target"  # the labelSelector (the servers' own series)
    POOL = "pool"  # the router's pool: <pool_label>="<inferencePool>"
    MODEL = "model"  # the labelSelector's matchers on the family's model label, if any
    ANY = "any"  # every series at the address (a router gauge that names no pool)
    # namespace="<the ScaledObject's>": a router's per-endpoint series, which name no pool or model
    # but the endpoint's namespace (an InferencePool selects the pods of its own namespace)
    NAMESPACE = "namespace"


# What a family can read: an input Prometheus answers (``scaler.inputs.Input``), or what inputs are
# derived from (``scaler.inputs.Reading``: a latency histogram's buckets and ``_sum``, the pods
# exporting metrics, which stand for the replicas without Kubernetes). The KV cache's usage is the
# mean over the pods (what measures a replica's batch slots, scaler.decider.capacity).
FIELDS: tuple[str, ...] = (*(i for i in Input if i.spec.source is InputSource.PROMETHEUS), *Reading)
# The family whose metric is each kind's queue: what `scaler convert` recognises in a KEDA query.
QUEUE_FIELD = {Kind.ENGINE: Input.QUEUE_WAITING, Kind.ROUTER: Input.ROUTER_QUEUE_WAITING}
# Metadata values that name no preset: your own queries, no router.
CUSTOM_ENGINE = "custom"
NO_ROUTER = "none"
RESERVED = {Kind.ENGINE: CUSTOM_ENGINE, Kind.ROUTER: NO_ROUTER}
DEFAULT_ENGINE = "vllm"  # metadata `engine` when unset; also the EPP's default engine
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")  # a preset's name, as metadata spells it

# A series selector in a template's text (its placeholders taken out): a metric name, its
# matchers, and what follows ("(" after a function, "[" after a range-vector selector).
_SELECTOR = re.compile(
    r"(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)\s*(?:\{(?P<matchers>[^{}]*)\})?\s*(?P<after>[(\[]?)"
)
_RANGE = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without)\s*\([^()]*\)")
_PROMQL_WORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset"})
_SET_OPERATORS = frozenset({"or", "and", "unless"})
_OR = re.compile(r"(?<![\w:])or(?![\w:])")  # the set operator, not a metric or label named with it
# Templates whose parsed selectors are kept: every family of every preset, with room to spare.
_TEMPLATES_KEPT = 1024


@dataclass(frozen=True, slots=True)
class Selector:
    """One series selector a family reads: its metric, the matchers the template writes, and how."""

    metric: str
    matchers: tuple[LabelMatcher, ...] = ()
    ranged: bool = False  # inside a rate(): a counter, or a histogram's _bucket/_sum/_count

    @property
    def base(self) -> str:
        """The histogram a ``_bucket``/``_sum``/``_count`` series belongs to; else the metric."""
        if self.ranged:
            for suffix in ("_bucket", "_sum", "_count"):
                if self.metric.endswith(suffix):
                    return self.metric.removesuffix(suffix)
        return self.metric

    @property
    def type(self) -> str:
        """The Prometheus type of the metric read: ``histogram``, ``counter`` or ``gauge``."""
        if self.base != self.metric:
            return "histogram"
        return "counter" if self.ranged else "gauge"


def _literal(template: str) -> str:
    """A template's text with its placeholders taken out and any range written out (``[2m]``)
    emptied, which names no metric."""
    text = "".join(literal for literal, _, _, _ in string.Formatter().parse(template))
    return _RANGE.sub("[]", text)


def _scan(text: str) -> tuple[Selector, ...]:
    """The series selectors in ``text`` (a template's literal text), in order."""
    out = []
    for found in _SELECTOR.finditer(_GROUPING.sub(" ", text)):
        name, after = found["name"], found["after"]
        if after == "(" or name in _PROMQL_WORDS or name in _SET_OPERATORS:
            continue  # a function, a keyword or a set operator
        out.append(Selector(name, parse_selector(found["matchers"] or ""), ranged=after == "["))
    return tuple(out)


@functools.lru_cache(maxsize=_TEMPLATES_KEPT)
def _selectors(template: str) -> tuple[Selector, ...]:
    """The series selectors in a template's text (its placeholders taken out), in order; cached,
    as the simulated exporters ask at every scrape."""
    return _scan(_literal(template))


@functools.lru_cache(maxsize=_TEMPLATES_KEPT)
def _generations(template: str) -> tuple[tuple[Selector, ...], tuple[Selector, ...]]:
    """The selectors before a template's first ``or`` (the current names) and after it (the older)."""
    text = _literal(template)
    found = _OR.search(text)
    if found is None:
        return tuple(dict.fromkeys(_scan(text))), ()
    current, older = _scan(text[: found.start()]), _scan(text[found.end() :])
    return tuple(dict.fromkeys(current)), tuple(dict.fromkeys(older))


@dataclass(frozen=True, slots=True)
class Family:
    """One input's query template, and how a target combines the series it returns."""

    field: str
    template: str
    combine: Combine = Combine.SUM
    le_scale: float = 1.0  # bucket bounds (or a histogram's _sum) times this give seconds (0.001 for _ms)
    select: Select = Select.TARGET
    model_label: str = "model_name"  # the label Select.MODEL keeps
    # A router family whose series name the pool they wait for: with a role set, only the role's are
    # read (Dynamo's KV router queue, by worker_type). The servers' own series (Select.TARGET) are
    # read by the preset's role_label; a router's other families serve both pools (scaler.roles).
    role_label: str | None = None
    # Labels every grouping of the template keeps besides the targets' (``pod`` for Combine.PODS).
    keep: tuple[str, ...] = ()
    # The current names are a share of a pool, the first metric over the sum of them all
    # (``used / (used + available + evictable)``): the simulated exporters write the first as the
    # share of a pool and the others as the rest (``scaler.sim.exposition.share_parts``).
    share: bool = False
    # An info gauge (1 a series) that carries its figure as a label: each series counts as the label's
    # figure (``value_of``; vLLM's ``cache_config_info``, whose ``kv_cache_size_tokens`` PromQL cannot sum).
    value_label: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "field", key_of(self.field))

    def render(self, by: tuple[str, ...], window: str) -> str:
        """The PromQL grouped by ``by`` over rate ``window``; ValueError on an invalid label name."""
        for label in by:
            if not LABEL_NAME.fullmatch(label):
                raise ValueError(f"invalid label name {label!r}")
        labels = ("le", *by) if self.combine is Combine.HISTOGRAM else by
        kept = (*self.keep, self.value_label) if self.value_label else self.keep
        labels = (*labels, *(k for k in kept if k not in labels))
        return self.template.format(by=", ".join(labels), window=window)

    def value_of(self, labels: Mapping[str, str], value: float) -> float:
        """A series' value as this family reads it: the sample's, or for an info gauge the number in
        its ``value_label`` times the sample (an info gauge is 1 a series, so a sum of them grouped by
        the label counts the series that carry each figure), NaN where the label is absent or not a
        number (an older server).

        *Example*: ``sum by (kv_cache_size_tokens) (vllm:cache_config_info)`` answering
        ``{kv_cache_size_tokens="290925"} 4`` (four engines of that size) reads 1,163,700 under
        ``value_label="kv_cache_size_tokens"``; without the label, NaN."""
        if self.value_label is None:
            return value
        try:
            return float(labels.get(self.value_label, "nan")) * value
        except ValueError:
            return math.nan

    def selectors(self) -> tuple[Selector, ...]:
        """The series the template reads, the current name first, then the older ones (``or``).

        *Example*: ``avg by ({by}) (vllm:kv_cache_usage_perc or vllm:gpu_cache_usage_perc)``
        gives ``vllm:kv_cache_usage_perc``, then ``vllm:gpu_cache_usage_perc``.
        """
        return _selectors(self.template)

    def generations(self) -> tuple[tuple[Selector, ...], tuple[Selector, ...]]:
        """The series the current names read (before the template's first ``or``), each once, and
        those the older names read, where the current are absent.

        *Example*: ``avg by ({by}) (sglang:kv_used_tokens / (sglang:kv_used_tokens + ...)) or avg by
        ({by}) (sglang:token_usage)`` gives the three ``kv_*`` gauges, then ``sglang:token_usage``.
        """
        return _generations(self.template)

    def problems(self) -> list[str]:
        """What is wrong with this family (empty when nothing): its field, its template."""
        out = []
        if self.field not in FIELDS:
            out.append(f"field {self.field!r} is not an input a preset can feed ({', '.join(FIELDS)})")
        try:
            found = self.selectors()
        except SelectorError as exc:
            return [*out, f"{self.field}: a matcher in the template cannot be read: {exc}"]
        if not found:
            out.append(f"{self.field}: the template reads no metric")
        elif (
            len(found) > 1
            and " or " not in self.template
            and self.combine is not Combine.PODS
            and not self.share
        ):
            out.append(
                f"{self.field}: a family reads one metric; older names follow the current one, joined by `or`"
                " (a per-pod signature, Combine.PODS, joins several with `and`; a share of a pool reads its"
                " parts)"
            )
        if self.share and len(self.generations()[0]) < 2:
            out.append(f"{self.field}: a share reads its pool's parts: used first, then the rest")
        if self.value_label is not None and not LABEL_NAME.fullmatch(self.value_label):
            out.append(f"{self.field}: value_label {self.value_label!r} is not a label name")
        if self.value_label is not None and self.combine not in (Combine.SUM, Combine.MEAN, Combine.MAX):
            out.append(f"{self.field}: a label's figure combines as a sum, a mean or a maximum")
        return out


@dataclass(frozen=True, slots=True)
class Removal:
    """A metric name its upstream removed: by what change, and the name to read instead."""

    by: str  # e.g. "vLLM PR #32661 (deprecated in 0.11)"
    instead: str


@dataclass(frozen=True, slots=True)
class Preset:
    """An engine's (or a router's) query families, the facts about its servers, and its sources."""

    name: str
    families: tuple[Family, ...]
    source: str  # the upstream repository and files the metric names were checked against
    kind: Kind = Kind.ENGINE
    image: str | None = None  # a regex on container images (case ignored): its servers' pods
    model_label: str | None = "model_name"  # the label its series name the model by (None: none)
    lowercases_model: bool = False  # it writes the model label lower-cased
    labels: Mapping[str, str] = field(default_factory=dict)  # other labels on each of its series
    per_pod: bool = True  # each server pod exports its series (False: one frontend, the fleet's sums)
    both_generations: bool = False  # the upstream writes each older name beside the current one
    pool_label: str | None = None  # a router's label naming its pool (metadata inferencePool)
    # The pod or series label its servers' series tell a prefill/decode pool's apart by: the
    # default roleSelector (None: the servers label no role; scaler.roles).
    role_label: str | None = None
    # Older names the upstream no longer writes at all, each with when and what replaced it.
    removed: Mapping[str, Removal] = field(default_factory=dict)
    # Gauges a router writes per endpoint and does not delete when the endpoint goes: never read
    # as demand, only joined against the live pods to say a target is inert (scaler.inert,
    # stranded). ``endpoint_label`` names the endpoint (a pod, or "<pod>-rank-<n>").
    endpoint_series: tuple[str, ...] = ()
    endpoint_label: str = "endpoint_name"

    def family(self, field: str) -> Family | None:
        """The family that gives ``field``, or None when the preset has none."""
        return next((f for f in self.families if f.field == field), None)

    def metrics(self) -> tuple[str, ...]:
        """Every metric name the preset reads, current and older, in order, each once."""
        return tuple(dict.fromkeys(s.metric for f in self.families for s in f.selectors()))

    def reads_image(self, image: str) -> bool:
        """Whether a container ``image`` runs this preset's servers."""
        return self.image is not None and re.search(self.image, image, re.IGNORECASE) is not None

    def problems(self) -> list[str]:
        """What is wrong with this preset (empty when nothing), each family's problems included."""
        out = []
        if not _NAME.fullmatch(self.name):
            out.append(f"name {self.name!r} must be lower-case letters, digits and '-' (a metadata value)")
        if self.name == RESERVED[self.kind]:
            out.append(f"{self.kind} {self.name!r} is reserved (it names no preset)")
        if not self.families:
            out.append("it has no family")
        fields = [f.field for f in self.families]
        out += [f"field {f} has two families" for f in sorted({f for f in fields if fields.count(f) > 1})]
        for family in self.families:
            out += family.problems()
        if self.image is not None:
            try:
                re.compile(self.image)
            except re.error as exc:
                out.append(f"image {self.image!r} is not a regex: {exc}")
        if self.pool_label is None and any(f.select is Select.POOL for f in self.families):
            out.append("a family selects by pool but pool_label is not set")
        return out


class PresetError(ValueError):
    """A preset that cannot be registered; the message names every problem."""


class Registry:
    """The presets by kind and name. ``engines`` and ``routers`` are read-only views that follow it."""

    def __init__(self) -> None:
        self._by_kind: dict[Kind, dict[str, Preset]] = {kind: {} for kind in Kind}
        self.engines: Mapping[str, Preset] = MappingProxyType(self._by_kind[Kind.ENGINE])
        self.routers: Mapping[str, Preset] = MappingProxyType(self._by_kind[Kind.ROUTER])

    def register(self, preset: Preset) -> Preset:
        """Add ``preset``; PresetError naming every problem (its name taken, a bad family, ...)."""
        problems = preset.problems()
        if preset.name in self._by_kind[preset.kind]:
            problems.append(f"{preset.kind} {preset.name!r} is registered already")
        if problems:
            raise PresetError(f"preset {preset.name!r}: " + "; ".join(problems))
        self._by_kind[preset.kind][preset.name] = preset
        return preset

    def unregister(self, preset: Preset) -> None:
        """Remove ``preset``; KeyError when it is not the one registered under its name."""
        taken = self._by_kind[preset.kind]
        if taken.get(preset.name) is not preset:
            raise KeyError(f"{preset.kind} {preset.name!r} is not registered")
        del taken[preset.name]

    @contextmanager
    def registered(self, preset: Preset) -> Iterator[Preset]:
        """``preset`` registered for the ``with`` block, unregistered after it."""
        self.register(preset)
        try:
            yield preset
        finally:
            self.unregister(preset)

    def of(self, kind: Kind) -> Mapping[str, Preset]:
        """The presets of ``kind`` by name (a read-only view)."""
        return self.engines if kind is Kind.ENGINE else self.routers

    def all(self) -> tuple[Preset, ...]:
        """Every preset, the engines first."""
        return (*self.engines.values(), *self.routers.values())


REGISTRY = Registry()
register = REGISTRY.register
unregister = REGISTRY.unregister
registered = REGISTRY.registered
PRESETS = REGISTRY.engines
ROUTERS = REGISTRY.routers


def preset_for(engine: str) -> Preset | None:
    """The query preset of ``engine``, or None when it has none (``custom``)."""
    return PRESETS.get(engine)


def choices(kind: Kind) -> tuple[str, ...]:
    """The metadata values of ``kind``: every preset's name, then ``custom`` (or ``none``)."""
    return (*REGISTRY.of(kind), RESERVED[kind])
