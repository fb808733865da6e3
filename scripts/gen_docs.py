"""Rewrite the generated docs: docs/metrics.md's table of input series from the input table
(scaler.inputs, as model.INPUTS), and docs/cli.md, every command and flag, from the parsers.

In docs/metrics.md the table between the two markers is generated and the rest is written by
hand; docs/cli.md is generated whole (``cli_doc``). `./dev docs` runs this; `--check` only says
whether the files are current (exit 1 if not). tests/test_inputs.py and tests/test_cli_doc.py
fail when a file and its source disagree.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scaler import cliargs
from scaler.cli import build_parser
from scaler.model import INPUTS
from scaler.outputs.series import TARGET_LABELS

DOC = Path(__file__).resolve().parent.parent / "docs" / "metrics.md"
CLI_DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
BEGIN = "<!-- begin inputs: generated from scaler.model.INPUTS by ./dev docs -->"
END = "<!-- end inputs -->"


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
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise ValueError(f"docs/metrics.md lacks the markers {BEGIN!r} ... {END!r}")
    return "\n".join([head + BEGIN, *input_table(), END + tail])


def commands() -> dict[str, argparse.ArgumentParser]:
    """Each ``scaler`` subcommand's parser, by name, in the order ``scaler --help`` lists them."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


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


def cli_doc() -> str:
    """docs/cli.md: the grammar, then per command its description, a row per flag (value,
    default, meaning) and the old spellings it still accepts."""
    intro = (cliargs.__doc__ or "").split("\n\n", 1)[1].strip().replace("``", "`")
    lines = [
        "<!-- generated from the parsers (scaler/cli.py and each command's add_parser) by ./dev docs;"
        " edit them, not this file -->",
        "# The command line",
        "",
        "Every command of `scaler`, each flag with how its value is written, its default and what it"
        " means, as `scaler COMMAND --help` prints them. One grammar holds for all of them"
        " (`scaler/cliargs.py`):",
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
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    """Write the generated docs (or with ``--check``, exit 1 when one is out of date)."""
    text = DOC.read_text()
    new = render(text)
    cli = cli_doc()
    if "--check" in argv:
        stale = [p.name for p, old, now in ((DOC, text, new), (CLI_DOC, _read(CLI_DOC), cli)) if old != now]
        if stale:
            print(f"docs/{' and docs/'.join(stale)} out of date: run ./dev docs", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    CLI_DOC.write_text(cli)
    return 0


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
