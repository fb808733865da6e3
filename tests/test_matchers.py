"""labelSelector: parsed into matchers, applied by the scaler, never pasted into PromQL."""

from __future__ import annotations

import pytest

from scaler.matchers import LabelMatcher, MatchOp, SelectorError, matches_all, parse_selector


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
