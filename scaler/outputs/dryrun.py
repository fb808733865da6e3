"""The dry-run rendering of a decision: one line of text, or one JSON object."""

from __future__ import annotations

import json
from datetime import UTC

from scaler.model import Decision, Signal


def format_line(decision: Decision, name: str | None = None) -> str:
    when = decision.now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
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
    if decision.notes:
        line += " | " + "; ".join(decision.notes)
    return line


def format_json(decision: Decision, name: str | None = None) -> str:
    body = decision.to_json()
    if name:
        body = {"scaledobject": name, **body}
    return json.dumps(body, sort_keys=False, separators=(",", ":"))
