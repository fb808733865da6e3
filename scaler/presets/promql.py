"""A user's PromQL, read with a real parser: whether it parses (and where it stops), and whether
it is one series selector under an aggregation that keeps one series.

The parser is promql-parser (GreptimeTeam's PromQL parser in Rust, through its Python binding),
not patterns: ``sum(Q{m="a"}) by (m)``, ``sum by (m) (Q{m="a"})``, ``(Q{m="a"})`` and a bare
``Q`` are one reading of ``Q`` alike, and an unbalanced query is refused with its position.

*Example*: ``sum(vllm:num_requests_waiting{model_name="qwen"}) by (model_name)`` is ``sum`` of
``vllm:num_requests_waiting`` with ``model_name="qwen"``: one series, since the one label it
keeps is pinned by an equality matcher. ``sum(rate(x[1m])`` is refused: ``does not parse at
character 4 (unclosed left parenthesis)``, the ``(`` left open.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import promql_parser

from scaler.errors import InputError
from scaler.matchers import LabelMatcher, MatchOp

# The aggregations of one gauge that give one number per group (KEDA needs one element).
AGGREGATIONS = frozenset({"sum", "max", "min", "avg"})
# The parser's matcher operators by name (they are not hashable) -> ours.
_OPS = {"Equal": MatchOp.EQ, "NotEqual": MatchOp.NE, "Re": MatchOp.RE, "NotRe": MatchOp.NRE}
_OPENS, _CLOSES = "([{", ")]}"
_QUOTES = "\"'`"
# The parser follows Prometheus 2.45's functions: a function it does not know may be a newer
# Prometheus' (or a fork's), which the Prometheus read decides; it is not refused here.
_UNKNOWN_FUNCTION = "unknown function"


class PromQLError(InputError):
    """A query that does not parse: where it stops (1-based ``column``) and why."""

    def __init__(self, query: str, column: int, reason: str) -> None:
        self.query, self.column, self.reason = query, column, reason
        near = query[column - 1 : column + 19].strip()
        super().__init__(
            f"does not parse at character {column}" + (f" ({near!r})" if near else "") + f": {reason}"
        )


@dataclass(frozen=True, slots=True)
class OneSelector:
    """A query that reads one metric: the aggregation over it (None for a bare selector), the
    metric name and the matchers written (``__name__`` left out)."""

    aggregation: str | None
    metric: str
    matchers: tuple[LabelMatcher, ...]


def parse(query: str) -> Any:
    """The query's syntax tree; PromQLError naming where it stops when it does not parse."""
    try:
        return promql_parser.parse(query)
    except ValueError as exc:
        raise PromQLError(query, _column(query), str(exc)) from None


def problem(query: str) -> PromQLError | None:
    """Why ``query`` is refused (it does not parse), or None (it does, or names a function this
    parser does not know)."""
    try:
        parse(query)
    except PromQLError as exc:
        return None if exc.reason.startswith(_UNKNOWN_FUNCTION) else exc
    return None


def one_selector(query: str) -> OneSelector | None:
    """The one metric ``query`` reads when it is a selector, bare or under one of
    ``AGGREGATIONS`` that keeps one series (no ``by``, or ``by`` labels each pinned by an
    equality matcher; no ``without``), with no offset or ``@``; else None (also when it does not
    parse)."""
    try:
        expr = parse(query)
    except PromQLError:
        return None
    expr = _unwrapped(expr)
    aggregation = None
    if isinstance(expr, promql_parser.AggregateExpr):
        aggregation = str(expr.op)
        modifier = expr.modifier
        selector = _unwrapped(expr.expr)
        if aggregation not in AGGREGATIONS or expr.param is not None:
            return None
    else:
        modifier, selector = None, expr
    if not isinstance(selector, promql_parser.VectorSelector) or selector.offset or selector.at:
        return None
    written = [LabelMatcher(m.name, _OPS[_op_name(m.op)], m.value) for m in selector.matchers.matchers]
    named = [m.value for m in written if m.name == "__name__" and m.op is MatchOp.EQ]
    metric = selector.name or (named[0] if len(named) == 1 else None)
    if metric is None:
        return None
    matchers = tuple(m for m in written if m.name != "__name__")
    if modifier is not None:
        pinned = {m.name for m in matchers if m.op is MatchOp.EQ}
        if modifier.type is not promql_parser.AggModifierType.By or not set(modifier.labels) <= pinned:
            return None
    return OneSelector(aggregation, metric, matchers)


def metric_names(query: str) -> frozenset[str]:
    """Every metric name ``query`` selects, in range selectors too (empty when it does not parse).

    *Example*: ``sum(rate(a[1m])) / sum(b{x="y"})`` names ``a`` and ``b``.
    """
    try:
        expr = parse(query)
    except PromQLError:
        return frozenset()
    names: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector) and node.name:
            names.add(node.name)

    promql_parser.walk(expr, visit)
    return frozenset(names)


def _op_name(op: Any) -> str:
    """``MatchOp.Equal`` -> ``Equal``."""
    return str(op).rsplit(".", 1)[-1]


def _unwrapped(expr: Any) -> Any:
    while isinstance(expr, promql_parser.ParenExpr):
        expr = expr.expr
    return expr


def _column(query: str) -> int:
    """Where ``query`` stops parsing, 1-based: a bracket closed that was never opened, a quote
    never closed, the innermost bracket left open; else the end of the longest prefix that
    parses (the first character after it that is not a space)."""
    stack: list[int] = []
    i = 0
    while i < len(query):
        ch = query[i]
        if ch in _QUOTES:
            end = _string_end(query, i)
            if end is None:
                return i + 1
            i = end
        elif ch == "#":  # a comment, to the end of its line
            newline = query.find("\n", i)
            i = len(query) if newline < 0 else newline
        elif ch in _OPENS:
            stack.append(i)
        elif ch in _CLOSES:
            if not stack or _OPENS[_CLOSES.index(ch)] != query[stack[-1]]:
                return i + 1
            stack.pop()
        i += 1
    if stack:
        return stack[-1] + 1
    parsed = max((n for n in range(len(query), 0, -1) if _parses(query[:n])), default=0)
    rest = len(query[parsed:]) - len(query[parsed:].lstrip())
    return min(parsed + rest, max(len(query) - 1, 0)) + 1


def _string_end(query: str, start: int) -> int | None:
    """The index of the quote closing the string opened at ``start``, or None."""
    quote, i = query[start], start + 1
    while i < len(query):
        if query[i] == "\\" and quote != "`":
            i += 2
            continue
        if query[i] == quote:
            return i
        i += 1
    return None


def _parses(text: str) -> bool:
    try:
        promql_parser.parse(text)
    except ValueError:
        return False
    return True
