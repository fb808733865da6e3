"""Log lines as a person reads them: enum members by their values, in the console and in JSON."""

from __future__ import annotations

import io
import json

import pytest
import structlog

from scaler.model import Signal
from scaler.outputs import logs


def _logged(fmt: str) -> str:
    """One event with enums at the top, in a list and as mapping keys, as ``fmt`` renders it."""
    stream = io.StringIO()
    try:
        log = logs.configure(fmt, "info", stream)
        log.info(
            "decision", binding=Signal.LOAD, signals=[Signal.FLOOR, Signal.QUEUE], proposals={Signal.LOAD: 4}
        )
        structlog.get_config()["logger_factory"].writer.flush()
    finally:
        structlog.reset_defaults()  # configure() is global: leave no other test writing here
    return stream.getvalue()


@pytest.mark.parametrize("fmt", ["console", "json"])
def test_enum_members_are_logged_by_their_values(fmt: str) -> None:
    """No '<Signal.FLOOR: ...>' repr in a line: every member is its value, nested ones included."""
    line = _logged(fmt)
    assert "Signal." not in line
    assert "<" not in line
    if fmt == "json":
        event = json.loads(line)
        assert (event["binding"], event["signals"], event["proposals"]) == (
            "load",
            ["floor", "queue"],
            {"load": 4},
        )
    else:
        assert "signals=['floor', 'queue']" in line
        assert "binding=load" in line
