"""The dry-run's rendering: one line (or JSON object) per decision, warnings, and a summary.

A line reads left to right as the decision was made::

    2026-12-07T01:00:00Z (09:00:00 Asia/Shanghai) target=6 binding=prewarm [floor=2 prewarm=6* ...]
        clamps: none | lead 180s (default) | capacity: ... | load off: ...

The local time is shown when the ScaledObject's ``timezone`` is not UTC (pre-warm windows are
written in it); ``load off`` says why the load signal did not propose. ``manifest_warnings``
lists what KEDA would refuse or read otherwise than the scaler does, before any decision;
``Summary`` ends the run with one line: decisions per binding signal and the clamps that acted.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from datetime import UTC
from typing import Any
from zoneinfo import ZoneInfo

from scaler.hpa import SEVERAL_TRIGGERS
from scaler.inventory.objects import KEDA_MAX_REPLICA_COUNT, KEDA_MIN_REPLICA_COUNT
from scaler.model import Decision, Signal


def format_line(decision: Decision, name: str | None = None, timezone: str = "UTC") -> str:
    """One decision as the dry-run's text line (module docstring), local time shown when not UTC."""
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
    if decision.lead is not None:
        line += f" | lead {decision.lead.seconds:.0f}s ({decision.lead.source})"
    if decision.capacity is not None:
        line += f" | capacity: {decision.capacity.describe()}"
    if Signal.LOAD not in decision.proposals:
        why = decision.signal_reasons.get(Signal.LOAD, "no reason given")
        line += f" | load off: {why}"
    if decision.notes:
        line += " | " + "; ".join(decision.notes)
    return line


def format_json(decision: Decision, name: str | None = None) -> str:
    """One decision as a compact JSON line, the ScaledObject's name first when given."""
    body = decision.to_json()
    if name:
        body = {"scaledobject": name, **body}
    return json.dumps(body, sort_keys=False, separators=(",", ":"))


def manifest_warnings(
    spec: Mapping[str, Any], trigger_index: int, min_replicas: int, max_replicas: int
) -> list[str]:
    """What KEDA would refuse or misread in a ScaledObject's ``spec``, one line each.

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
    triggers = [t for t in spec.get("triggers") or () if isinstance(t, Mapping)]
    metadata = triggers[trigger_index].get("metadata") if trigger_index < len(triggers) else None
    for key, value in (metadata or {}).items():
        if not isinstance(value, str):
            shown = json.dumps(value)
            out.append(
                f"triggers[{trigger_index}].metadata.{key}: {shown} is not a string; KEDA's CRD takes"
                f' strings only, so the API server refuses the object: write {key}: "{shown.strip(chr(34))}"'
            )
    for field, key, keda_default, mine in (
        ("minReplicaCount", "minReplicas", KEDA_MIN_REPLICA_COUNT, min_replicas),
        ("maxReplicaCount", "maxReplicas", KEDA_MAX_REPLICA_COUNT, max_replicas),
    ):
        given = spec.get(field)
        theirs = given if isinstance(given, int) else keda_default
        if theirs != mine:
            unset = "" if isinstance(given, int) else f" (not set: KEDA's default {keda_default})"
            out.append(
                f"spec.{field} {theirs}{unset} differs from metadata {key} {mine}: the HPA keeps"
                f" replicas within spec.{field}, whatever the scaler decides; set both to {mine}"
            )
    if len(triggers) > 1:
        others = ", ".join(str(t.get("type")) for i, t in enumerate(triggers) if i != trigger_index)
        out.append(f"{len(triggers)} triggers (also {others}): {SEVERAL_TRIGGERS}")
    if metadata and "targetUtilization" in metadata:
        out.append(
            f"triggers[{trigger_index}].metadata.targetUtilization is no longer used: the load signal's"
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
