"""docs/cli.md is generated from the parsers and current, and each flag name means one thing."""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import pytest

from scaler.cli import args as cliargs
from tests.helpers import script

ROOT = Path(__file__).resolve().parent.parent
CLI_DOC = ROOT / "docs" / "cli.md"


GEN = script("gen_docs")
COMMANDS: dict[str, argparse.ArgumentParser] = GEN.commands()


def test_docs_cli_md_is_current() -> None:
    """docs/cli.md is what ./dev docs writes from the parsers: a flag added, renamed or reworded
    without regenerating it fails here."""
    text = CLI_DOC.read_text()
    assert text == GEN.cli_doc(text), "docs/cli.md is out of date: run ./dev docs"


def test_the_hand_written_part_is_kept() -> None:
    """./dev docs rewrites docs/cli.md down to the marker and keeps what follows it as written."""
    text = CLI_DOC.read_text()
    kept = text.partition(GEN.HAND_WRITTEN)[2]
    assert "## Beyond the flags" in kept
    assert GEN.cli_doc(text).endswith(kept)
    assert GEN.cli_doc(GEN.HAND_WRITTEN + "\nmine\n").endswith(GEN.HAND_WRITTEN + "\n\nmine\n")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_flag_has_a_row(command: str) -> None:
    """Each flag of each command (every spelling) is in its command's section, with its help."""
    section = CLI_DOC.read_text().split(f"## scaler {command}\n", 1)[1].split("\n## ", 1)[0]
    for action in GEN.flags(COMMANDS[command]):
        for option in action.option_strings:
            assert f"`{option}`" in section, option
        assert action.help
        assert action.help.split("(")[0].strip()[:40] in section


def _kind(action: argparse.Action) -> str:
    """What a flag's value is: a switch, a format, or what its type checks (url, existing_file...)."""
    if action.nargs == 0:
        return "switch"
    if action.choices and "--output" in action.option_strings:
        return "format"
    if action.choices:
        return "choice of " + ", ".join(map(str, action.choices))
    return getattr(action.type, "__qualname__", "text").split(".")[0]


def test_each_flag_name_means_one_thing_in_every_command() -> None:
    """A flag name takes one kind of value everywhere: --prometheus a URL, --scaledobject a file,
    --output a format, --out a path, --since a duration..."""
    kinds: dict[str, set[str]] = defaultdict(set)
    for parser in COMMANDS.values():
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
                continue
            for option in action.option_strings:
                kinds[option].add(_kind(action))
    assert {o: k for o, k in kinds.items() if len(k) > 1} == {}
    assert kinds["--prometheus"] == {"url"}
    assert kinds["--scaledobject"] == {"existing_file"}
    assert kinds["--name"] == {"namespaced"}
    assert kinds["--output"] == kinds["-o"] == {"format"}
    assert kinds["--out"] == kinds["--export"] == {"to_write"}
    assert kinds["--since"] == kinds["--step"] == kinds["--interval"] == {"duration"}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_output_is_a_format_everywhere(command: str) -> None:
    """--output/-o chooses among text, wide and json wherever it is a flag."""
    for action in COMMANDS[command]._actions:
        if "--output" in action.option_strings and action.help != argparse.SUPPRESS:
            assert action.option_strings == ["-o", "--output"]
            assert set(action.choices or ()) <= set(cliargs.FORMATS)


def test_the_readme_points_to_docs_cli_md() -> None:
    """The README sends a reader to the generated table."""
    assert "(docs/cli.md)" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_flag_its_help_calls_required_is_required_in_the_usage_line(command: str) -> None:
    """A flag whose help says '(required)' is shown without brackets in the usage line, as argparse
    shows what it requires (timeline's --name was shown optional)."""
    parser = COMMANDS[command]
    usage = " ".join(parser.format_usage().split())
    for action in GEN.flags(parser):
        if action.option_strings and "(required)" in (action.help or ""):
            flag = action.option_strings[-1]
            assert f" {flag} {action.metavar or ''}".rstrip() in usage, (flag, usage)
            assert f"[{flag}" not in usage, (flag, usage)


def test_timeline_writes_a_picture_named_for_its_command() -> None:
    """scaler timeline's default --out is timeline.png (it was trace.png, the command's old name)."""
    args = COMMANDS["timeline"].parse_args(["--name", "ns/so", "--prometheus", "http://p:9090"])
    assert args.out == "timeline.png"
