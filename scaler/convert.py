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
  ``timezone`` for one, ``prewarmWindows`` for several).
* anything else: kept, with a warning: the HPA takes the largest of its metrics, so while
  another trigger asks for more, the GPU check cannot hold a scale-up.

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from scaler.config import MetadataError, parse_metadata
from scaler.hpa import SEVERAL_TRIGGERS
from scaler.inventory.objects import KEDA_MAX_REPLICA_COUNT, KEDA_MIN_REPLICA_COUNT
from scaler.manifest import ManifestError, first_scaledobject
from scaler.matchers import SelectorError, parse_selector
from scaler.replay import INSTALL_HINT, missing_extra
from scaler.sources.presets import GPU_UTILISATION

if TYPE_CHECKING:
    from scaler.replay.replay import RunResult

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
# Prometheus-trigger keys with no counterpart in this scaler, and why.
_DROPPED_PROMETHEUS_KEYS = {
    "activationThreshold": "this scaler is always active: its floor never reaches zero",
    "ignoreNullValues": "a missing input never makes this scaler's target fall",
    "namespace": "Thanos/Cortex tenancy is not read; point prometheusAddress at the tenant's URL",
    "customHeaders": "this scaler reads Prometheus with its own identity (docs/deploy.md)",
    "unsafeSsl": "this scaler verifies Prometheus' certificate with the system's CAs",
    "queryParameters": "the presets' queries take no extra parameters",
}


class ConvertError(ValueError):
    """The input cannot be converted; the message says what to change."""


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


@dataclass
class _Triggers:
    """The old triggers, walked once: what becomes the external trigger's metadata, what stays."""

    out: Conversion
    metadata: dict[str, str]
    windows: list[dict[str, Any]] = field(default_factory=list)
    kept: list[Any] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    queue_from: str | None = None

    def walk(self, triggers: list[Any]) -> None:
        for index, trigger in enumerate(triggers):
            where = _where(index, trigger)
            kind = trigger.get("type")
            meta = trigger.get("metadata") or {}
            if kind == "external" and any(
                k in meta for k in ("engine", "labelSelector", "targetQueuePerReplica")
            ):
                raise ConvertError(f"{where} is already this scaler's trigger: nothing to convert")
            if kind == "prometheus":
                self.prometheus(where, trigger, meta)
            elif kind == "cron":
                self.cron(where, meta)
            else:
                self.kept.append(trigger)
                self.out.warnings.append(f"{where}: kept as it is; {SEVERAL_TRIGGERS}")
        if self.queue_from is None:
            raise ConvertError(
                "no prometheus trigger to take the queue from: write the external trigger by hand"
                " (README, trigger metadata)"
            )
        if len(self.windows) == 1:
            w = self.windows[0]
            self.metadata |= {
                "prewarmStart": w["start"],
                "prewarmEnd": w["end"],
                "prewarmReplicas": str(w["replicas"]),
                "timezone": w["timezone"],
            }
        elif self.windows:
            self.metadata["prewarmWindows"] = json.dumps(self.windows)

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
        out, metadata = self.out, self.metadata
        query = str(meta.get("query") or "")
        if GPU_UTILISATION.search(query):
            self.dropped.append(f"{where} on GPU utilisation")
            out.changes.append(
                f"{where}: dropped: GPU utilisation lags the queue and cannot see requests"
                " waiting; the load signal replaces it"
            )
            self.utilisation(where, meta.get("threshold"))
            return
        if self.queue_from is not None:
            self.kept.append(trigger)
            out.warnings.append(
                f"{where}: kept as it is (the queue already comes from {self.queue_from}); {SEVERAL_TRIGGERS}"
            )
            return
        self.queue_from = where
        preset = queue_preset(query)
        if preset is not None:
            engine, selector = preset
            metadata["engine"] = engine
            if selector:
                metadata["labelSelector"] = selector
            out.changes.append(
                f"{where}: became engine: {engine}"
                + (f", labelSelector: {selector}" if selector else "")
                + f": the query is that engine's queue gauge, which the {engine} preset reads"
            )
        else:
            metadata["engine"] = "custom"
            metadata["queueQuery"] = query
            out.changes.append(
                f"{where}: became engine: custom with queueQuery: the query is not a known engine's"
                " queue gauge; add runningQuery and promptTokensQuery to turn the load signal on"
            )
        if "threshold" in meta:
            metadata["targetQueuePerReplica"] = str(meta["threshold"])
            out.changes.append(
                f"{where}: threshold {meta['threshold']} became targetQueuePerReplica: the same waiting"
                " requests per replica the HPA divided the query by (AverageValue)"
            )
        if meta.get("serverAddress"):
            metadata["prometheusAddress"] = str(meta["serverAddress"])
            out.changes.append(
                f"{where}: serverAddress became prometheusAddress: the scaler reads that Prometheus"
            )
        if str(trigger.get("metricType") or "AverageValue") != "AverageValue":
            out.warnings.append(
                f"{where}: metricType {trigger['metricType']}: its threshold was a total, not a"
                " count per replica; check targetQueuePerReplica"
            )
        for key, why in _DROPPED_PROMETHEUS_KEYS.items():
            if key in meta:
                out.changes.append(f"{where}: {key} dropped: {why}")
        if trigger.get("authenticationRef") is not None:
            out.changes.append(
                f"{where}: authenticationRef dropped: KEDA gives it to its own Prometheus scaler,"
                " not to an external one; grant this scaler's ServiceAccount access to Prometheus"
            )

    def cron(self, where: str, meta: Mapping[str, Any]) -> None:
        window = {
            "start": str(meta.get("start", "")),
            "end": str(meta.get("end", "")),
            "replicas": _int(meta.get("desiredReplicas", "0"), f"{where} desiredReplicas"),
            "timezone": str(meta.get("timezone", "UTC")),
        }
        self.windows.append(window)
        self.out.changes.append(
            f"{where}: became a pre-warm window ({window['start']} -> {window['end']},"
            f" {window['timezone']}, {window['replicas']} replicas): the scaler keeps it as a floor"
            " and starts it one cold start early"
        )


