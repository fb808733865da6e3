"""Rewrite the generated docs: docs/metrics.md's table of input series from the input table
(scaler.inputs, as model.INPUTS), docs/metadata.md's table of keys from the metadata parser
(scaler.config.TargetPolicy), and docs/cli.md, every command and flag, from the parsers.

In docs/metrics.md and docs/metadata.md the table between two markers is generated and the rest
is written by hand; docs/cli.md is generated (``cli_doc``) down to a marker, below which its
hand-written part is kept. `./dev docs` runs this; `--check` only says whether the files
are current (exit 1 if not). tests/test_inputs.py,
tests/test_metadata_doc.py and tests/test_cli_doc.py fail when a file and its source disagree.
"""

from __future__ import annotations

import argparse
import sys
import types
import typing
from pathlib import Path
from typing import Any

import annotated_types
from pydantic import AfterValidator, BeforeValidator
from pydantic.fields import FieldInfo

from scaler import config
from scaler.cli import args as cliargs
from scaler.cli import build_parser
from scaler.cli import commands as cli_commands
from scaler.model import INPUTS
from scaler.outputs.series import TARGET_LABELS
from scaler.presets import Kind, choices

DOCS = Path(__file__).resolve().parent.parent / "docs"
DOC = DOCS / "metrics.md"
METADATA_DOC = DOCS / "metadata.md"
CLI_DOC = DOCS / "cli.md"
BEGIN = "<!-- begin inputs: generated from scaler.model.INPUTS by ./dev docs -->"
END = "<!-- end inputs -->"
HAND_WRITTEN = "<!-- written by hand from here on: ./dev docs keeps it -->"
KEYS_BEGIN = "<!-- begin keys: generated from scaler.config.TargetPolicy by ./dev docs -->"
KEYS_END = "<!-- end keys -->"


def input_table() -> list[str]:
    """The table of input series, in export order: a header, then for each row of the input
    table its series, type and labels, and its help followed by its ``doc``."""
    rows = ["| series | type | labels | meaning |", "|---|---|---|---|"]
    for spec in sorted(INPUTS.values(), key=lambda spec: spec.replica_state):
        if spec.series is not None:
            meaning = f"{spec.help} {spec.doc}".strip()
            rows.append(f"| `{spec.series}` | gauge | {', '.join(TARGET_LABELS)} | {meaning} |")
    return rows


def render(text: str) -> str:
    """``text`` (docs/metrics.md) with the generated table in place of what is between the markers."""
    return _between(text, BEGIN, END, input_table(), "docs/metrics.md")


def _between(text: str, begin: str, end: str, lines: list[str], name: str) -> str:
    head, sep, rest = text.partition(begin)
    _, sep2, tail = rest.partition(end)
    if not sep or not sep2:
        raise ValueError(f"{name} lacks the markers {begin!r} ... {end!r}")
    return "\n".join([head + begin, *lines, end + tail])


# How a value is written, for the metadata's own types (scaler.config), by the validator they carry.
VALUE_TYPES: tuple[tuple[Any, str], ...] = (
    (config.Cron, "5-field cron"),
    (config.TimeZone, "IANA zone name"),
    (config.StrictBool, "`true` | `false`"),
    (config.CustomQuery, "PromQL"),
)
# How a value is written, for the keys whose field validator (scaler.config, by name) reads it.
FIELD_VALIDATOR_TYPES = {
    "_address": "URL",
    "_selector": "PromQL label matchers",
    "_role_selector": "label name",
    "_auto_cold_start": "number, or `auto`",
}
BOUNDS = ((annotated_types.Gt, "gt", ">"), (annotated_types.Ge, "ge", ">="))
BOUNDS_ABOVE = ((annotated_types.Lt, "lt", "<"), (annotated_types.Le, "le", "<="))


