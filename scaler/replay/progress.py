"""Progress of a long command on stderr: a live line on a terminal, a line per stage elsewhere.

A replay's steps (reading the history, measuring the replica, each pass of the clairvoyant's
search, the policies, the static pool, the picture) are stages. On a terminal one line is drawn
again as a stage moves (tqdm: the stage, its requests replayed, the rate and what is left), and
each stage replaces the one before; to a file or a pipe (CI logs, ``2> log``) each stage is one
line when it starts, with the seconds since the command began, so a log shows where the time
went and where a run stopped:

    scaler replay: progress: 0.0s: reading the history from Prometheus
    scaler replay: progress: 3.1s: the clairvoyant's schedule, pass 1 (437,003 requests)

A stage's total is what it will count (requests replayed, the warm-up's included); a stage
without one (a single read) shows its elapsed time only. The clock is read here, at the edge,
for the elapsed times printed; no figure of the replay depends on it.
"""

from __future__ import annotations

import io
import os
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO

from tqdm import tqdm

Advance = Callable[[int], None]


def _nothing(count: int) -> None:
    """The advance of a stage that shows nothing more than its start."""


def _terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal a line can be drawn on: one with no width (a pseudo-terminal
    nobody sized, as ``script`` opens) shows no bar, so it gets the lines a file gets."""
    isatty = getattr(stream, "isatty", None)
    if not (isatty and isatty()):
        return False
    try:
        return os.get_terminal_size(stream.fileno()).columns > 0
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return True  # a terminal whose size cannot be asked: let tqdm draw


class Progress:
    """Stages of one command (module docstring); ``live`` None: a live line when ``stream`` is a terminal."""

    def __init__(self, command: str, stream: TextIO | None = None, live: bool | None = None) -> None:
        self.command = command
        self.stream = stream if stream is not None else sys.stderr
        self.live = _terminal(self.stream) if live is None else live
        self.began = time.perf_counter()
        self.stages: list[str] = []  # every stage started, in order (what a log shows)
        self._bar: Any = None

    def stage(self, what: str, total: int | None = None, unit: str = "req") -> Advance:
        """Start a stage (ending the one before); returns what advances it by a count."""
        self._end_bar()
        self.stages.append(what)
        if not self.live:
            counted = f" ({total:,} requests)" if total and unit == "req" else ""
            print(
                f"{self.command}: progress: {time.perf_counter() - self.began:.1f}s: {what}{counted}",
                file=self.stream,
                flush=True,
            )
            return _nothing
        self._bar = tqdm(
            total=total,
            desc=f"{self.command}: {what}",
            unit=unit,
            unit_scale=True,
            file=self.stream,
            leave=False,
            dynamic_ncols=True,
        )
        return self._bar.update  # type: ignore[no-any-return]

    def _end_bar(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def close(self) -> None:
        """End the last stage (its live line is cleared)."""
        self._end_bar()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
