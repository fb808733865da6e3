"""What a conversion says: its changes and warnings, one line each, and the errors that stop it.

Every line names where the user wrote what it is about: ``where_of`` gives ``triggers[0]
(prometheus, queue)`` for the first trigger, named ``queue``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from ruamel.yaml.comments import CommentedMap

from scaler.errors import InputError


class ConvertError(InputError):
    """The input cannot be converted; the message says what to change."""


class RefusedKeysError(ConvertError):
    """Keys KEDA does not accept, one line each with the key it most resembles."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        super().__init__("; ".join(lines))


@dataclass
class Conversion:
    """The converted document, and every change and warning, one line each."""

    document: CommentedMap
    changes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # fields kept as written, with what each does here
    # The HorizontalPodAutoscaler of the input the ScaledObject takes over (KEDA then owns it), or None.
    hpa_taken: Mapping[str, Any] | None = None


def where_of(index: int, trigger: Mapping[str, Any]) -> str:
    """``triggers[INDEX] (TYPE[, NAME])``: where a trigger is, as the user wrote it."""
    name = trigger.get("name")
    return f"triggers[{index}] ({trigger.get('type')}{', ' + str(name) if name else ''})"


def joined(keys: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return keys[0] if len(keys) == 1 else ", ".join(keys[:-1]) + " and " + keys[-1]


def print_report(conversions: Sequence[Conversion], out: IO[str]) -> None:
    """Each ScaledObject's changes, what it kept and what that does here, then its warnings, one
    line each, prefixed by its name."""
    for conversion in conversions:
        name = conversion.document["metadata"].get("name", "?")
        for line in conversion.changes:
            print(f"{name}: changed {line}", file=out)
        for line in conversion.kept:
            print(f"{name}: kept {line}", file=out)
        for line in conversion.warnings:
            print(f"{name}: warning: {line}", file=out)
