"""Structured logs: one ``decision`` event per decision, JSON in the cluster, console in a terminal.

``configure`` builds a logger and returns it; nothing is configured at import.
Metadata values are never logged: only the namespace, the ScaledObject name and
the decision itself (see docs/deploy.md, "What is logged").
"""

from __future__ import annotations

import atexit
import logging
import queue
import sys
import threading
from collections.abc import Mapping, MutableMapping
from enum import Enum
from typing import Any, TextIO

import structlog

from scaler.model import Decision
from scaler.targets.registry import Target

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


class BackgroundWriter:
    """A structlog logger that hands rendered lines to a writer thread.

    A refresh logs one ``decision`` event per ScaledObject: a thousand writes in a row on
    the event loop held KEDA's RPCs up by a tenth of a second. Lines keep their order;
    ``flush`` (also at exit) waits until every line queued so far is written.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._queue: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._done = threading.Condition()
        self._queued = 0
        self._written = 0
        self._thread = threading.Thread(target=self._run, name="log-writer", daemon=True)
        self._thread.start()
        atexit.register(self.flush)

    def _run(self) -> None:
        while True:
            line = self._queue.get()
            if line is None:
                return
            lines = [line]
            while not self._queue.empty() and len(lines) < 512:
                more = self._queue.get()
                if more is None:
                    self._write(lines)
                    return
                lines.append(more)
            self._write(lines)

    def _write(self, lines: list[str]) -> None:
        try:
            self._stream.write("".join(f"{line}\n" for line in lines))
            self._stream.flush()
        except (OSError, ValueError):
            pass  # a closed stream at exit: nothing left to tell
        with self._done:
            self._written += len(lines)
            self._done.notify_all()

    def msg(self, message: str) -> None:
        """Queue one rendered line for the writer thread (every level's method)."""
        with self._done:
            self._queued += 1
        self._queue.put(message)

    debug = info = warning = warn = error = critical = exception = fatal = failure = err = log = msg

    def flush(self, timeout: float = 5.0) -> None:
        """Wait up to ``timeout`` seconds until every line queued so far is written."""
        with self._done:
            target = self._queued
            self._done.wait_for(lambda: self._written >= target, timeout)


class BackgroundWriterFactory:
    """A structlog logger factory handing out one shared BackgroundWriter on ``stream``."""

    def __init__(self, stream: TextIO) -> None:
        self.writer = BackgroundWriter(stream)

    def __call__(self, *args: Any) -> BackgroundWriter:
        """The shared writer, whatever logger is asked for."""
        return self.writer


def _plain(value: Any) -> Any:
    """``value`` with every enum member in it (in lists, tuples, sets and mappings too) as its value."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    return value


def plain_enums(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """A structlog processor: enum members as their values (``load``), as the JSON lines write them,
    never their reprs (``<Signal.LOAD: 'load'>``), which the console renderer prints inside a list."""
    for key, value in event.items():
        event[key] = _plain(value)
    return event


def configure(fmt: str = "json", level: str = "info", stream: TextIO | None = None) -> Any:
    """Set up structlog (JSON or console, at ``level``, to ``stream``); returns the scaler's logger."""
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
            plain_enums,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=BackgroundWriterFactory(stream or sys.stderr),
        cache_logger_on_first_use=False,
    )
    return structlog.get_logger("scaler")


def decision_fields(decision: Decision) -> dict[str, Any]:
    """The fields a ``decision`` log event carries for one decision."""
    body = decision.to_json()
    return {
        "replicas": body["replicas"],
        "binding": body["binding"],
        "proposals": body["proposals"],
        "clamps": body["clamps"],
        "gpu_held_back": decision.gpu_held_back,
        "notes": body["notes"],
        "forecast": body["forecast"],
        "lead": body["lead"],
        "capacity": body["capacity"],
        "landing": body["landing"],
        "inert": body["inert"],
        "inputs": body["inputs"],
        "reason": body["reason"],
        "decided_at": body["time"],
    }


class DecisionLogger:
    """A decision sink: logs each decision bound to namespace and scaledobject, or only changes
    (of the target, the binding signal, whether the previous target landed, or why it is inert)."""

    def __init__(self, log: Any, only_changes: bool = False) -> None:
        self.log = log
        self.only_changes = only_changes
        self._last: dict[tuple[str, str], tuple[int, str, str | None, tuple[str, ...]]] = {}

    def __call__(self, target: Target, decision: Decision) -> None:
        """Log the decision, unless only changes are logged and it matches the target's last one."""
        key = (target.key.namespace, target.key.name)
        landed = None if decision.landing is None else decision.landing.reason
        inert = tuple(i.reason.value for i in decision.inert)
        state = (decision.replicas, decision.binding.value, landed, inert)
        if self.only_changes and self._last.get(key) == state:
            return
        self._last[key] = state
        self.log.info(
            "decision",
            namespace=target.key.namespace,
            scaledobject=target.key.name,
            **decision_fields(decision),
        )