def convert(source: CommentedMap, scaler_address: str = DEFAULT_SCALER_ADDRESS) -> Conversion:
    """The ScaledObject ``source`` rewritten for this scaler (``source`` is not changed)."""
    if not isinstance(source, Mapping) or source.get("kind") != "ScaledObject":
        raise ConvertError("not a ScaledObject (kind: ScaledObject)")
    doc: CommentedMap = copy.deepcopy(source)
    spec = doc.get("spec")
    if not isinstance(spec, CommentedMap):
        raise ConvertError("the ScaledObject has no spec")
    triggers = spec.get("triggers")
    if not isinstance(triggers, list) or not triggers:
        raise ConvertError("the ScaledObject has no triggers")
    out = Conversion(doc)
    walk = _Triggers(out, {"scalerAddress": scaler_address})
    walk.walk(triggers)
    metadata = walk.metadata
    _replica_bounds(spec, metadata, out)
    try:
        parse_metadata(metadata)
    except MetadataError as exc:
        raise ConvertError(f"the converted metadata is invalid: {exc}") from None

    external = CommentedMap()
    external["type"] = "external"
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
    return out


def _int(value: Any, what: str) -> int:
    try:
        return int(str(value))
    except ValueError:
        raise ConvertError(f"{what}={value!r} is not an integer") from None


def _replica_bounds(spec: CommentedMap, metadata: dict[str, str], out: Conversion) -> None:
    low = _int(spec.get("minReplicaCount", KEDA_MIN_REPLICA_COUNT), "minReplicaCount")
    high = _int(spec.get("maxReplicaCount", KEDA_MAX_REPLICA_COUNT), "maxReplicaCount")
    if low < 1:
        spec["minReplicaCount"] = 1
        spec.yaml_set_comment_before_after_key(
            "minReplicaCount",
            before="Was 0: scaling an inference workload to zero means a cold start (minutes) on\n"
            "the next request; this scaler keeps a floor of at least one replica.",
            indent=2,
        )
        out.changes.append("spec.minReplicaCount: 0 became 1: a cold start on the next request is avoided")
        low = 1
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


def convert_text(text: str, scaler_address: str = DEFAULT_SCALER_ADDRESS) -> tuple[str, list[Conversion]]:
    """Every ScaledObject in a (multi-document) YAML text converted; other documents kept."""
    yaml = YAML()
    try:
        docs = list(yaml.load_all(text))
    except Exception as exc:  # noqa: BLE001 - ruamel raises several unrelated error types
        raise ConvertError(f"not valid YAML: {exc}") from None
    conversions = []
    result = []
    for doc in docs:
        if isinstance(doc, Mapping) and doc.get("kind") == "ScaledObject":
            conversion = convert(doc, scaler_address)  # type: ignore[arg-type]
            conversions.append(conversion)
            result.append(conversion.document)
        elif doc is not None:
            result.append(doc)
    if not conversions:
        raise ConvertError("no object of kind ScaledObject")
    return "---\n".join(dump(d) for d in result), conversions


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``scaler convert`` subcommand and its options."""
    p = subparsers.add_parser(
        "convert",
        help="rewrite a ScaledObject with plain KEDA triggers for this scaler",
        description="Rewrite a ScaledObject with plain KEDA triggers (prometheus, cron) as one external"
        " trigger for this scaler, printing each change and why (README: From a KEDA configuration).",
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
        default=None,
        help="also replay the old and the new ScaledObject on this trace: one table, a row each,"
        " with the clairvoyant reference",
    )
    p.add_argument("--cluster", default=None, help="with --replay: the cluster model (docs/replay.md)")
    p.add_argument(
        "--start",
        default="2026-12-07T00:00:00+08:00",
        help="with --replay: wall time of the trace's second 0",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``scaler convert``: write the new ScaledObject, report each change, replay if asked."""
    try:
        text = Path(args.scaledobject).read_text()
        converted, conversions = convert_text(text, args.scaler_address)
    except (OSError, ConvertError) as exc:
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
    if args.replay:
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


def _replay(args: argparse.Namespace, old_text: str, new_text: str, report: Any) -> int:
    from scaler.replay.cluster import ClusterConfig
    from scaler.replay.compare import compare, initial_ready, run_keda
    from scaler.replay.keda import ScaledObjectError, scaledobject_model
    from scaler.replay.report import all_figures, figures, table
    from scaler.replay.trace import TraceError, load_trace

    try:
        old_doc = first_scaledobject(old_text, args.scaledobject)
        old, new = (
            scaledobject_model(old_doc),
            scaledobject_model(first_scaledobject(new_text, "the new object")),
        )
        trace = load_trace(args.replay, None, 0, 1.0)
        cluster = ClusterConfig.load(args.cluster) if args.cluster else ClusterConfig()
    except (OSError, ManifestError, ScaledObjectError, TraceError, ValueError) as exc:
        print(f"scaler convert: error: --replay: {exc}", file=sys.stderr)
        return 2
    assert new.external is not None
    objective = parse_metadata(new.external.metadata).ttft_objective_seconds
    start = datetime.fromisoformat(args.start.replace("Z", "+00:00"))
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
    if len(results) > len(comparison.results):
        print(
            "the third row is the old object at equal attainment: its queue threshold lowered until it"
            " attains at least what the new one does (the cheapest of the thresholds tried)",
            file=report,
        )
    if note:
        print(note, file=report)
    return 0