def _inner(info: FieldInfo) -> tuple[Any, list[Any]]:
    """A field's type without ``| None``, and every constraint and validator on it (the field's
    own, and those of an ``Annotated`` alias inside the union)."""
    annotation, found = info.annotation, list(info.metadata)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        (annotation,) = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is typing.Annotated:
        annotation, *extra = typing.get_args(annotation)
        for item in extra:
            found += item.metadata if isinstance(item, FieldInfo) else [item]
    return annotation, found


def _validators(found: list[Any]) -> list[Any]:
    return [m.func for m in found if isinstance(m, AfterValidator | BeforeValidator)]


def key_value(name: str, info: FieldInfo) -> str:
    """How a key's value is written: the registry's choices, a literal's, a named type, or its kind."""
    if name in {kind.value for kind in Kind}:
        return " | ".join(f"`{c}`" for c in choices(Kind(name)))
    for decorator, text in FIELD_VALIDATOR_TYPES.items():
        if name in config.TargetPolicy.__pydantic_decorators__.field_validators[decorator].info.fields:
            return text
    annotation, found = _inner(info)
    funcs = _validators(found)
    for alias, text in VALUE_TYPES:
        if set(_validators(list(alias.__metadata__))) <= set(funcs):
            return text
    if typing.get_origin(annotation) is typing.Literal:
        return " | ".join(f"`{c}`" for c in typing.get_args(annotation))
    if typing.get_origin(annotation) is tuple:
        return "JSON list"
    return {str: "text", float: "number", int: "integer", bool: "`true` | `false`"}[annotation]


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:g}"


def key_rule(info: FieldInfo) -> str:
    """A key's bounds (``> 0, <= 1``) and lengths, from the field's constraints."""
    _, found = _inner(info)
    said = []
    for bounds in (BOUNDS, BOUNDS_ABOVE):
        for kind, attr, sign in bounds:
            said += [f"{sign} {_number(getattr(m, attr))}" for m in found if isinstance(m, kind)]
    least = [m.min_length for m in found if isinstance(m, annotated_types.MinLen)]
    most = [m.max_length for m in found if isinstance(m, annotated_types.MaxLen)]
    if most:
        said.append(f"{f'{least[0]} to ' if least else 'at most '}{_number(most[0])} characters")
    return ", ".join(said)


def key_default(info: FieldInfo) -> str:
    """A key's default as the metadata would write it: unset, empty, none, or the value."""
    value = info.default
    if value is None:
        return "unset"
    if value in ("", ()):
        return "empty" if value == "" else "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float):
        return f"`{_number(value).replace(',', '')}`"
    return f"`{value}`"


def metadata_table() -> list[str]:
    """docs/metadata.md's table: a row per key of ``TargetPolicy``, in the order it declares them,
    with how its value is written, its default, its bounds and its docstring; then KEDA's keys."""
    rows = ["| key | value | default | bounds | meaning |", "|---|---|---|---|---|"]
    for name, info in config.TargetPolicy.model_fields.items():
        if not info.description:
            raise ValueError(f"TargetPolicy.{name} has no docstring: it is its key's description")
        meaning = " ".join(info.description.split())
        key = f"`{info.alias or name}`"
        row = [key, key_value(name, info), key_default(info), key_rule(info), meaning]
        rows.append("| " + " | ".join(_cell(cell) for cell in row) + " |")
    keda = ", ".join(f"`{k}`" for k in sorted(config.KEDA_KEYS))
    return [*rows, "", f"KEDA's own keys, accepted and ignored (never logged): {keda}."]


def render_metadata(text: str) -> str:
    """``text`` (docs/metadata.md) with the generated table in place of what is between the markers."""
    return _between(text, KEYS_BEGIN, KEYS_END, metadata_table(), "docs/metadata.md")


