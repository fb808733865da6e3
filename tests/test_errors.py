"""How an error ends a command: pydantic's messages in the project's words, one line, exit 2."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from scaler.cli import _ended
from scaler.config import PrewarmWindow
from scaler.errors import rule_of, validation_problems


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
