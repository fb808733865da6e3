"""``scaler convert``: a ScaledObject with plain KEDA triggers, rewritten for this scaler.

The rewrite, trigger by trigger (``convert``; every change is reported, one line each):

* ``prometheus`` on an engine's queue gauge, as ``sum(METRIC{matchers})``: the matching
  ``engine`` preset, the matchers as ``labelSelector``, the threshold as
  ``targetQueuePerReplica``, ``serverAddress`` as ``prometheusAddress``. The queue gauges:
  ``vllm:num_requests_waiting``, ``sglang:num_queue_reqs``, ``tgi_queue_size``,
  ``nv_trt_llm_request_metrics{request_type="waiting"}`` (``scaler.sources.presets``).
* any other ``prometheus`` query (the first one): ``engine: custom`` with ``queueQuery``.
* ``prometheus`` on GPU utilisation (DCGM, ``nvidia_gpu_*``, ``*gpu_util*``): dropped.
  Utilisation lags the queue and cannot see requests waiting; the load signal replaces it.
  Its threshold is not carried (the report says so): the load signal's headroom comes from the
  TTFT objective at the forecast load, not from a utilisation target.
* ``cron``: pre-warm windows (``prewarmStart``/``prewarmEnd``/``prewarmReplicas``/
  ``timezone`` for one, ``prewarmWindows`` for several); KEDA's four keys are required.
* anything else: kept, with a warning: the HPA takes the largest of its metrics, so while
  another trigger asks for more, the GPU check cannot hold a scale-up.

No key is lost silently: every key of a converted trigger is carried (a report line says
where to), dropped with its reason, or refused with the key it most resembles, against the
keys KEDA's scaler of that type accepts (``PROMETHEUS_KEYS``, ``CRON_KEYS``) and, for the
ScaledObject's own fields, its CRD (``scaler.manifest``). A refused key raises
``RefusedKeysError``; with ``force`` it is dropped and reported instead. An error names the
key the user wrote (``desiredReplicas``), never one the conversion writes
(``prewarmReplicas``).

Then ``minReplicaCount``/``maxReplicaCount`` and the metadata's ``minReplicas``/``maxReplicas``
are written equal (``minReplicaCount: 0`` becomes 1: a cold start on the next request is
what this scaler exists to avoid); the example's ``fallback`` and HPA ``behavior`` are added
where the object has none; every other field is kept as written, comments included.

Worked example: the published configuration (``benchmarks/baseline-published.yaml``) has
``sum(vllm:num_requests_waiting{model_name="llama-70b"})`` over 50, a DCGM utilisation
trigger over 85 and a weekday 09:00-12:00 cron for 8 replicas. It becomes one external
trigger with ``engine: vllm``, ``labelSelector: model_name="llama-70b"``,
``targetQueuePerReplica: "50"``, ``prewarmStart: 0 9 * * 1-5``, ``prewarmEnd: 0 12 * * 1-5``,
``prewarmReplicas: "8"``, ``timezone: Asia/Shanghai``, ``minReplicas: "2"``,
and ``maxReplicas: "16"``; the utilisation trigger is gone, with a comment saying why. The
per-replica capacities are not in the old object: the scaler measures them (``scaler.capacity``).
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import re
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from scaler.config import FieldProblem, MetadataError, PrewarmWindow, parse_metadata
from scaler.hpa import SEVERAL_TRIGGERS
from scaler.inventory.objects import KEDA_MAX_REPLICA_COUNT, KEDA_MIN_REPLICA_COUNT
from scaler.manifest import ManifestError, closest, first_scaledobject, unknown_fields, yaml_problem
from scaler.matchers import SelectorError, parse_selector
from scaler.replay import INSTALL_HINT, missing_extra
from scaler.replay.cli import DEFAULT_START, add_history_options, check_span_options, history_span
from scaler.sources.presets import GPU_UTILISATION

if TYPE_CHECKING:
    from scaler.config import TargetPolicy
    from scaler.replay.history import Measured
    from scaler.replay.replay import RunResult
    from scaler.replay.trace import Trace

DEFAULT_SCALER_ADDRESS = "llm-gpu-scaler.llm-gpu-scaler.svc.cluster.local:9090"

# An engine's queue gauge -> (engine preset, matchers the preset adds itself and the
# labelSelector must leave out).
QUEUE_METRICS: Mapping[str, tuple[str, frozenset[str]]] = {
    "vllm:num_requests_waiting": ("vllm", frozenset()),
    "sglang:num_queue_reqs": ("sglang", frozenset()),
    "tgi_queue_size": ("tgi", frozenset()),
    "nv_trt_llm_request_metrics": ("triton", frozenset({'request_type="waiting"'})),
}
_SUM_OF_ONE_SELECTOR = re.compile(
    r"^\s*sum\s*\(\s*(?P<metric>[a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{(?P<matchers>[^{}]*)\})?\s*\)\s*$"
)
# The metadata keys KEDA's prometheus scaler accepts, as its documentation lists them:
# https://keda.sh/docs/2.19/scalers/prometheus/ (kedacore/keda-docs,
# content/docs/2.19/scalers/prometheus.md): the trigger specification's keys, ``authModes``
# from its authentication parameters, ``awsRegion`` and ``identityOwner`` from its Amazon
# Managed Prometheus example; ``metricName`` and ``cortexOrgID`` from the 2.10 page (both
# deprecated then, gone in 2.12). Each with what becomes of it here: None when the conversion
# carries it (the report says where to), otherwise why it is dropped.
_IDENTITY = "this scaler reads Prometheus with its own identity (docs/deploy.md)"
_AUTH = (
    "KEDA gives it to its own Prometheus scaler, not to an external one; grant this scaler's"
    " ServiceAccount access to Prometheus"
)
PROMETHEUS_KEYS: Mapping[str, str | None] = {
    "serverAddress": None,
    "query": None,
    "threshold": None,
    "activationThreshold": "this scaler is always active: its floor never reaches zero",
    "ignoreNullValues": "a missing input never makes this scaler's target fall",
    "namespace": "Thanos/Cortex tenancy is not read; point prometheusAddress at the tenant's URL",
    "customHeaders": _IDENTITY,
    "unsafeSsl": "this scaler verifies Prometheus' certificate with the system's CAs",
    "queryParameters": "the presets' queries take no extra parameters",
    "timeout": "this scaler's Prometheus timeout is its --prometheus-timeout-seconds, one for every target",
    "authModes": _AUTH,
    "awsRegion": _IDENTITY,
    "identityOwner": _IDENTITY,
    "metricName": "KEDA names the metric itself (the key was deprecated in KEDA 2.10 and removed in 2.12)",
    "cortexOrgID": "KEDA removed it in 2.12; point prometheusAddress at the tenant's URL",
}
# The metadata keys KEDA's cron scaler accepts, all four required:
# https://keda.sh/docs/2.18/scalers/cron/ (kedacore/keda-docs, content/docs/2.18/scalers/cron.md).
CRON_KEYS = ("timezone", "start", "end", "desiredReplicas")
# A cron trigger's keys -> the pre-warm window's fields (scaler.config.PrewarmWindow).
_WINDOW_FIELDS = {"start": "start", "end": "end", "replicas": "desiredReplicas", "timezone": "timezone"}
ACCEPTED_KEYS: Mapping[str, tuple[str, ...]] = {
    "prometheus": tuple(PROMETHEUS_KEYS),
    "cron": CRON_KEYS,
}


class ConvertError(ValueError):
    """The input cannot be converted; the message says what to change."""


class RefusedKeysError(ConvertError):
    """Keys KEDA does not accept, one line each with the key it most resembles."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        super().__init__("; ".join(lines))


