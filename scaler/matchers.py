"""PromQL label matchers, parsed and applied here, never pasted into a query.

``labelSelector`` takes the inside of a PromQL selector, e.g.
``model_name="llama-3-8b", namespace=~"prod-.*"``. It is parsed into typed matchers;
the scaler queries Prometheus grouped *by* the label names and applies the matchers
to the returned series itself, so the value a user writes can never change the
query Prometheus runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from scaler.errors import InputError

LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
MAX_SELECTOR_LENGTH = 1024
MAX_MATCHERS = 16


class MatchOp(StrEnum):
    """A PromQL label-matching operator: equal, not equal, regex match, regex non-match."""

    EQ = "="
    NE = "!="
    RE = "=~"
    NRE = "!~"


@dataclass(frozen=True, slots=True)
class LabelMatcher:
    """One PromQL label matcher: a label name, an operator and a value."""

    name: str
    op: MatchOp
    value: str

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` pass, as PromQL reads it: an absent label is empty, regexes anchored."""
        # PromQL semantics: an absent label has the empty value; regexes are anchored.
        actual = labels.get(self.name, "")
        if self.op is MatchOp.EQ:
            return actual == self.value
        if self.op is MatchOp.NE:
            return actual != self.value
        found = re.fullmatch(self.value, actual) is not None
        return found if self.op is MatchOp.RE else not found

    def __str__(self) -> str:
        escaped = self.value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'{self.name}{self.op.value}"{escaped}"'


class SelectorError(InputError):
    """A ``labelSelector`` that cannot be parsed; the message says what and where."""

    pass


_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _read_string(text: str, i: int) -> tuple[str, int]:
    quote = text[i]
    i += 1
    out: list[str] = []
    while i < len(text):
        ch = text[i]
        if ch == "\\" and quote != "`":
            if i + 1 >= len(text) or text[i + 1] not in _ESCAPES:
                raise SelectorError(f"unsupported escape at position {i}")
            out.append(_ESCAPES[text[i + 1]])
            i += 2
            continue
        if ch == quote:
            return "".join(out), i + 1
        if ch == "\n" and quote != "`":
            raise SelectorError("newline inside a quoted value")
        out.append(ch)
        i += 1
    raise SelectorError("unterminated quoted value")


def parse_selector(text: str) -> tuple[LabelMatcher, ...]:  # noqa: PLR0912 - a tokenizer reads best as one loop
    """Parse ``name="v", name2=~"re"`` (optionally wrapped in braces) into matchers.

    Raises SelectorError naming the first problem. The empty string selects everything.
    """
    if len(text) > MAX_SELECTOR_LENGTH:
        raise SelectorError(f"longer than {MAX_SELECTOR_LENGTH} characters")
    body = text.strip()
    if body.startswith("{"):
        if not body.endswith("}"):
            raise SelectorError("opening '{' without closing '}'")
        body = body[1:-1]
    matchers: list[LabelMatcher] = []
    i = _skip_space(body, 0)
    while i < len(body):
        name_match = LABEL_NAME.match(body, i)
        if not name_match:
            raise SelectorError(f"expected a label name at position {i}: {body[i : i + 20]!r}")
        name = name_match.group(0)
        i = _skip_space(body, name_match.end())
        op = None
        for candidate in (MatchOp.RE, MatchOp.NRE, MatchOp.NE, MatchOp.EQ):
            if body.startswith(candidate.value, i):
                op = candidate
                break
        if op is None:
            raise SelectorError(f"expected one of = != =~ !~ after {name!r}")
        i = _skip_space(body, i + len(op.value))
        if i >= len(body) or body[i] not in "\"'`":
            raise SelectorError(f"expected a quoted value for {name!r}")
        value, i = _read_string(body, i)
        if op in (MatchOp.RE, MatchOp.NRE):
            try:
                re.compile(value)
            except re.error as exc:
                raise SelectorError(f"invalid regular expression for {name!r}: {exc}") from None
        matchers.append(LabelMatcher(name, op, value))
        i = _skip_space(body, i)
        if i < len(body):
            if body[i] != ",":
                raise SelectorError(f"expected ',' between matchers at position {i}")
            i = _skip_space(body, i + 1)
        if len(matchers) > MAX_MATCHERS:
            raise SelectorError(f"more than {MAX_MATCHERS} matchers")
    return tuple(matchers)


def matches_all(matchers: tuple[LabelMatcher, ...], labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` pass every matcher (no matchers: always)."""
    return all(m.matches(labels) for m in matchers)
