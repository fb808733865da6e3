"""PromQL label matchers, parsed and applied here, never pasted into a query.

``labelSelector`` takes the inside of a PromQL selector, e.g.
``model_name="llama-3-8b", namespace=~"prod-.*"``. It is parsed into typed matchers;
the scaler queries Prometheus grouped *by* the label names and applies the matchers
to the returned series itself, so the value a user writes can never change the
query Prometheus runs.

Regular expressions (``=~``, ``!~``) run on RE2 (google-re2), as Prometheus' own do (Go's
``regexp`` is RE2): linear in the label value's length, never backtracking, so a pattern such
as ``(a|aa)+b`` costs microseconds, not the seconds Python's ``re`` spends on a 40-character
value. The options are Prometheus': the value must compile on its own, ``.`` matches a
newline, and the match is anchored at both ends (``model/labels/regexp.go``:
``syntax.Perl|syntax.DotNL``, ``"^(?s:" + v + ")$"``). A pattern RE2 refuses (a
backreference, a lookaround, one too large) is refused here, so Prometheus would refuse it too.

Each matcher keeps what it found for the label values it has seen (``MEMO_VALUES``), and a
``MatchBudget`` bounds the regex work one selector may spend in one refresh, counted in RE2
steps rather than seconds, so replicas given the same series answer alike.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import re2

from scaler.errors import InputError

LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
MAX_SELECTOR_LENGTH = 1024
MAX_MATCHERS = 16
# Label values a regex matcher remembers its answer for (count): more than one label's values
# across a large fleet (a pod name per pod, a few thousand); past it the memory starts over.
MEMO_VALUES = 10_000
# What one call into RE2 costs beyond its steps, in RE2 steps: a call costs 3-8 us of Python and
# pybind11 here however small the program (BENCHMARKS.md, "One tenant's regex"), so a pattern with
# a tiny program over many values is counted too.
MATCH_CALL_STEPS = 1_000
# The regex work one target's selector may spend in one refresh, in RE2 steps (program size x
# (value length + 1), RE2's own bound, plus MATCH_CALL_STEPS a call): 20 million is at most about
# 0.1 s here (0.1-4 ns a charged step measured), and about 15,000 new label values for a small
# pattern, more than a 1,000-pod fleet's series bring on a first refresh.
# A selector past it leaves its unread inputs unknown for that refresh and goes on at the next,
# where the values it already matched cost nothing.
SELECTOR_STEPS_PER_REFRESH = 20_000_000


def _re2_options() -> Any:
    options = re2.Options()
    options.dot_nl = True  # Prometheus: syntax.DotNL, "(?s:" ... ")"
    options.log_errors = False  # the refusal is ours to say, not RE2's on stderr
    return options


_OPTIONS = _re2_options()


def compile_regex(value: str) -> Any:
    """``value`` compiled as Prometheus compiles a label regex (RE2, anchored, ``.`` matching
    newlines); SelectorError with RE2's reason when it does not compile."""
    try:
        re2.compile(value, _OPTIONS)  # on its own first: "a)|(b" must not pass through the group
        return re2.compile(f"(?s:{value})", _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise SelectorError(f"{reason} (RE2, as Prometheus: no backreferences or lookarounds)") from None


class OverBudget(Exception):  # noqa: N818 - a budget spent is not an error of the caller's
    """A selector's regex work went over its share of a refresh (``MatchBudget``)."""

    def __init__(self, budget: MatchBudget) -> None:
        super().__init__(
            f"labelSelector's regular expressions went over their share of this refresh"
            f" ({budget.limit:,} RE2 steps after {budget.evaluated:,} label values):"
            " read again at the next refresh, where the values already matched cost nothing;"
            " a simpler regex or an = matcher avoids it"
        )


@dataclass(slots=True)
class MatchBudget:
    """The regex work one selector may still spend in one refresh, in RE2 steps."""

    limit: int = SELECTOR_STEPS_PER_REFRESH
    spent: int = 0
    evaluated: int = 0

    def charge(self, steps: int) -> None:
        """Count ``steps``; OverBudget once the spent work passes the limit."""
        self.spent += steps
        self.evaluated += 1
        if self.spent > self.limit:
            raise OverBudget(self)


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
    # The RE2 program of a regex matcher, and what it found per label value (not compared).
    regex: Any = field(default=None, init=False, repr=False, compare=False)
    seen: dict[str, bool] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.op in (MatchOp.RE, MatchOp.NRE):
            object.__setattr__(self, "regex", compile_regex(self.value))

    def __reduce__(self) -> tuple[type[LabelMatcher], tuple[str, MatchOp, str]]:
        # Pickled (the replay's worker processes) as what it was written as; compiled again there.
        return (LabelMatcher, (self.name, self.op, self.value))

    def matches(self, labels: Mapping[str, str], budget: MatchBudget | None = None) -> bool:
        """Whether ``labels`` pass, as PromQL reads it: an absent label is empty, regexes anchored.
        A regex's work on a value not seen before is charged to ``budget`` (OverBudget past it)."""
        # PromQL semantics: an absent label has the empty value; regexes are anchored.
        actual = labels.get(self.name, "")
        if self.op is MatchOp.EQ:
            return actual == self.value
        if self.op is MatchOp.NE:
            return actual != self.value
        found = self.seen.get(actual)
        if found is None:
            if budget is not None:
                budget.charge(MATCH_CALL_STEPS + self.regex.programsize * (len(actual.encode()) + 1))
            found = self.regex.fullmatch(actual) is not None
            if len(self.seen) >= MEMO_VALUES:
                self.seen.clear()
            self.seen[actual] = found
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
        try:
            matchers.append(LabelMatcher(name, op, value))
        except SelectorError as exc:
            raise SelectorError(f"invalid regular expression for {name!r}: {exc}") from None
        i = _skip_space(body, i)
        if i < len(body):
            if body[i] != ",":
                raise SelectorError(f"expected ',' between matchers at position {i}")
            i = _skip_space(body, i + 1)
        if len(matchers) > MAX_MATCHERS:
            raise SelectorError(f"more than {MAX_MATCHERS} matchers")
    return tuple(matchers)


def matches_all(
    matchers: tuple[LabelMatcher, ...], labels: Mapping[str, str], budget: MatchBudget | None = None
) -> bool:
    """Whether ``labels`` pass every matcher (no matchers: always); regex work charged to ``budget``."""
    return all(m.matches(labels, budget) for m in matchers)
