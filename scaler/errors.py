"""The two kinds of error a command ends on that are not bugs: the user's input, and a source it names.

Every error a user can cause derives from one of these, so that ``scaler``'s ``main`` tells a
mistake (one line naming the flag, key or file, exit status 2) from a bug (exit status 1,
its traceback behind ``--debug``) by class, never by guessing from ``ValueError``:

* ``InputError``: a flag, a metadata key, a manifest or a file's content that cannot be
  used (``MetadataError``, ``ScaledObjectError``, ``SpanError``, a trace's ``TraceError``...);
* ``UnreachableError``: a Prometheus, a cluster or a program the user pointed at that cannot
  be reached or used (``PrometheusQueryError``, ``KubernetesConfigError``...).

A file that cannot be opened (``OSError`` with its ``filename``) is the user's input too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


class InputError(ValueError):
    """The user's input cannot be used; the message names the flag, key or file and the rule."""


class UnreachableError(RuntimeError):
    """A source the user named (a Prometheus, a cluster, a program) cannot be reached or used."""


def is_users(exc: BaseException) -> bool:
    """Whether ``exc`` is the user's to fix (exit status 2) rather than a bug of ours (exit status 1)."""
    if isinstance(exc, InputError | UnreachableError):
        return True
    return isinstance(exc, OSError) and getattr(exc, "filename", None) is not None


# Pydantic's error types, said as the rest of the project says a rule (``must be ...``), never
# pydantic's "Input should be ...": type -> the rule, with the error's ``ctx`` values filled in.
_RULES = {
    "greater_than": "must be above {gt}",
    "greater_than_equal": "must be at least {ge}",
    "less_than": "must be below {lt}",
    "less_than_equal": "must be at most {le}",
    "multiple_of": "must be a multiple of {multiple_of}",
    "int_parsing": "must be a whole number",
    "int_type": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "finite_number": "must be a finite number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "literal_error": "must be one of {expected}",
    "enum": "must be one of {expected}",
    "string_type": "must be text",
    "string_too_short": "must be at least {min_length} character(s) long",
    "string_too_long": "must be at most {max_length} characters long",
    "string_pattern_mismatch": "must match {pattern}",
    "missing": "is required",
    "extra_forbidden": "is not a key here",
    "dict_type": "must be a mapping of keys to values",
    "list_type": "must be a list",
}


def _number(value: object) -> object:
    """``1.0`` -> ``1``: a bound as a person writes it."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def rule_of(error: Mapping[str, Any]) -> str:
    """The rule one pydantic error (an item of ``ValidationError.errors()``) broke, in the project's
    words; a validator's own message as it wrote it.

    *Example*: ``{"type": "greater_than_equal", "ctx": {"ge": 1}, ...}`` -> ``must be at least 1``.
    """
    kind = str(error.get("type", ""))
    message = str(error.get("msg", "invalid"))
    if kind in ("value_error", "assertion_error"):
        return message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    rule = _RULES.get(kind)
    if rule is None:
        return message.removeprefix("Input should be ").removeprefix("Value error, ")
    ctx = {k: _number(v) for k, v in (error.get("ctx") or {}).items()}
    try:
        return rule.format(**ctx)
    except (KeyError, IndexError):
        return message


def validation_problems(errors: Iterable[Mapping[str, Any]]) -> str:
    """Every error of a ``ValidationError`` in one line: ``where: rule; where: rule``."""
    return "; ".join(
        f"{'.'.join(str(p) for p in error.get('loc', ())) or 'the input'}: {rule_of(error)}"
        for error in errors
    )