def commands() -> dict[str, argparse.ArgumentParser]:
    """Each ``scaler`` subcommand's parser, by name, in the order ``scaler --help`` lists them."""
    return cli_commands()


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _value(action: argparse.Action) -> str:
    """How a flag's value is written: its choices, its metavar, or nothing for a switch."""
    if action.nargs == 0:
        return ""
    if action.choices:
        return " \\| ".join(f"`{c}`" for c in action.choices)
    metavar = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
    return f"`{metavar}`" + (" (optional)" if action.nargs == "?" else "")


def _default(action: argparse.Action) -> str:
    if action.default in (None, False, argparse.SUPPRESS) or action.nargs == 0:
        return ""
    return f"`{action.default}`"


def flags(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """A command's documented flags and arguments: all but --help and the hidden old spellings."""
    return [
        action
        for action in parser._actions
        if action.help != argparse.SUPPRESS and not isinstance(action, argparse._HelpAction)
    ]


def cli_doc(text: str = "") -> str:
    """docs/cli.md: the grammar, then per command its description, a row per flag (value,
    default, meaning) and the old spellings it still accepts; then the hand-written part of
    ``text`` (the file as it is), from ``HAND_WRITTEN`` on, kept as it is."""
    intro = (cliargs.__doc__ or "").split("\n\n", 1)[1].strip().replace("``", "`")
    lines = [
        "<!-- generated from the parsers (scaler/cli/dispatch.py and each command's add_parser)"
        " by ./dev docs, down to the hand-written part: edit them, not this part -->",
        "# The command line",
        "",
        "Every command of `scaler`, each flag with how its value is written, its default and what it"
        " means, as `scaler COMMAND --help` prints them. One grammar holds for all of them"
        " (`scaler/cli/args.py`):",
        "",
        intro,
        "",
        "Exit status: 0 done; 2 a bad input (a flag, a key, a file) or a source named that cannot be"
        " used, in one line `scaler COMMAND: error: ...`; 1 a bug of ours, in one line"
        " `scaler COMMAND: bug: ...`, its traceback with `--debug`; 130 Ctrl-C. `scaler doctor` also"
        " exits 1 when a finding is an error.",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    parsers = commands()
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help or "" for choice in sub._choices_actions}
    for name in parsers:
        lines.append(f"| [`scaler {name}`](#scaler-{name}) | {_cell(helps.get(name, ''))} |")
    for name, parser in parsers.items():
        lines += ["", f"## scaler {name}", "", (parser.description or "").strip(), ""]
        lines += ["| flag | value | default | meaning |", "|---|---|---|---|"]
        for action in flags(parser):
            names = ", ".join(f"`{o}`" for o in action.option_strings) or "(the argument)"
            meaning = (action.help or "") % {"default": action.default}
            if action.required:
                meaning += " (required)"
            lines.append(f"| {names} | {_value(action)} | {_default(action)} | {_cell(meaning)} |")
        old = cliargs.deprecations(parser)
        if old:
            said = "; ".join(f"`{o}` is `{n}`" for o, n in old)
            lines += ["", f"Old spellings, accepted until the next release with a `deprecated` line: {said}."]
    kept = text.partition(HAND_WRITTEN)[2].lstrip("\n")
    return "\n".join([*lines, "", HAND_WRITTEN, "", ""]) + kept


def main(argv: list[str]) -> int:
    """Write the generated docs (or with ``--check``, exit 1 when one is out of date)."""
    metrics, metadata = DOC.read_text(), METADATA_DOC.read_text()
    docs = {DOC: (metrics, render(metrics)), METADATA_DOC: (metadata, render_metadata(metadata))}
    cli = _read(CLI_DOC)
    docs[CLI_DOC] = (cli, cli_doc(cli))
    if "--check" in argv:
        stale = [path.name for path, (old, now) in docs.items() if old != now]
        if stale:
            print(f"docs/{' and docs/'.join(stale)} out of date: run ./dev docs", file=sys.stderr)
            return 1
        return 0
    for path, (_, now) in docs.items():
        path.write_text(now)
    return 0


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
