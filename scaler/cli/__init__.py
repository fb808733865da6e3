"""The command line, one package: ``dispatch`` (every ``scaler`` subcommand's parser and dispatch: serve,
dry-run, demo, replay, convert, doctor, timeline) over ``demo`` (``scaler demo``: a simulated fleet,
a real Prometheus and the live path end to end).

The top of the import layers: nothing in the product imports it. The flags and durations every
command shares are ``scaler.cliargs``, below the commands that add their own parsers.
"""

from scaler.cli.dispatch import build_parser, commands, main

__all__ = ["build_parser", "commands", "main"]
