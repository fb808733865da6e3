"""The README lists every command; docs/cli.md (tests/test_cli_doc.py) documents every option."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from scaler import cli, convert, demo, doctor, picture, settings
from scaler.cli import build_parser
from scaler.replay import cli as replay_cli

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


COMMANDS = _commands()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_is_in_the_command_table(command: str) -> None:
    """Each subcommand has a row in the README's command table."""
    assert f"| `scaler {command}" in README


MODULE_DOCSTRINGS = [
    (module.__doc__ or "").strip() for module in (cli, convert, doctor, picture, replay_cli, demo, settings)
]


@pytest.mark.parametrize("command", ["scaler", *sorted(COMMANDS)])
def test_help_is_written_for_users(command: str) -> None:
    """--help shows a description written for users, not a module's docstring for developers."""
    parser = build_parser() if command == "scaler" else COMMANDS[command]
    assert parser.description
    assert parser.description.strip() not in MODULE_DOCSTRINGS
    assert "``" not in parser.format_help()
