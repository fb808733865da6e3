"""scaler timeline's picture as a person reads it: each time label once, the title the data's span."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from scaler.adoption.timeline import History, _time_axis, title

T0 = datetime(2026, 11, 30, 15, 19, 30, tzinfo=UTC)


def _history(minutes: float, start: datetime = T0, asked: float | None = None) -> History:
    """A target every 15 s for ``minutes`` from ``start``, over a span of ``asked`` minutes from it."""
    end = start + timedelta(minutes=asked if asked is not None else minutes)
    history = History("inference", "llama", start, end, 15.0)
    steps = int(minutes * 4)
    history.series["target"] = [(start.timestamp() + 15 * k, 2.0) for k in range(steps)]
    return history


@pytest.mark.parametrize("minutes", [3, 10, 120, 4 * 24 * 60], ids=["3-min", "10-min", "2-h", "4-d"])
def test_each_time_label_is_said_once(minutes: int) -> None:
    """Over minutes, hours or days, no two ticks of the time axis carry the same label."""
    fig, ax = plt.subplots()
    try:
        begin, end = T0, T0 + timedelta(minutes=minutes)
        ax.plot([begin, end], [0, 1])  # type: ignore[arg-type]
        _time_axis(ax, begin, end, ZoneInfo("UTC"))
        fig.canvas.draw()
        labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    finally:
        plt.close(fig)
    assert len(labels) >= 3
    assert len(labels) == len(set(labels)), labels


def test_the_title_is_the_span_the_data_covers() -> None:
    """Decisions over all of the span asked: the title gives it, to the second on a short span."""
    assert title(_history(4)) == "inference/llama: decisions from 2026-11-30 15:19:30 to 15:23:30 UTC"


def test_a_span_asked_beyond_the_data_is_said_beside_it() -> None:
    """Four minutes of decisions in ten asked: the data's span first, the one asked beside it."""
    said = title(_history(4, asked=10), "Asia/Shanghai")
    assert said == (
        "inference/llama: decisions from 2026-11-30 23:19:30 to 23:23:30 Asia/Shanghai"
        " (of 2026-11-30 23:19 to 2026-11-30 23:29 asked: no decision at the rest)"
    )
