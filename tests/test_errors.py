"""How an error ends a command: pydantic's messages in the project's words, a failed connection by its OS
reason, one line, exit 2."""

from __future__ import annotations

import socket

import pytest
import requests
import urllib3
from pydantic import ValidationError

from scaler.cli.dispatch import _ended
from scaler.config import PrewarmWindow
from scaler.errors import rule_of, validation_problems
from scaler.sources.reflector import describe
from scaler.sources.unreached import why_unreached


def _errors() -> ValidationError:
    """A ValidationError with a bound, a type and a missing field in it."""
    with pytest.raises(ValidationError) as caught:
        PrewarmWindow.model_validate({"start": "0 9 * * *", "replicas": "0", "timezone": 7})
    return caught.value


def test_each_pydantic_error_is_a_rule_in_the_project_s_words() -> None:
    """Bounds, types and a missing field read 'must be ...' / 'is required', never 'Input should be'."""
    said = {".".join(map(str, e["loc"])): rule_of(e) for e in _errors().errors()}
    assert said == {"end": "is required", "replicas": "must be at least 1", "timezone": "must be text"}


def test_a_validation_error_ends_a_command_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A ValidationError that reaches scaler's main is one line naming each field, exit status 2."""
    assert _ended(_errors(), "scaler replay", debug=False) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        "scaler replay: error: PrewarmWindow: end: is required; replicas: must be at least 1;"
        " timezone: must be text"
    )
    assert validation_problems([]) == ""


def _wrapped(cause: OSError) -> Exception:
    """``cause`` as requests and urllib3 wrap it: MaxRetryError over NewConnectionError, URL in the text."""
    inner = urllib3.exceptions.NewConnectionError(None, f"Failed to establish a new connection: {cause}")  # type: ignore[arg-type]
    inner.__cause__ = cause
    outer = urllib3.exceptions.MaxRetryError(None, "/api/v1/nodes?limit=500&query=sum%28x%29", inner)  # type: ignore[arg-type]
    return requests.exceptions.ConnectionError(outer)


@pytest.mark.parametrize(
    ("cause", "said"),
    [
        (
            ConnectionRefusedError(111, "Connection refused"),
            "connection refused (nothing listens at that host and port)",
        ),
        (
            socket.gaierror(-2, "Name or service not known"),
            "the host name does not resolve (Name or service not known)",
        ),
        (OSError(113, "No route to host"), "no route to host"),
    ],
    ids=["refused", "no-such-host", "no-route"],
)
def test_a_failed_connection_is_said_by_its_os_reason(cause: OSError, said: str) -> None:
    """Under requests' and urllib3's wrappers, the OS's reason; the Kubernetes reflector says the same."""
    error = _wrapped(cause)
    assert why_unreached(error) == said
    assert describe(error) == said
    assert why_unreached(ValueError("not a connection")) is None