@dataclass
class Conversion:
    """The converted document, and every change and warning, one line each."""

    document: CommentedMap
    changes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _example() -> CommentedMap:
    yaml = YAML()
    text = (resources.files("scaler") / "examples" / "scaledobject.yaml").read_text()
    doc: CommentedMap = yaml.load(text)
    return doc


def queue_preset(query: str) -> tuple[str, str] | None:
    """``(engine, labelSelector)`` when ``query`` is ``sum(QUEUE_GAUGE{matchers})``, else None."""
    match = _SUM_OF_ONE_SELECTOR.match(query)
    if match is None or match["metric"] not in QUEUE_METRICS:
        return None
    engine, implied = QUEUE_METRICS[match["metric"]]
    raw = [m.strip() for m in (match["matchers"] or "").split(",") if m.strip()]
    compact = [re.sub(r"\s*(=~|!~|!=|=)\s*", r"\1", m) for m in raw]
    if not implied <= set(compact):
        return None  # e.g. triton's gauge without request_type="waiting" is not the queue
    selector = ", ".join(m for m, c in zip(raw, compact, strict=True) if c not in implied)
    try:
        parse_selector(selector)
    except SelectorError:
        return None
    return engine, selector


def _where(index: int, trigger: Mapping[str, Any]) -> str:
    name = trigger.get("name")
    return f"triggers[{index}] ({trigger.get('type')}{', ' + str(name) if name else ''})"


