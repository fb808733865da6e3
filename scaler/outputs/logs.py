"""Structured logs: one ``decision`` event per decision, JSON in the cluster, console in a terminal.

``configure`` builds a logger and returns it; nothing is configured at import.
Metadata values are never logged: only the namespace, the ScaledObject name and
the decision itself (see the README's "What is logged").
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog

from scaler.model import Decision
from scaler.registry import Target

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def configure(fmt: str = "json", level: str = "info", stream: TextIO | None = None) -> Any:
    renderer: Any = (
        structlog.processors.JSONRenderer(sort_keys=False)
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.dict_tracebacks if fmt == "json" else structlog.dev.set_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(stream or sys.stderr),
        cache_logger_on_first_use=False,
    )
    return structlog.get_logger("scaler")


def decision_fields(decision: Decision) -> dict[str, Any]:
    body = decision.to_json()
    return {
        "replicas": body["replicas"],
        "binding": body["binding"],
        "proposals": body["proposals"],
        "clamps": body["clamps"],
        "gpu_held_back": decision.gpu_held_back,
        "notes": body["notes"],
        "forecast": body["forecast"],
        "inputs": body["inputs"],
        "reason": body["reason"],
        "decided_at": body["time"],
    }


class DecisionLogger:
    """A decision sink: logs each decision (or only changes) bound to namespace and scaledobject."""

    def __init__(self, log: Any, only_changes: bool = False) -> None:
        self.log = log
        self.only_changes = only_changes
        self._last: dict[tuple[str, str], int] = {}

    def __call__(self, target: Target, decision: Decision) -> None:
        key = (target.key.namespace, target.key.name)
        if self.only_changes and self._last.get(key) == decision.replicas:
            return
        self._last[key] = decision.replicas
        self.log.info(
            "decision",
            namespace=target.key.namespace,
            scaledobject=target.key.name,
            **decision_fields(decision),
        )
