"""The dry-run's rendering: one line (or JSON object) per decision, warnings, and a summary.

A wide line (``--output wide``) reads left to right as the decision was made::

    2026-12-07T01:00:00Z (09:00:00 Asia/Shanghai) target=6 binding=prewarm [floor=2 prewarm=6* ...]
        clamps: none | replicas: current 2, Ready 2 | ttft: p99 0.84s, 0.2% over 2s | lead 180s
        (default) | capacity: ... | load off: ...

The local time is shown when the ScaledObject's ``timezone`` is not UTC (pre-warm windows are
written in it); ``load off`` says why the load signal did not propose. The default text line
(``CompactLines``) keeps the target, the binding signal, the proposals and the clamps' steps,
and of the rest only what changed since the line before::

    2026-12-07T01:00:00Z target=6 prewarm [floor=2 prewarm=6* queue=0 load=2] | lead 180s (default)
    2026-12-07T01:01:00Z target=8 queue [floor=2 prewarm=6 queue=9* load=5] gpu_inventory 9->8

A capacity is said again when a figure moved by 5% or more or its source changed; notes when
their kinds change. Every input that is missing is named, grouped by why (``missing_inputs``), and
a target that cannot act says so on every line, ``inert=`` with its reasons (``scaler.inert``), their
causes when they change::

    2026-11-30T12:08:00Z target=3 last_known [floor=1 last_known=3*] inert=stale | ... | missing 13
        inputs: queue_waiting, ... (stale: the last sample is 8m old, over 2 scrape intervals (120s));
        ... | inert: stale: engine vllm series (...): the last sample is 8m old, ...

``manifest_warnings``
lists what KEDA would refuse or read otherwise than the scaler does, before any decision;
``Summary`` ends the run with one line: decisions per binding signal and the clamps that acted.

TTFT p99 and the share over the objective come from the same rate window of the same TTFT
histogram, but are estimated differently inside the bucket the objective falls in: the p99
linearly, as Prometheus' ``histogram_quantile`` does, the share log-linearly
(``scaler.histogram.share_above``). Where they disagree (a p99 above the objective beside 1% or
less over it, or the reverse), the wide line and the JSON say so (``ttft_note``).
*Example*: vLLM's buckets around a 2 s objective are (1, 2.5]; with 4% of first tokens above
1 s and none above 2.5 s, the p99 interpolates to 2.12 s while the share over 2 s is 0%.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from datetime import UTC
from zoneinfo import ZoneInfo

from scaler.hpa import SEVERAL_TRIGGERS
from scaler.inventory import ScaledObject
from scaler.model import Capacity, Decision, NoteKind, Signal

# A capacity scale this close to 1 (a ratio) is not said: it prints as 1.00 at two decimals.
SCALE_SAID = 0.005


def missing_inputs(decision: Decision) -> str:
    """Every input the decision's observation misses, grouped by why: ``missing 3 inputs: a, b (why);
    c (other why)``; empty when none is missing."""
    missing = decision.observation.missing
    if not missing:
        return ""
    by_why: dict[str, list[str]] = {}
    for name, why in missing.items():
        by_why.setdefault(why, []).append(name)
    groups = "; ".join(f"{', '.join(names)} ({why})" for why, names in by_why.items())
    return f"missing {len(missing)} input{'s' if len(missing) != 1 else ''}: {groups}"


def inert_reasons(decision: Decision) -> str:
    """Why the target cannot act, each reason with its cause; empty when it can."""
    return (
        "inert: " + "; ".join(f"{i.reason.value}: {i.text}" for i in decision.inert) if decision.inert else ""
    )


def _notes(decision: Decision) -> list[str]:
    """The notes but the one listing missing demand inputs: ``missing_inputs`` names them all."""
    return [str(n) for n in decision.notes if n.kind is not NoteKind.INPUTS_MISSING]


def format_line(
    decision: Decision, name: str | None = None, timezone: str = "UTC", objective_s: float | None = None
) -> str:
    """One decision as the dry-run's wide line (module docstring), local time shown when not UTC;
    with ``objective_s`` (ttftObjectiveSeconds) the TTFT share is said against it."""
    when = decision.now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if timezone != "UTC":
        when += f" ({decision.now.astimezone(ZoneInfo(timezone)).strftime('%H:%M:%S')} {timezone})"
    proposals = " ".join(
        f"{signal.value}={decision.proposals[signal]}{'*' if signal is decision.binding else ''}"
        for signal in Signal
        if signal in decision.proposals
    )
    changed = [c for c in decision.clamps if c.before != c.after]
    clamps = "; ".join(f"{c.kind.value} {c.before}->{c.after}: {c.reason}" for c in changed) or "none"
    head = f"{when} " + (f"{name} " if name else "")
    line = f"{head}target={decision.replicas} binding={decision.binding.value} [{proposals}] clamps: {clamps}"
    if decision.inert:
        line += " inert=" + ",".join(i.reason.value for i in decision.inert)
    line += f" | replicas: {_replicas(decision)}"
    ttft = _ttft(decision, objective_s)
    if ttft is not None:
        line += f" | ttft: {ttft}"
    if decision.lead is not None:
        line += f" | lead {decision.lead.seconds:.0f}s ({decision.lead.source})"
    if decision.capacity is not None:
        line += f" | capacity: {decision.capacity.describe()}{_scaled(decision)}"
    if Signal.LOAD not in decision.proposals:
        why = decision.signal_reasons.get(Signal.LOAD, "no reason given")
        line += f" | load off: {why}"
    for part in (missing_inputs(decision), "; ".join(_notes(decision)), inert_reasons(decision)):
        if part:
            line += f" | {part}"
    return line


# The share over the objective that a p99 above it means (100% - 99%).
P99_SHARE = 0.01


def ttft_note(decision: Decision, objective_s: float | None) -> str | None:
    """Why TTFT p99 and the share over the objective seem to disagree, when they do (module
    docstring); None when they agree or either is unknown."""
    seen = decision.observation
    p99, over = seen.ttft_p99_seconds, seen.ttft_over_objective
    if objective_s is None or p99 is None or over is None or (p99 > objective_s) == (over > P99_SHARE):
        return None
    return (
        f"TTFT p99 {p99:.2f}s and {100 * over:.1f}% over the {objective_s:g}s objective come from the same"
        " rate window of the TTFT histogram, estimated differently inside the bucket the objective"
        " falls in: the p99 linearly (as histogram_quantile does), the share log-linearly"
    )


def _ttft(decision: Decision, objective_s: float | None) -> str | None:
    """``p99 2.27s, 0.0% over 2s`` (with the note when they disagree), or None without TTFT."""
    seen = decision.observation
    if seen.ttft_p99_seconds is None:
        return None
    said = f"p99 {seen.ttft_p99_seconds:.2f}s"
    if seen.ttft_over_objective is not None and objective_s is not None:
        said += f", {100 * seen.ttft_over_objective:.1f}% over {objective_s:g}s"
    if ttft_note(decision, objective_s) is not None:
        said += " (one window, two estimates inside the bucket: see the JSON's ttft_note)"
    return said


def _replicas(decision: Decision) -> str:
    """The replica counts the decision saw: current and Ready, with Pending and starting when
    known (``?`` for a count not read). *Example*: ``current 4, Ready 3, Pending 1``."""
    seen = decision.observation

    def count(value: int | None) -> str:
        return "?" if value is None else str(value)

    said = f"current {count(seen.current_replicas)}, Ready {count(seen.ready_replicas)}"
    for label, value in (("Pending", seen.pending_replicas), ("starting", seen.starting_replicas)):
        if value:
            said += f", {label} {value}"
    return said


class CompactLines:
    """The default text lines: short, with what changed since the previous one (module docstring)."""

    def __init__(self, timezone: str = "UTC") -> None:
        self.timezone = timezone
        self._said: dict[str, str] = {}

    def __call__(self, decision: Decision) -> str:
        """The line for ``decision``, after the ones already rendered."""
        when = decision.now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if self.timezone != "UTC":
            local = decision.now.astimezone(ZoneInfo(self.timezone)).strftime("%H:%M:%S")
            when += f" ({local} {self.timezone})"
        proposals = " ".join(
            f"{signal.value}={decision.proposals[signal]}{'*' if signal is decision.binding else ''}"
            for signal in Signal
            if signal in decision.proposals
        )
        line = f"{when} target={decision.replicas} {decision.binding.value} [{proposals}]"
        steps = [f"{c.kind.value} {c.before}->{c.after}" for c in decision.clamps if c.before != c.after]
        if steps:
            line += " " + ", ".join(steps)
        if decision.inert:  # on every line: a target that cannot act is never quiet about it
            line += " inert=" + ",".join(i.reason.value for i in decision.inert)
        missing = decision.observation.missing
        capacity = decision.capacity
        parts = {  # what the line may add: (the text, what must change for it to be said again)
            "lead": (f"lead {decision.lead.seconds:.0f}s ({decision.lead.source})" if decision.lead else "",)
            * 2,
            "capacity": (
                f"capacity: {_capacity_brief(capacity)}{_scaled(decision)}" if capacity else "",
                f"{_capacity_key(capacity)} {_step(decision.forecast.capacity_scale)}" if capacity else "",
            ),
            "load": ("", "") if Signal.LOAD in decision.proposals else (_load_off(decision),) * 2,
            # The missing inputs again when which ones, or the kind of why, change (not their ages).
            "missing": (
                missing_inputs(decision),
                " ".join(f"{k}={v.split(':')[0]}" for k, v in missing.items()),
            ),
            "notes": ("; ".join(_notes(decision)), " ".join(str(n.kind) for n in decision.notes)),
            "inert": (inert_reasons(decision), " ".join(i.reason.value for i in decision.inert)),
        }
        changed = [text for key, (text, seen) in parts.items() if text and self._said.get(key) != seen]
        self._said = {key: seen for key, (_, seen) in parts.items()}
        return line + "".join(f" | {text}" for text in changed)


def _load_off(decision: Decision) -> str:
    """Why the load signal did not propose, unless a note on the same line says it already."""
    why = decision.signal_reasons.get(Signal.LOAD, "no reason given")
    return "load off" if any(why.endswith(str(note)) for note in decision.notes) else f"load off: {why}"


def _capacity_brief(capacity: Capacity) -> str:
    """The capacity in few words: each figure per replica with its source, the learned slowdowns."""
    parts = []
    for value, unit, source, method in (
        (capacity.prefill_tokens_per_s, "prompt tokens/s", capacity.prefill_source, capacity.prefill_method),
        (capacity.slots, "slots", capacity.slots_source, capacity.slots_method),
    ):
        where = f"{source}: {method}" if method and method != source else source
        parts.append(f"{unit} unknown" if value is None else f"{value:,.0f} {unit} ({where})")
    if capacity.decode_slowdown is not None:
        parts.append(f"decode slowdown {capacity.decode_slowdown:.2f}")
    if capacity.itl_slots is not None:
        parts.append(f"{capacity.itl_slots:,.0f} slots within the ITL objective")
    return ", ".join(parts)


def _scaled(decision: Decision) -> str:
    """The scale the fleet was sized at, where the measured objective set one other than 1
    (``scaler.decider.calibration``): the capacities above are what a replica holds, the load signal
    sized on them times it. *Example*: ``"; sized at 0.35x them (the measured objective's scale)"``."""
    scale = decision.forecast.capacity_scale
    if scale is None or abs(scale - 1.0) < SCALE_SAID:
        return ""
    return f"; sized at {scale:.2f}x them (the measured objective's scale)"


def _step(value: float | None) -> str:
    """``value`` in 5% steps (a log scale), ``-`` where unknown or 0: what a figure must move by to be
    said again."""
    return "-" if not value else str(round(math.log(value) / math.log(1.05)))


def _capacity_key(capacity: Capacity) -> str:
    """What must change for a capacity to be said again: its figures in 5% steps, its sources."""
    return " ".join(
        (
            _step(capacity.prefill_tokens_per_s),
            _step(capacity.slots),
            capacity.prefill_source,
            capacity.slots_source,
            capacity.prefill_method,
            capacity.slots_method,
            "-" if capacity.decode_slowdown is None else f"{capacity.decode_slowdown:.1f}",
            _step(capacity.itl_slots),
        )
    )


def format_json(decision: Decision, name: str | None = None, objective_s: float | None = None) -> str:
    """One decision as a compact JSON line, the ScaledObject's name first when given, and a
    ``ttft_note`` when its TTFT p99 and share over ``objective_s`` seem to disagree."""
    body = decision.to_json()
    if name:
        body = {"scaledobject": name, **body}
    note = ttft_note(decision, objective_s)
    if note is not None:
        body["ttft_note"] = note
    return json.dumps(body, sort_keys=False, separators=(",", ":"))


def manifest_warnings(so: ScaledObject, min_replicas: int, max_replicas: int) -> list[str]:
    """What KEDA would refuse or misread in a ScaledObject with this scaler's trigger, one line each.

    * a metadata value that YAML reads as a number, bool or null: the CRD declares
      ``metadata`` a map of strings, so the API server refuses the object;
    * ``minReplicaCount``/``maxReplicaCount`` (KEDA's defaults 0 and 100) that differ from the
      metadata's ``minReplicas``/``maxReplicas``: the HPA clamps to the former, whatever the
      scaler decides;
    * more triggers than this one: the HPA takes the largest metric;
    * ``targetUtilization``, accepted but no longer used: the load signal's headroom comes from
      ``ttftObjectiveSeconds`` and ``ttftObjectivePercentile`` at the forecast load.

    *Example*: ``minReplicas: 2`` unquoted, ``minReplicaCount: 1`` and a ``cpu`` trigger beside
    the external one give three warnings.
    """
    out: list[str] = []
    index, trigger = so.trigger_index, so.trigger
    metadata = trigger.metadata if trigger is not None else {}
    for key, value in metadata.items():
        if not isinstance(value, str):
            shown = json.dumps(value)
            out.append(
                f"triggers[{index}].metadata.{key}: {shown} is not a string; KEDA's CRD takes"
                f' strings only, so the API server refuses the object: write {key}: "{shown.strip(chr(34))}"'
            )
    for field, key, theirs, mine in (
        ("minReplicaCount", "minReplicas", so.min_replica_count, min_replicas),
        ("maxReplicaCount", "maxReplicas", so.max_replica_count, max_replicas),
    ):
        if theirs != mine:
            unset = "" if so.sets(field) else f" (not set: KEDA's default {theirs})"
            out.append(
                f"spec.{field} {theirs}{unset} differs from metadata {key} {mine}: the HPA keeps"
                f" replicas within spec.{field}, whatever the scaler decides; set both to {mine}"
            )
    if len(so.triggers) > 1:
        others = ", ".join(t.type for i, t in enumerate(so.triggers) if i != index)
        out.append(f"{len(so.triggers)} triggers (also {others}): {SEVERAL_TRIGGERS}")
    if "targetUtilization" in metadata:
        out.append(
            f"triggers[{index}].metadata.targetUtilization is no longer used: the load signal's"
            " headroom comes from ttftObjectiveSeconds and ttftObjectivePercentile at the forecast load;"
            " delete the key"
        )
    return out


class Summary:
    """Counts the decisions of a run, for the closing line.

    *Example*: ``summary: 91 decisions; binding floor 40, tokens 38, queue 13; clamps max 5``.
    """

    def __init__(self) -> None:
        self.decisions = 0
        self.binding: Counter[str] = Counter()
        self.clamps: Counter[str] = Counter()
        self.load_off = 0

    def add(self, decision: Decision) -> None:
        """Count one decision: its binding signal, the clamps that changed it, the load signal off."""
        self.decisions += 1
        self.binding[decision.binding.value] += 1
        for clamp in decision.clamps:
            if clamp.before != clamp.after:
                self.clamps[clamp.kind.value] += 1
        if Signal.LOAD not in decision.proposals:
            self.load_off += 1

    def line(self) -> str:
        """The closing summary line (the class docstring's example)."""
        binding = ", ".join(f"{k} {n}" for k, n in self.binding.most_common()) or "none"
        clamps = ", ".join(f"{k} {n}" for k, n in self.clamps.most_common()) or "none"
        tail = f"; load signal off in {self.load_off}" if self.load_off else ""
        return f"summary: {self.decisions} decisions; binding {binding}; clamps {clamps}{tail}"