def _and(keys: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return keys[0] if len(keys) == 1 else ", ".join(keys[:-1]) + " and " + keys[-1]


def _unknown_keys(doc: CommentedMap, force: bool, out: Conversion) -> list[str]:
    """Every key KEDA does not accept: a line each to refuse, or with ``force`` removed and reported.

    The ScaledObject's own fields against its CRD (``scaler.manifest``), then the metadata
    of each ``prometheus`` and ``cron`` trigger against the keys KEDA's scaler of that type
    accepts. *Example*: ``treshold`` in a prometheus trigger gives ``triggers[0]
    (prometheus): treshold is not a key of KEDA's prometheus scaler; did you mean threshold?``.
    """
    refused: list[str] = []

    def found(what: str, why: str, parent: Any, key: Any) -> None:
        if force:
            del parent[key]
            out.changes.append(f"{what} dropped (--force): {why}")
        else:
            refused.append(f"{what} is {why}")

    for unknown in unknown_fields(doc):
        parent: Any = doc
        for step in unknown.location[:-1]:
            parent = parent[step]
        found(unknown.path, unknown.why, parent, unknown.location[-1])
    spec = doc.get("spec")
    triggers = spec.get("triggers") if isinstance(spec, Mapping) else None
    for index, trigger in enumerate(triggers if isinstance(triggers, list) else []):
        meta = trigger.get("metadata") if isinstance(trigger, Mapping) else None
        accepted = ACCEPTED_KEYS.get(str(trigger.get("type"))) if isinstance(trigger, Mapping) else None
        if accepted is None or not isinstance(meta, Mapping):
            continue
        for key in [k for k in meta if k not in accepted]:
            guess = closest(str(key), accepted)
            hint = f"; did you mean {guess}?" if guess else f" (it accepts {', '.join(accepted)})"
            found(
                f"{_where(index, trigger)}: {key}",
                f"not a key of KEDA's {trigger['type']} scaler{hint}",
                meta,
                key,
            )
    return refused


@dataclass
class _Triggers:
    """The old triggers, walked once: what becomes the external trigger's metadata, what stays.

    ``origin`` maps each metadata key written to what the user wrote it from (``triggers[0]
    (prometheus): threshold`` and its value), so that an error names the user's key.
    """

    out: Conversion
    metadata: dict[str, str]
    crons: int = 0
    # Each cron trigger's window: where it was, the window, and desiredReplicas as written.
    windows: list[tuple[str, dict[str, Any], Any]] = field(default_factory=list)
    kept: list[Any] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    queue_from: str | None = None
    external: dict[str, Any] = field(default_factory=dict)
    origin: dict[str, tuple[str, Any]] = field(default_factory=dict)

    def walk(self, triggers: list[Any]) -> None:
        self.crons = sum(isinstance(t, Mapping) and t.get("type") == "cron" for t in triggers)
        for index, trigger in enumerate(triggers):
            if not isinstance(trigger, Mapping):
                raise ConvertError(f"triggers[{index}] is not a mapping with type and metadata")
            where = _where(index, trigger)
            kind = trigger.get("type")
            meta = trigger.get("metadata") or {}
            if not isinstance(meta, Mapping):
                raise ConvertError(f"{where}: metadata is not a mapping of keys to strings")
            if kind == "external" and any(
                k in meta for k in ("engine", "labelSelector", "targetQueuePerReplica")
            ):
                raise ConvertError(f"{where} is already this scaler's trigger: nothing to convert")
            if kind == "prometheus":
                self.prometheus(where, trigger, meta)
            elif kind == "cron":
                self.cron(where, trigger, meta)
            else:
                self.kept.append(trigger)
                self.out.warnings.append(f"{where}: kept as it is; {SEVERAL_TRIGGERS}")
        if self.queue_from is None:
            raise ConvertError(
                "no prometheus trigger to take the queue from: write the external trigger by hand"
                " (README, trigger metadata)"
            )
        if len(self.windows) == 1:
            _, w, _ = self.windows[0]
            self.metadata |= {
                "prewarmStart": w["start"],
                "prewarmEnd": w["end"],
                "prewarmReplicas": str(w["replicas"]),
                "timezone": w["timezone"],
            }
        elif self.windows:
            self.metadata["prewarmWindows"] = json.dumps([w for _, w, _ in self.windows])
            self.origin["prewarmWindows"] = ("the cron triggers", None)

    def explain(self, problem: FieldProblem) -> str:
        """A problem with the converted metadata, in the words of the key the user wrote."""
        if problem.key not in self.origin:
            return f"the converted metadata is invalid: {problem}"
        written, value = self.origin[problem.key]
        return f"{written}{'' if value is None else f'={value!r}'}: {problem.rule}"

    def utilisation(self, where: str, threshold: Any) -> None:
        """Say what became of a utilisation trigger's threshold: nothing carries it.

        *Example*: a DCGM trigger over 85 reports ``threshold 85 not carried: ...``.
        """
        self.out.changes.append(
            f"{where}: threshold {threshold} not carried: the load signal's headroom comes from"
            " ttftObjectiveSeconds and ttftObjectivePercentile at the forecast load, not from a"
            " utilisation target"
        )

    def prometheus(self, where: str, trigger: Mapping[str, Any], meta: Mapping[str, Any]) -> None:
        out = self.out
        if GPU_UTILISATION.search(str(meta.get("query") or "")):
            self.dropped.append(f"{where} on GPU utilisation")
            others = [str(k) for k in meta if k != "threshold"]
            others += [str(k) for k in trigger if k not in ("type", "metadata", "name")]
            out.changes.append(
                f"{where}: dropped{', with its ' + _and(others) if others else ''}: GPU utilisation"
                " lags the queue and cannot see requests waiting; the load signal replaces it"
            )
            if "threshold" in meta:
                self.utilisation(where, meta["threshold"])
        elif self.queue_from is not None:
            self.kept.append(trigger)
            out.warnings.append(
                f"{where}: kept as it is (the queue already comes from {self.queue_from}); {SEVERAL_TRIGGERS}"
            )
        else:
            self.queue_from = where
            self.queue(where, meta)
            self.threshold(where, meta["threshold"])
            self.unconverted(where, trigger, meta)

    def queue(self, where: str, meta: Mapping[str, Any]) -> None:
        """The queue trigger's query as an engine preset (and labelSelector) or a custom queueQuery."""
        required = ("serverAddress", "query", "threshold")
        for key in ("query", "threshold"):
            if not str(meta.get(key) or "").strip():
                raise ConvertError(
                    f"{where}: {key} {'is empty' if key in meta else 'is missing'}: KEDA's prometheus"
                    f" scaler requires {_and(required)}"
                )
        query = str(meta["query"])
        preset = queue_preset(query)
        origin = (f"{where}: query", query)
        if preset is not None:
            engine, selector = preset
            self.metadata["engine"] = engine
            self.origin["engine"] = origin
            if selector:
                self.metadata["labelSelector"] = selector
                self.origin["labelSelector"] = origin
            self.out.changes.append(
                f"{where}: became engine: {engine}"
                + (f", labelSelector: {selector}" if selector else "")
                + f": the query is that engine's queue gauge, which the {engine} preset reads"
            )
        else:
            self.metadata["engine"] = "custom"
            self.metadata["queueQuery"] = query
            self.origin["engine"] = self.origin["queueQuery"] = origin
            self.out.changes.append(
                f"{where}: became engine: custom with queueQuery: the query is not a known engine's"
                " queue gauge; add runningQuery and promptTokensQuery to turn the load signal on"
            )
        if meta.get("serverAddress"):
            self.metadata["prometheusAddress"] = str(meta["serverAddress"])
            self.origin["prometheusAddress"] = (f"{where}: serverAddress", meta["serverAddress"])

    def threshold(self, where: str, threshold: Any) -> None:
        """The queue trigger's threshold as targetQueuePerReplica, when it is a count above 0."""
        try:
            number = float(str(threshold))
        except ValueError:
            raise ConvertError(f"{where}: threshold={threshold!r} is not a number") from None
        if not number > 0:
            raise ConvertError(f"{where}: threshold={threshold!r} must be more than 0 waiting requests")
        self.metadata["targetQueuePerReplica"] = str(threshold)
        self.origin["targetQueuePerReplica"] = (f"{where}: threshold", threshold)
        self.out.changes.append(
            f"{where}: threshold {threshold} became targetQueuePerReplica: the same waiting"
            " requests per replica the HPA divided the query by (AverageValue)"
        )

    def unconverted(self, where: str, trigger: Mapping[str, Any], meta: Mapping[str, Any]) -> None:
        """What became of the queue trigger's other keys: each carried or dropped, with why."""
        out = self.out
        if "prometheusAddress" in self.metadata:
            out.changes.append(
                f"{where}: serverAddress became prometheusAddress: the scaler reads that Prometheus"
            )
        if str(trigger.get("metricType") or "AverageValue") != "AverageValue":
            out.warnings.append(
                f"{where}: metricType {trigger['metricType']}: its threshold was a total, not a"
                " count per replica; check targetQueuePerReplica"
            )
        for key, why in PROMETHEUS_KEYS.items():
            if why is not None and key in meta:
                out.changes.append(f"{where}: {key} dropped: {why}")
        if trigger.get("authenticationRef") is not None:
            out.changes.append(f"{where}: authenticationRef dropped: {_AUTH}")
        if "useCachedMetrics" in trigger:
            self.external["useCachedMetrics"] = trigger["useCachedMetrics"]
            out.changes.append(
                f"{where}: useCachedMetrics carried to the external trigger: KEDA answers the HPA from"
                " its cache of the scaler's answer between polls"
            )
        if trigger.get("name"):
            out.changes.append(
                f"{where}: name dropped: its triggers become one external trigger, which KEDA names"
            )

    def cron(self, where: str, trigger: Mapping[str, Any], meta: Mapping[str, Any]) -> None:
        missing = [k for k in CRON_KEYS if k not in meta]
        if missing:
            raise ConvertError(
                f"{where}: {_and(missing)} {'is' if len(missing) == 1 else 'are'} missing:"
                f" KEDA's cron scaler requires {_and(CRON_KEYS)}"
            )
        written = {name: meta[key] for name, key in _WINDOW_FIELDS.items()}
        try:
            checked = PrewarmWindow(**{name: str(value) for name, value in written.items()})
        except ValidationError as exc:
            problems = []
            for error in exc.errors():
                name = str(error["loc"][0]) if error["loc"] else "replicas"
                message = str(error["msg"]).removeprefix("Value error, ")
                problems.append(f"{where}: {_WINDOW_FIELDS.get(name, name)}={written.get(name)!r}: {message}")
            raise ConvertError("; ".join(problems)) from None
        if checked.start == checked.end:
            raise ConvertError(
                f"{where}: start and end are the same schedule ({checked.start}), so the window never opens"
            )
        window = {
            "start": str(written["start"]),
            "end": str(written["end"]),
            "replicas": checked.replicas,
            "timezone": str(written["timezone"]),
        }
        self.windows.append((where, window, written["replicas"]))
        if self.crons == 1:
            target = "prewarmStart, prewarmEnd, prewarmReplicas and timezone"
            for name, key in (("prewarmStart", "start"), ("prewarmEnd", "end"), ("timezone", "timezone")):
                self.origin[name] = (f"{where}: {key}", meta[key])
            self.origin["prewarmReplicas"] = (f"{where}: desiredReplicas", meta["desiredReplicas"])
        else:
            target = f"prewarmWindows[{len(self.windows) - 1}]"
        self.out.changes.append(
            f"{where}: became a pre-warm window ({window['start']} -> {window['end']},"
            f" {window['timezone']}, {window['replicas']} replicas) as {target}: the scaler keeps it as"
            " a floor and starts it one cold start early"
        )
        extras = [str(k) for k in trigger if k not in ("type", "metadata")]
        if extras:
            self.out.changes.append(
                f"{where}: {_and(extras)} dropped: the window is part of the external trigger now"
            )


def convert(
    source: CommentedMap, scaler_address: str = DEFAULT_SCALER_ADDRESS, force: bool = False
) -> Conversion:
    """The ScaledObject ``source`` rewritten for this scaler (``source`` is not changed).

    A key KEDA does not accept raises ``RefusedKeysError``, or with ``force`` is dropped and reported.
    """
    if not isinstance(source, Mapping) or source.get("kind") != "ScaledObject":
        raise ConvertError("not a ScaledObject (kind: ScaledObject)")
    doc: CommentedMap = copy.deepcopy(source)
    out = Conversion(doc)
    refused = _unknown_keys(doc, force, out)
    if refused:
        raise RefusedKeysError(refused)
    forced = [line.split(" dropped (--force)")[0] for line in out.changes]
    try:
        _convert(doc, scaler_address, out)
    except ConvertError as exc:
        if not forced:
            raise
        raise ConvertError(f"{exc} (--force dropped {'; '.join(forced)})") from None
    return out


def _convert(doc: CommentedMap, scaler_address: str, out: Conversion) -> None:
    spec = doc.get("spec")
    if not isinstance(spec, CommentedMap):
        raise ConvertError("the ScaledObject has no spec")
    triggers = spec.get("triggers")
    if not isinstance(triggers, list) or not triggers:
        raise ConvertError("the ScaledObject has no triggers")
    walk = _Triggers(out, {"scalerAddress": scaler_address})
    walk.walk(triggers)
    metadata = walk.metadata
    _replica_bounds(spec, metadata, out, walk.origin)
    high = int(metadata["maxReplicas"])
    for where, window, written in walk.windows:
        if window["replicas"] > high:
            raise ConvertError(
                f"{where}: desiredReplicas={written!r} is above maxReplicaCount ({high}), which"
                " the HPA never exceeds: lower it, or raise maxReplicaCount"
            )
    try:
        parse_metadata(metadata)
    except MetadataError as exc:
        raise ConvertError("; ".join(walk.explain(p) for p in exc.problems)) from None

    external = CommentedMap()
    external["type"] = "external"
    external.update(walk.external)
    external["metadata"] = CommentedMap(metadata)
    new_triggers = CommentedSeq([external, *walk.kept])
    spec["triggers"] = new_triggers
    if walk.dropped:
        note = (
            "Converted by `scaler convert`. Dropped: " + "; ".join(walk.dropped) + ": utilisation lags the"
            " queue and cannot see requests waiting; the load signal replaces it."
        )
        spec.yaml_set_comment_before_after_key(
            "triggers", before="\n".join(textwrap.wrap(note, 86)), indent=2
        )
    _add_example_safety(spec, out)


def _int(value: Any, what: str) -> int:
    try:
        return int(str(value))
    except ValueError:
        raise ConvertError(f"{what}={value!r} is not an integer") from None


def _replica_bounds(
    spec: CommentedMap, metadata: dict[str, str], out: Conversion, origin: dict[str, tuple[str, Any]]
) -> None:
    for key, written in (("minReplicas", "minReplicaCount"), ("maxReplicas", "maxReplicaCount")):
        if written in spec:
            origin[key] = (f"spec.{written}", spec[written])
    low = _int(spec.get("minReplicaCount", KEDA_MIN_REPLICA_COUNT), "minReplicaCount")
    high = _int(spec.get("maxReplicaCount", KEDA_MAX_REPLICA_COUNT), "maxReplicaCount")
    if low < 1:
        was = f"Was {low}" if "minReplicaCount" in spec else "Not set (KEDA's default is 0)"
        spec["minReplicaCount"] = 1
        spec.yaml_set_comment_before_after_key(
            "minReplicaCount",
            before=f"{was}: scaling an inference workload to zero means a cold start (minutes) on\n"
            "the next request; this scaler keeps a floor of at least one replica.",
            indent=2,
        )
        out.changes.append(
            f"spec.minReplicaCount: {was[0].lower() + was[1:]}, became 1: a cold start on the next request"
            " is avoided"
        )
        low = 1
    if high < low:
        raise ConvertError(f"spec.maxReplicaCount={high} is below minReplicaCount ({low})")
    if "maxReplicaCount" not in spec:
        spec["maxReplicaCount"] = high
        out.changes.append(
            f"spec.maxReplicaCount: written as {high} (KEDA's default), so the trigger can match it"
        )
    if "idleReplicaCount" in spec:
        del spec["idleReplicaCount"]
        out.changes.append(
            "spec.idleReplicaCount dropped: this scaler is always active, its floor is minReplicas"
        )
    metadata["minReplicas"] = str(low)
    metadata["maxReplicas"] = str(high)
    out.changes.append(
        f"metadata minReplicas/maxReplicas: {low}/{high}, equal to minReplicaCount/maxReplicaCount:"
        " the HPA keeps replicas within the latter, the scaler decides within the former"
    )


def _add_example_safety(spec: CommentedMap, out: Conversion) -> None:
    """The example's ``fallback`` and HPA ``behavior``, where the object has none."""
    example = _example()["spec"]
    if "fallback" in spec:
        out.warnings.append(
            "spec.fallback kept as written; the example uses failureThreshold 4 and"
            " behavior: currentReplicasIfHigher (KEDA 2.17+)"
        )
    else:
        fallback = copy.deepcopy(example["fallback"])
        fallback["replicas"] = max(int(spec.get("minReplicaCount", 1)), 1)
        spec["fallback"] = fallback
        out.changes.append(
            "spec.fallback added: after 4 failed polls KEDA keeps the current replicas (or"
            f" {fallback['replicas']}, if higher) until the scaler answers again"
        )
    advanced = spec.get("advanced")
    hpa_config = advanced.get("horizontalPodAutoscalerConfig") if isinstance(advanced, Mapping) else None
    if isinstance(hpa_config, Mapping) and "behavior" in hpa_config:
        out.warnings.append(
            "advanced.horizontalPodAutoscalerConfig.behavior kept as written; the example's (scale-down"
            " window 0, 2 pods/min; scale-up at once) lets the scaler's hold do the holding (docs/deploy.md)"
        )
        return
    behavior = copy.deepcopy(example["advanced"]["horizontalPodAutoscalerConfig"]["behavior"])
    for policy in behavior["scaleUp"]["policies"]:
        if policy["type"] == "Pods":
            policy["value"] = int(spec["maxReplicaCount"])
    if not isinstance(advanced, CommentedMap):
        advanced = CommentedMap()
        spec["advanced"] = advanced
    if not isinstance(hpa_config, CommentedMap):
        hpa_config = CommentedMap()
        advanced["horizontalPodAutoscalerConfig"] = hpa_config
    hpa_config["behavior"] = behavior
    out.changes.append(
        "advanced.horizontalPodAutoscalerConfig.behavior added (the example's): scale-down window 0"
        " and 2 pods a minute, scale-up at once, scaleUp tolerance 0 (KEDA 2.18+, Kubernetes 1.35;"
        " delete that line on older ones)"
    )


def dump(doc: Any) -> str:
    """One document as YAML text: 2-space mappings, indented sequences, no line wrapping."""
    yaml = YAML()
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 4096
    buffer = io.StringIO()
    yaml.dump(doc, buffer)
    return buffer.getvalue()


def convert_text(
    text: str, scaler_address: str = DEFAULT_SCALER_ADDRESS, force: bool = False, where: str = "the input"
) -> tuple[str, list[Conversion]]:
    """Every ScaledObject in a (multi-document) YAML text converted; other documents kept.

    An error names the ScaledObject (``metadata.name``); ``where`` names the text in YAML errors.
    """
    yaml = YAML()
    try:
        docs = list(yaml.load_all(text))
    except Exception as exc:  # noqa: BLE001 - ruamel raises several unrelated error types
        raise ConvertError(yaml_problem(exc, where)) from None
    conversions = []
    result = []
    for doc in docs:
        if isinstance(doc, Mapping) and doc.get("kind") == "ScaledObject":
            meta = doc.get("metadata")
            name = str(meta.get("name", "?")) if isinstance(meta, Mapping) else "?"
            try:
                conversion = convert(doc, scaler_address, force)  # type: ignore[arg-type]
            except RefusedKeysError as exc:
                raise RefusedKeysError([f"{name}: {line}" for line in exc.lines]) from None
            except ConvertError as exc:
                raise ConvertError(f"{name}: {exc}") from None
            conversions.append(conversion)
            result.append(conversion.document)
        elif doc is not None:
            result.append(doc)
    if not conversions:
        raise ConvertError(f"{where} holds no object of kind ScaledObject")
    return "---\n".join(dump(d) for d in result), conversions


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``scaler convert`` subcommand and its options."""
    p = subparsers.add_parser(
        "convert",
        help="rewrite a ScaledObject with plain KEDA triggers for this scaler",
        description="Rewrite a ScaledObject with plain KEDA triggers (prometheus, cron) as one external"
        " trigger for this scaler, printing each change and why: every key is carried (the report says"
        " where), or dropped with its reason. A key KEDA does not accept (a misspelled trigger key or"
        " ScaledObject field) is an error naming the key meant, exit status 2, unless --force (README:"
        " From a KEDA configuration).",
    )
    p.add_argument("scaledobject", help="the existing ScaledObject (YAML; other documents are kept)")
    p.add_argument("-o", "--output", default=None, help="write the new ScaledObject here (default: stdout)")
    p.add_argument(
        "--scaler-address",
        default=DEFAULT_SCALER_ADDRESS,
        help=f"this scaler's gRPC address as KEDA reaches it (default {DEFAULT_SCALER_ADDRESS})",
    )
    p.add_argument(
        "--replay",
        metavar="TRACE.csv",
        nargs="?",
        const="",
        default=None,
        help="also replay the old and the new ScaledObject on this trace (or, with no file, on --prometheus'"
        " history): one table, a row each, with the clairvoyant reference",
    )
    add_history_options(p, "with --replay: replay")
    p.add_argument("--cluster", default=None, help="with --replay: the cluster model (docs/replay.md)")
    p.add_argument(
        "--start",
        help=f"with --replay TRACE.csv: wall time of the trace's second 0 (default {DEFAULT_START})",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="convert even when a key is not one KEDA accepts (a misspelled trigger key or"
        " ScaledObject field): drop it and report it dropped; without it such a key is an error",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``scaler convert``: write the new ScaledObject, report each change, replay if asked."""
    try:
        text = Path(args.scaledobject).read_text()
        converted, conversions = convert_text(text, args.scaler_address, args.force, args.scaledobject)
    except OSError as exc:
        print(f"scaler convert: error: cannot read {args.scaledobject}: {exc.strerror}", file=sys.stderr)
        return 2
    except RefusedKeysError as exc:
        for line in exc.lines:
            print(f"scaler convert: error: {line} (--force drops it)", file=sys.stderr)
        return 2
    except ConvertError as exc:
        print(f"scaler convert: error: {exc}", file=sys.stderr)
        return 2
    # The YAML goes to stdout unless -o names a file; the report goes wherever the YAML does not.
    report = sys.stdout if args.output else sys.stderr
    for conversion in conversions:
        name = conversion.document["metadata"].get("name", "?")
        for line in conversion.changes:
            print(f"{name}: changed {line}", file=report)
        for line in conversion.warnings:
            print(f"{name}: warning: {line}", file=report)
    if args.output:
        Path(args.output).write_text(converted)
        print(f"wrote {args.output}", file=report)
    else:
        sys.stdout.write(converted)
        sys.stdout.flush()
    if args.replay is not None or args.prometheus:
        try:
            return _replay(args, text, converted, report)
        except ModuleNotFoundError as exc:
            if not missing_extra(exc):
                raise
            print(f"scaler convert: error: --replay: {INSTALL_HINT}", file=sys.stderr)
            return 2
    return 0


def retuned_queue_triggers(doc: Mapping[str, Any], factor: float) -> tuple[dict[str, Any], list[float]]:
    """A copy of ``doc`` whose queue-gauge ``prometheus`` triggers have ``threshold * factor``.

    The comparison at equal attainment: a plain KEDA object buys attainment by asking for a
    replica per fewer waiting requests. Returns the copy and the new thresholds (empty when
    the object has no queue trigger to retune).
    """
    out = copy.deepcopy(dict(doc))
    thresholds: list[float] = []
    for trigger in (out.get("spec") or {}).get("triggers") or []:
        meta = trigger.get("metadata") if isinstance(trigger, dict) else None
        if trigger.get("type") != "prometheus" or not isinstance(meta, dict):
            continue
        if queue_preset(str(meta.get("query", ""))) is None:
            continue
        try:
            threshold = float(f"{max(1.0, float(meta['threshold']) * factor):.2g}")
        except (KeyError, TypeError, ValueError):
            continue
        meta["threshold"] = f"{threshold:g}"
        thresholds.append(threshold)
    return out, thresholds


Attempt = Callable[[float], "tuple[RunResult, bool, float] | None"]


def _cheapest_attaining(attempt: Attempt) -> RunResult | None:
    """The least GPU time among runs that attain the goal, over threshold factors tried in turn.

    ``attempt(factor)`` replays the old object with its queue thresholds times ``factor`` and
    answers (run, attains, lowest threshold), or None when there is no queue trigger. Halving
    (1/2, 1/4, ...) until a run attains or the threshold is down to 1, then three factors
    between the first that attains and the one before it (geometric steps), since attainment
    need not rise steadily as the threshold falls. *Example*: threshold 50 fails at 25, 12,
    6.2 and 3.1 and attains at 1.6; 2.6, 2.2 and 1.9 are tried as well.
    """
    factor = 1.0
    passing: list[RunResult] = []
    while not passing:
        factor /= 2
        tried = attempt(factor)
        if tried is None:
            return None
        run, attains, lowest = tried
        if attains:
            passing.append(run)
        elif lowest <= 1.0:
            return None
    for step in (0.75, 0.5, 0.25):
        between = attempt(factor * 2**step)
        if between is not None and between[1]:
            passing.append(between[0])
    return min(passing, key=lambda r: r.gpu_seconds)


def _replay_source(args: argparse.Namespace, policy: TargetPolicy) -> tuple[Trace, datetime, Measured | None]:
    """The trace to replay on, the wall time of its second 0, and what Prometheus measured (with
    --prometheus, whose limits go to stderr)."""
    from scaler.replay.history import from_prometheus
    from scaler.replay.trace import load_trace
    from scaler.sources.history import read_history

    if bool(args.replay) == bool(args.prometheus):
        raise ValueError("give it a TRACE.csv or --prometheus URL (one of them)")
    check_span_options(args)
    if not args.prometheus:
        start = datetime.fromisoformat((args.start or DEFAULT_START).replace("Z", "+00:00"))
        return load_trace(args.replay, None, 0, 1.0), start, None
    if args.start:
        raise ValueError("--start is for --replay TRACE.csv; with --prometheus the span is --since/--until")
    measured = from_prometheus(read_history, args.prometheus, policy, history_span(args))
    for line in measured.limits:
        print(f"scaler convert: limit: {line}", file=sys.stderr)
    return measured.trace(0), measured.start, measured


def _replay(args: argparse.Namespace, old_text: str, new_text: str, report: Any) -> int:
    from scaler.replay.cluster import ClusterConfig
    from scaler.replay.compare import compare, initial_ready, run_keda
    from scaler.replay.keda import ScaledObjectError, scaledobject_model
    from scaler.replay.report import all_figures, figures, table
    from scaler.replay.trace import TraceError

    try:
        old_doc = first_scaledobject(old_text, args.scaledobject, check_fields=not args.force)
        old, new = (
            scaledobject_model(old_doc),
            scaledobject_model(first_scaledobject(new_text, "the new object")),
        )
        assert new.external is not None
        policy = parse_metadata(new.external.metadata)
        cluster = ClusterConfig.load(args.cluster) if args.cluster else ClusterConfig()
        trace, start, measured = _replay_source(args, policy)
    except (OSError, ManifestError, ScaledObjectError, TraceError, ValueError) as exc:
        print(f"scaler convert: error: --replay: {exc}", file=sys.stderr)
        return 2
    objective = policy.ttft_objective_seconds
    comparison = compare(
        trace,
        cluster,
        start,
        [("new (this scaler)", new), ("old (as written)", old)],
        objective,
        (new.min_replicas, new.max_replicas),
    )
    results = comparison.results
    attained = {r.name: figures(r, objective, None).within_objective for r in results}
    # At equal attainment: the old object with its queue threshold lowered until it attains
    # what the new one does (the cheapest such run of those tried), shown beside the others.
    note = ""
    goal = attained["new (this scaler)"]
    if attained["old (as written)"] < goal:
        initial = initial_ready(comparison.search, cluster.cold_start_s)

        def attempt(factor: float) -> tuple[RunResult, bool, float] | None:
            doc, thresholds = retuned_queue_triggers(old_doc, factor)
            if not thresholds:
                return None
            name = f"old, threshold {'/'.join(f'{t:g}' for t in thresholds)}"
            run = run_keda(name, scaledobject_model(doc), trace, cluster, start, initial)
            return run, figures(run, objective, None).within_objective >= goal, min(thresholds)

        found = _cheapest_attaining(attempt)
        if found is not None:
            results = [*results[:2], found, *results[2:]]
        else:
            note = "no lower queue threshold lets the old object attain what the new one does"
    print(
        f"\nreplay of {trace.source}: {len(trace):,} requests; cluster {cluster.gpus_free} GPUs,"
        f" {cluster.gpus_per_replica} per replica, cold start {cluster.cold_start_s:g}s",
        file=report,
    )
    print(table(all_figures(results, objective), objective), file=report)
    if measured is not None:
        print(measured.line(cluster.gpus_per_replica), file=report)
    if len(results) > len(comparison.results):
        print(
            "the third row is the old object at equal attainment: its queue threshold lowered until it"
            " attains at least what the new one does (the cheapest of the thresholds tried)",
            file=report,
        )
    if note:
        print(note, file=report)
    return 0
