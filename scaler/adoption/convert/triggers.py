"""The old triggers, walked once: the queue trigger, utilisation triggers, cron windows, the rest.

Each trigger becomes part of the one external trigger's metadata, is dropped with why, or
is kept with a warning (module ``scaler.adoption.convert``'s docstring has the rules).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from croniter import croniter
from pydantic import ValidationError

from scaler.adoption.convert.keys import AUTH_DROPPED, CRON_KEYS, PROMETHEUS_KEYS, WINDOW_FIELDS
from scaler.adoption.convert.report import Conversion, ConvertError, joined, where_of
from scaler.config import FieldProblem, PrewarmWindow
from scaler.errors import rule_of
from scaler.hpa import SEVERAL_TRIGGERS
from scaler.manifest import closest
from scaler.matchers import MatchOp
from scaler.presets import (
    CUSTOM_ENGINE,
    DEFAULT_ENGINE,
    GPU_UTILISATION,
    PRESETS,
    QUEUE_FIELD,
    ROUTERS,
    Kind,
    Select,
    metric_names,
    promql_problem,
    queue_read,
    removed_in,
)

# The trigger types a conversion reads or writes: a type that resembles one of them but is none
# (promethues) is a slip, named with the type meant; any other (kafka) is kept as it is.
TRIGGER_TYPES = ("prometheus", "cron", "external", "external-push")
# Why an unquoted number is written quoted: KEDA refuses a metadata value that is not a string.
UNQUOTED = "quoted: trigger metadata values are strings, and KEDA refuses a number"


@dataclass(frozen=True, slots=True)
class QueueConversion:
    """A KEDA query on a preset's queue, as this scaler's metadata: what it becomes and why."""

    metadata: dict[str, str]  # engine, labelSelector; router and inferencePool for a router's queue
    why: str  # the report's reason
    dropped: tuple[str, ...] = ()  # matchers on the router's own labels, which no server series has
    aggregation: str | None = "sum"  # the query's over the series (None: a bare gauge)
    no_model: str | None = None  # the label the series name the model by, when no matcher is on it


def queue_conversion(query: str) -> QueueConversion | None:
    """What ``query`` becomes when it reads a preset's queue (``queue_read``: ``sum(QUEUE{matchers})``,
    with ``by`` labels the matchers pin, or a bare gauge), else None.

    An engine's queue gives ``engine`` and the matchers as ``labelSelector``. A router's
    gives ``router`` (``inferencePool`` from its pool label, which a pooled router needs), the
    engine of the same name or else the default one, and the matchers on the model label as
    ``labelSelector``. *Example*: ``sum(llm_d_epp_flow_control_queue_size{inference_pool="p",
    model_name="m"})`` gives ``router: llm-d``, ``inferencePool: p``, ``engine: vllm`` and
    ``labelSelector: model_name="m"``.
    """
    read = queue_read(query)
    if read is None:
        return None
    preset = read.preset
    if preset.kind is Kind.ENGINE:
        metadata = {"engine": preset.name}
        if read.matchers:
            metadata["labelSelector"] = ", ".join(str(m) for m in read.matchers)
        label = preset.model_label
        return QueueConversion(
            metadata,
            f"the query is that engine's queue gauge, which the {preset.name} preset reads",
            aggregation=read.aggregation,
            no_model=label if label and not any(m.name == label for m in read.matchers) else None,
        )
    family = preset.family(QUEUE_FIELD[Kind.ROUTER])
    model_label = (
        family.model_label if family is not None and family.select is Select.MODEL else preset.model_label
    )
    pools = [m for m in read.matchers if m.name == preset.pool_label]
    if preset.pool_label is not None and (len(pools) != 1 or pools[0].op is not MatchOp.EQ):
        return None  # which pool's queue is not said: no inferencePool to write
    engine = preset.name if preset.name in PRESETS else DEFAULT_ENGINE
    metadata = {"engine": engine, "router": preset.name}
    if pools:
        metadata["inferencePool"] = pools[0].value
    kept = [m for m in read.matchers if m.name == model_label]
    if kept:
        metadata["labelSelector"] = ", ".join(str(m) for m in kept)
    dropped = tuple(str(m) for m in read.matchers if m not in kept and m not in pools)
    older = (
        f" under an older name ({family.selectors()[0].metric} is read first)"
        if read.older and family
        else ""
    )
    default = "" if engine == preset.name else " (the default: set the engine the servers behind it run)"
    why = (
        f"the query is the {preset.name} router's queue{older}, which router: {preset.name} reads beside"
        f" the servers' own queue; engine: {engine}{default}"
    )
    return QueueConversion(metadata, why, dropped, read.aggregation, None if kept else model_label)


def _reads_a_pooled_queue(query: str) -> bool:
    """Whether ``query`` names the queue of a router that is read per pool (llm-d's EPP)."""
    names = metric_names(query)
    return any(
        selector.metric in names
        for router in ROUTERS.values()
        if router.pool_label is not None
        for family in [router.family(QUEUE_FIELD[Kind.ROUTER])]
        if family is not None
        for selector in family.selectors()
    )


# The week a cron window's openings are read over (a Monday, in the window's zone), and at most
# how many of them.
WEEK_FROM = (2026, 1, 5)
OPENINGS_READ = 60


def _overnight(start: str, end: str, timezone: str) -> str | None:
    """Why a cron window whose end comes before its start in the day is worth a look, or None.

    KEDA's cron scaler keeps a window open from its start until the next end, so ``0 9 * * *`` to
    ``0 8 * * *`` is open 23 hours a day: a window across midnight (22:00 to 06:00) means that,
    a slip (9 to 8 for 9 to 18) does too. *Example*: ``0 9 * * 1-5`` -> ``0 8 * * 1-5`` says
    ``open 23-71 h from each start, 83% of the week``.
    """
    zone = ZoneInfo(timezone)
    week = datetime(*WEEK_FROM, tzinfo=zone)
    starts = croniter(start, week)
    hours: list[float] = []
    for _ in range(OPENINGS_READ):
        opened: datetime = starts.get_next(datetime)
        if opened >= week + timedelta(days=7):
            break
        closed: datetime = croniter(end, opened).get_next(datetime)
        hours.append((closed - opened).total_seconds() / 3600)
        if closed.date() == opened.date():
            return None  # it closes on the day it opens
    if not hours:
        return None
    low, high = min(hours), max(hours)
    span = f"{low:.0f} h" if round(low) == round(high) else f"{low:.0f}-{high:.0f} h"
    share = min(1.0, sum(hours) / (7 * 24))
    return (
        f"end {end} comes before start {start} in the day, so each opening lasts until the next"
        f" day's end (KEDA's cron scaler reads it so, and so does the scaler): open {span} from each"
        f" start, {share:.0%} of the week; if it should close the day it opens, fix start or end"
    )


@dataclass
class Triggers:
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
        """Walk every trigger once; ConvertError when none gives the queue."""
        self.crons = sum(isinstance(t, Mapping) and t.get("type") == "cron" for t in triggers)
        for index, trigger in enumerate(triggers):
            if not isinstance(trigger, Mapping):
                raise ConvertError(f"triggers[{index}] is not a mapping with type and metadata")
            where = where_of(index, trigger)
            kind = trigger.get("type")
            meta = trigger.get("metadata") or {}
            if not isinstance(meta, Mapping):
                raise ConvertError(f"{where}: metadata is not a mapping of keys to strings")
            if kind == "external" and any(
                k in meta for k in ("engine", "labelSelector", "targetQueuePerReplica")
            ):
                raise ConvertError(f"{where} is already this scaler's trigger: nothing to convert")
            guess = None if kind in TRIGGER_TYPES else closest(str(kind), TRIGGER_TYPES)
            if guess is not None:
                raise ConvertError(
                    f"triggers[{index}].type: {kind!r} is not a type of KEDA's scalers; did you mean {guess}?"
                )
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
                " (docs/metadata.md)"
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
        """A prometheus trigger: dropped (utilisation), the queue (the first other), or kept."""
        out = self.out
        if GPU_UTILISATION.search(str(meta.get("query") or "")):
            self.dropped.append(f"{where} on GPU utilisation")
            others = [str(k) for k in meta if k != "threshold"]
            others += [str(k) for k in trigger if k not in ("type", "metadata", "name")]
            out.changes.append(
                f"{where}: dropped{', with its ' + joined(others) if others else ''}: GPU utilisation"
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
        # Without a query or a threshold there is nothing to convert: an error, never a default.
        missing = [key for key in required[1:] if not str(meta.get(key) or "").strip()]
        if missing:
            how = [f"{key} {'is empty' if key in meta else 'is missing'}" for key in missing]
            raise ConvertError(
                f"{where}: {joined(how)}: KEDA's prometheus scaler requires {joined(required)}"
            )
        query = str(meta["query"])
        refused = promql_problem(query)
        if refused is not None:  # KEDA would send it to Prometheus, which refuses it at every poll
            raise ConvertError(f"{where}: query {query!r} {refused}")
        conversion = queue_conversion(query)
        origin = (f"{where}: query", query)
        if conversion is not None:
            self.metadata |= conversion.metadata
            self.origin |= dict.fromkeys(conversion.metadata, origin)
            written = ", ".join(f"{k}: {v}" for k, v in conversion.metadata.items())
            self.out.changes.append(f"{where}: became {written}: {conversion.why}")
            if conversion.aggregation not in (None, "sum"):
                self.out.warnings.append(
                    f"{where}: the query takes the {conversion.aggregation} over the series; the"
                    f" {conversion.metadata['engine']} preset reads their sum, the queue of every replica"
                    " together: check targetQueuePerReplica"
                )
            if conversion.no_model is not None:
                selector = conversion.metadata.get("labelSelector")
                which = f"its labelSelector {selector} selects" if selector else "this Prometheus scrapes"
                self.out.warnings.append(
                    f"{where}: the query names no model (no {conversion.no_model} matcher): the scaler"
                    f" reads the queue, tokens and latency of every {conversion.metadata['engine']} server"
                    f" {which}"
                    f' as one fleet; if they serve more than one model, add {conversion.no_model}="..." to'
                    " labelSelector"
                )
            if conversion.dropped:
                self.out.changes.append(
                    f"{where}: matcher {', '.join(conversion.dropped)} dropped: a label of the router's"
                    " queue only; the router's queue is read for the whole pool"
                )
        else:
            self.metadata["engine"] = CUSTOM_ENGINE
            self.metadata["queueQuery"] = query
            self.origin["engine"] = self.origin["queueQuery"] = origin
            self.out.changes.append(
                f"{where}: became engine: {CUSTOM_ENGINE} with queueQuery: the query is not a known engine's"
                " queue gauge; add runningQuery and promptTokensQuery to turn the load signal on"
            )
            if _reads_a_pooled_queue(query):
                self.out.warnings.append(
                    f"{where}: the query reads a router's queue but names no one pool: write router and"
                    " inferencePool by hand to read it as the router's queue (docs/engines.md)"
                )
        for name, removal in removed_in(query):
            self.out.warnings.append(
                f"{where}: the query reads {name}, removed by {removal.by}: on a current server it"
                f" returns nothing; read {removal.instead}"
            )
        if str(meta.get("serverAddress") or "").strip():
            self.metadata["prometheusAddress"] = str(meta["serverAddress"])
            self.origin["prometheusAddress"] = (f"{where}: serverAddress", meta["serverAddress"])
        else:  # a template an overlay completes, say: converted, and said
            self.out.warnings.append(
                f"{where}: serverAddress {'is empty' if 'serverAddress' in meta else 'is missing'}, which"
                f" KEDA's prometheus scaler requires ({joined(required)}), so the trigger did not run as"
                " written: no prometheusAddress is written, and the scaler reads the Prometheus it is"
                " started with (scaler serve --prometheus, SCALER_PROMETHEUS); add prometheusAddress to"
                " read another"
            )

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
        quoted = "" if isinstance(threshold, str) else f" {str(threshold)!r} ({UNQUOTED})"
        self.out.changes.append(
            f"{where}: threshold {threshold} became targetQueuePerReplica{quoted}: the same waiting"
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
            out.changes.append(f"{where}: authenticationRef dropped: {AUTH_DROPPED}")
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
        """A cron trigger: a pre-warm window, checked as the metadata checks one."""
        missing = [k for k in CRON_KEYS if k not in meta]
        if missing:
            raise ConvertError(
                f"{where}: {joined(missing)} {'is' if len(missing) == 1 else 'are'} missing:"
                f" KEDA's cron scaler requires {joined(CRON_KEYS)}"
            )
        written = {name: meta[key] for name, key in WINDOW_FIELDS.items()}
        try:
            checked = PrewarmWindow(**{name: str(value) for name, value in written.items()})
        except ValidationError as exc:
            problems = []
            for error in exc.errors():
                name = str(error["loc"][0]) if error["loc"] else "replicas"
                message = rule_of(error)
                problems.append(f"{where}: {WINDOW_FIELDS.get(name, name)}={written.get(name)!r}: {message}")
            raise ConvertError("; ".join(problems)) from None
        if checked.start == checked.end:
            raise ConvertError(
                f"{where}: start and end are the same schedule ({checked.start}), so the window never opens"
            )
        overnight = _overnight(str(written["start"]), str(written["end"]), str(written["timezone"]))
        if overnight is not None:
            self.out.warnings.append(f"{where}: {overnight}")
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
        if not isinstance(written["replicas"], str):
            self.out.changes.append(
                f"{where}: desiredReplicas {written['replicas']} written as {str(written['replicas'])!r}"
                f" ({UNQUOTED})"
            )
        self.out.changes.append(
            f"{where}: became a pre-warm window ({window['start']} -> {window['end']},"
            f" {window['timezone']}, {window['replicas']} replicas) as {target}: the scaler keeps it as"
            " a floor and starts it one cold start early"
        )
        extras = [str(k) for k in trigger if k not in ("type", "metadata")]
        if extras:
            self.out.changes.append(
                f"{where}: {joined(extras)} dropped: the window is part of the external trigger now"
            )
