"""labelSelector: parsed into matchers, applied by the scaler, never pasted into PromQL."""

from __future__ import annotations

import pickle

import pytest

from scaler.matchers import (
    MATCH_CALL_STEPS,
    LabelMatcher,
    MatchBudget,
    MatchOp,
    OverBudget,
    SelectorError,
    matches_all,
    parse_selector,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ()),
        ("   ", ()),
        ("{}", ()),
        ('model_name="llama"', (LabelMatcher("model_name", MatchOp.EQ, "llama"),)),
        ('{model_name="llama"}', (LabelMatcher("model_name", MatchOp.EQ, "llama"),)),
        (
            'a="1", b!="2", c=~"x|y", d!~\'z.*\'',
            (
                LabelMatcher("a", MatchOp.EQ, "1"),
                LabelMatcher("b", MatchOp.NE, "2"),
                LabelMatcher("c", MatchOp.RE, "x|y"),
                LabelMatcher("d", MatchOp.NRE, "z.*"),
            ),
        ),
        (
            'a="with \\"quote\\" and \\\\ slash"',
            (LabelMatcher("a", MatchOp.EQ, 'with "quote" and \\ slash'),),
        ),
        ("a=`raw \\d`", (LabelMatcher("a", MatchOp.EQ, "raw \\d"),)),
        ('a="1",', (LabelMatcher("a", MatchOp.EQ, "1"),)),
    ],
    ids=[
        "empty",
        "blank",
        "empty-braces",
        "bare-eq",
        "braced-eq",
        "all-four-ops",
        "escaped-quote-and-slash",
        "backtick-raw",
        "trailing-comma",
    ],
)
def test_parse(text: str, expected: tuple[LabelMatcher, ...]) -> None:
    """A selector parses into its matchers, with or without braces, quoting and escapes resolved."""
    assert parse_selector(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        'a="1"} or vector(1',
        "a=1",
        '1a="x"',
        'a=="x"',
        'a="unterminated',
        'a="x" b="y"',
        'a=~"("',
        "sum(rate(x[1m]))",
        'a="\\q"',
        '{a="x"',
    ],
)
def test_rejects_anything_but_a_matcher_list(text: str) -> None:
    """Anything that is not a plain matcher list raises SelectorError instead of reaching PromQL."""
    with pytest.raises(SelectorError):
        parse_selector(text)


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ('model_name="llama"', {"model_name": "llama"}, True),
        ('model_name="llama"', {"model_name": "llama-2"}, False),
        ('model_name=~"llama.*"', {"model_name": "llama-2"}, True),
        ('model_name=~"lla"', {"model_name": "llama"}, False),  # anchored, as in PromQL
        ('model_name!~"llama.*"', {"model_name": "mistral"}, True),
        ('team!="a"', {}, True),  # an absent label is the empty string
        ('team=""', {}, True),
        ('team="a"', {}, False),
        ('a="1", b="2"', {"a": "1", "b": "2"}, True),
        ('a="1", b="2"', {"a": "1", "b": "3"}, False),
    ],
    ids=[
        "eq-match",
        "eq-mismatch",
        "re-match",
        "re-is-anchored",
        "nre-match",
        "ne-absent-label",
        "eq-empty-absent-label",
        "eq-absent-label",
        "all-match",
        "one-mismatch",
    ],
)
def test_matching_follows_promql(selector: str, labels: dict[str, str], expected: bool) -> None:
    """Matchers apply to label sets as PromQL does: anchored regexes, absent labels are empty."""
    assert matches_all(parse_selector(selector), labels) is expected


def test_rendering_round_trips() -> None:
    """Rendering matchers and parsing the text again gives the same matchers."""
    matchers = parse_selector('a="x\\"y", b=~"p.*"')
    rendered = ", ".join(str(m) for m in matchers)
    assert parse_selector(rendered) == matchers


def test_regex_dot_matches_a_newline_as_prometheus_does() -> None:
    """A regex's ``.`` matches a newline, as Prometheus compiles it (RE2 with DotNL, ``(?s:...)``)."""
    assert matches_all(parse_selector('a=~"x.y"'), {"a": "x\ny"}) is True


@pytest.mark.parametrize(
    "pattern",
    ["(a)\\\\1", "(?=a)b", "(?<!a)b", "a{1001}"],
    ids=["backreference", "lookahead", "lookbehind", "repeat-over-1000"],
)
def test_a_regex_re2_refuses_is_refused(pattern: str) -> None:
    """A pattern RE2 (and so Prometheus) cannot compile is refused, naming the label and RE2."""
    with pytest.raises(SelectorError, match=r"invalid regular expression for 'model_name': .*RE2"):
        parse_selector(f'model_name=~"{pattern}"')


def test_a_backtracking_pattern_costs_linear_work() -> None:
    """``(a|aa)+b`` on 40 characters is charged RE2's linear bound once, then remembered."""
    (matcher,) = parse_selector('model_name=~"(a|aa)+b"')
    budget = MatchBudget()
    assert matcher.matches({"model_name": "a" * 40}, budget) is False
    assert budget.spent == MATCH_CALL_STEPS + matcher.regex.programsize * 41
    assert matcher.matches({"model_name": "a" * 40}, budget) is False
    assert budget.evaluated == 1  # the second answer came from memory, uncharged


def test_a_selector_over_its_budget_stops_and_names_it() -> None:
    """A selector whose regex work passes its budget raises OverBudget naming the limit."""
    (matcher,) = parse_selector('pod=~"p-.*"')
    one = MATCH_CALL_STEPS + matcher.regex.programsize * len("p-0 ")  # a value's charge: length + 1
    budget = MatchBudget(limit=3 * one)
    for i in range(3):
        matcher.matches({"pod": f"p-{i}"}, budget)
    with pytest.raises(
        OverBudget, match=rf"share of this refresh \({3 * one:,} RE2 steps after 4 label values\)"
    ):
        matcher.matches({"pod": "p-3"}, budget)


def test_equality_matchers_cost_nothing() -> None:
    """``=`` and ``!=`` matchers are never charged: only regex work is bounded."""
    budget = MatchBudget(limit=0)
    assert matches_all(parse_selector('a="x", b!="y"'), {"a": "x", "b": "z"}, budget) is True
    assert budget.spent == 0


def test_a_matcher_pickles_as_written() -> None:
    """A regex matcher pickles (the replay's worker processes) and compiles again on the other side."""
    (matcher,) = parse_selector('a=~"x|y"')
    again = pickle.loads(pickle.dumps(matcher))
    assert again == matcher
    assert again.matches({"a": "y"})
