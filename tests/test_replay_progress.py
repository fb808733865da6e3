"""Progress of the replay's long steps on stderr: a live line on a terminal, a line per stage elsewhere,
each stage's count reaching its total (scaler/replay/progress.py)."""

from __future__ import annotations

import io
import re
from collections import defaultdict
from pathlib import Path

import pytest

from scaler.cli import main
from scaler.replay.compare import compare, replayed
from scaler.replay.progress import Advance, Progress
from tests.test_compare import BOUNDS, CLUSTER, OBJECTIVE_S, POLICIES, START, _trace

ROOT = Path(__file__).resolve().parent.parent
AZURE = ROOT / "benchmarks" / "traces" / "azure2023_conv.csv"
EXAMPLE = ROOT / "scaler" / "examples" / "scaledobject.yaml"


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        """A terminal, as tqdm asks."""
        return True


class Counted(Progress):
    """Progress that counts what each stage is advanced by, beside its total."""

    def __init__(self) -> None:
        super().__init__("test", io.StringIO(), live=False)
        self.totals: dict[str, int | None] = {}
        self.counted: dict[str, int] = defaultdict(int)

    def stage(self, what: str, total: int | None = None, unit: str = "req") -> Advance:
        """Record the stage, and count its advances."""
        super().stage(what, total, unit)
        self.totals[what] = total

        def advance(count: int) -> None:
            self.counted[what] += count

        return advance


def test_not_on_a_terminal_each_stage_is_one_line() -> None:
    """To a file, a stage is a line naming the command, the seconds since it began, the stage and its
    requests; nothing else is written."""
    stream = io.StringIO()
    progress = Progress("scaler replay", stream)
    assert not progress.live
    advance = progress.stage("the clairvoyant's schedule, pass 1", 437_003)
    advance(10_000)
    progress.stage("drawing replay.png", unit="step")
    progress.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("scaler replay: progress: ")
    assert lines[0].endswith("s: the clairvoyant's schedule, pass 1 (437,003 requests)")
    assert lines[1].endswith("s: drawing replay.png")
    assert progress.stages == ["the clairvoyant's schedule, pass 1", "drawing replay.png"]


def test_on_a_terminal_one_live_line_is_drawn_again() -> None:
    """On a terminal the stage is a bar redrawn in place (carriage returns, no line per stage), cleared
    when the next stage starts."""
    stream = Terminal()
    progress = Progress("scaler replay", stream)
    assert progress.live
    advance = progress.stage("this scaler", 1000)
    advance(1000)
    progress.stage("keda baseline", 1000)
    progress.close()
    text = stream.getvalue()
    assert "\r" in text
    assert "scaler replay: this scaler" in text
    assert "scaler replay: keda baseline" in text
    assert "progress:" not in text  # the per-stage lines are for files only


def test_every_stage_of_a_comparison_reaches_its_total() -> None:
    """Each clairvoyant pass, policy and the static pool is a stage whose requests replayed (the
    warm-up's included) add up to its total: no bar stops short (it stopped at 75% when it guessed two
    clairvoyant passes)."""
    trace = _trace()
    progress = Counted()
    comparison = compare(trace, CLUSTER, START, POLICIES[:2], OBJECTIVE_S, BOUNDS, progress=progress)
    passes = [f"the clairvoyant's schedule, pass {i}" for i in range(1, comparison.search.iterations + 1)]
    static = f"static at peak, {comparison.search.peak} replicas"
    assert progress.stages == [*passes, "pinned-1", "queue", static]
    for what in progress.stages:
        assert progress.totals[what] == replayed(trace) > len(trace)
        assert progress.counted[what] == progress.totals[what], what


def test_the_replay_command_says_each_stage_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`scaler replay` to a non-terminal stderr: a progress line per stage, in order, before the table."""
    short = tmp_path / "short.csv"
    short.write_text("\n".join(AZURE.read_text().splitlines()[:2000]) + "\n")
    code = main(["replay", "--trace", str(short), "--scaledobject", str(EXAMPLE), "--out", str(tmp_path)])
    assert code == 0
    err = capsys.readouterr().err
    said = re.compile(r"^scaler replay: progress: [0-9.]+s: (.*?)(?: \([0-9,]+ requests\))?$")
    stages = [m.group(1) for m in map(said.match, err.splitlines()) if m]
    assert stages[0] == "the clairvoyant's schedule, pass 1"
    assert stages[-4:-2] == ["this scaler", "keda baseline"]
    assert stages[-2].startswith("static at peak, ")
    assert stages[-1] == "drawing replay.png"


def test_convert_replay_says_its_stages_and_writes_a_picture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`scaler convert --replay TRACE` shows its stages on stderr and writes replay.png to --replay-out, as
    `scaler replay` does."""
    short = tmp_path / "short.csv"
    short.write_text("\n".join(AZURE.read_text().splitlines()[:2000]) + "\n")
    old = ROOT / "scaler" / "examples" / "baseline.yaml"
    out = tmp_path / "out"
    code = main(
        [
            "convert",
            str(old),
            "--out",
            str(tmp_path / "new.yaml"),
            "--replay",
            str(short),
            "--replay-out",
            str(out),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "scaler convert: progress: " in captured.err
    assert "s: drawing replay.png" in captured.err
    assert f"wrote {out / 'replay.png'}" in captured.out
    png = (out / "replay.png").read_bytes()
    assert png.startswith(b"\x89PNG")
    assert "static at peak" in captured.out


def test_a_terminal_nobody_sized_gets_the_lines_a_file_gets() -> None:
    """A pseudo-terminal with no width (as `script` opens one) would show no bar: it gets a line per
    stage; sized, the live line."""
    import fcntl
    import os
    import struct
    import termios

    master, slave = os.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as stream:
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 0, 0, 0, 0))
            assert not Progress("scaler replay", stream).live
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
            assert Progress("scaler replay", stream).live
    finally:
        os.close(slave)
        os.close(master)
