"""The command line, one package: ``dispatch`` (every ``scaler`` subcommand's parser and dispatch: serve,
dry-run, demo, replay, convert, doctor, timeline) over ``demo`` (``scaler demo``: a simulated fleet,
a real Prometheus and the live path end to end), and ``args``, the one grammar of every command's
flags (formats, paths, durations, URLs, old spellings).

``dispatch`` and ``demo`` are the top of the import layers: nothing in the product imports them.
``args`` sits below every command that adds its own parser (the replay, the service's settings,
convert, doctor, timeline), so this package's names are looked up when first used: importing
``scaler.cli.args`` from below does not import the commands above it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scaler.cli.dispatch import build_parser, commands, main

__all__ = ["build_parser", "commands", "main"]


def __getattr__(name: str) -> Any:
    """``main``, ``build_parser`` and ``commands`` from ``dispatch``, imported on first use."""
    if name in __all__:
        from scaler.cli import dispatch

        return getattr(dispatch, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
