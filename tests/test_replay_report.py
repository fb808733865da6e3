"""replay.png's helpers: cron windows in wall time, the trace's source and licence."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from scaler.decider.spec import Window
from scaler.replay.report import line_styles, window_spans
from scaler.replay.trace import source_of

SHANGHAI = ZoneInfo("Asia/Shanghai")
WEEKDAYS = Window("0 9 * * 1-5", "0 12 * * 1-5", 8, "Asia/Shanghai")


def test_the_docstring_s_worked_example() -> None:
    """A weekday 09:00-12:00 Shanghai window over 30 hours from Monday is one 01:00-04:00 UTC span."""
    start = datetime(2026, 12, 7, tzinfo=SHANGHAI)  # Monday 00:00
    spans = window_spans([WEEKDAYS], start, start + timedelta(hours=30))
    assert spans == [(datetime(2026, 12, 7, 1, tzinfo=UTC), datetime(2026, 12, 7, 4, tzinfo=UTC))]


def test_a_window_open_at_the_start_is_cut_to_the_span_and_weekends_stay_dark() -> None:
    """A window already open at the start is cut to the span, and weekends have no windows."""
    start = datetime(2026, 12, 11, 10, tzinfo=SHANGHAI)  # Friday 10:00, inside the window
    spans = window_spans([WEEKDAYS], start, start + timedelta(days=3, hours=1))  # to Monday 11:00
    assert spans == [
        (start.astimezone(UTC), datetime(2026, 12, 11, 4, tzinfo=UTC)),
        (datetime(2026, 12, 14, 1, tzinfo=UTC), datetime(2026, 12, 14, 3, tzinfo=UTC)),
    ]


def test_several_windows_in_their_own_zones_are_merged_in_time_order() -> None:
    """Windows in different time zones come back as one list in time order."""
    evening = Window("0 18 * * *", "0 20 * * *", 4, "UTC")
    start = datetime(2026, 12, 7, tzinfo=UTC)
    spans = window_spans([evening, WEEKDAYS], start, start + timedelta(days=1))
    assert spans == [
        (datetime(2026, 12, 7, 1, tzinfo=UTC), datetime(2026, 12, 7, 4, tzinfo=UTC)),
        (datetime(2026, 12, 7, 18, tzinfo=UTC), datetime(2026, 12, 7, 20, tzinfo=UTC)),
    ]


def test_figures_cite_the_shipped_traces_and_say_so_for_others() -> None:
    """Shipped traces are cited with their licence; other files say the source is unknown."""
    assert source_of("benchmarks/traces/azure2023_conv.csv").endswith("CC-BY-4.0")
    assert "Apache-2.0" in source_of("/x/servegen_language_m-large_rate_10min.csv")
    assert source_of("mine.csv") == "mine.csv (source and licence not known to the scaler)"


def test_where_policies_coincide_each_stays_visible() -> None:
    """replay.png's lines: this scaler thin and on top, KEDA's policies wide and pale beneath it (so a
    pre-warm window both hold shows both), the clairvoyant dashed and the static pool dash-dotted below;
    every run its own colour."""
    names = ["this scaler", "keda baseline", "old, threshold 2", "clairvoyant", "static at peak"]
    styles = line_styles(names)
    me, keda = styles["this scaler"], styles["keda baseline"]
    assert me.zorder == max(s.zorder for s in styles.values())
    assert keda.lw >= 2.5 * me.lw
    assert keda.alpha < 1.0
    assert styles["old, threshold 2"].lw < keda.lw  # a band inside the one before it
    assert (styles["clairvoyant"].ls, styles["static at peak"].ls) == ("--", "-.")
    assert len({s.color for s in styles.values()}) == len(names)
    assert line_styles(["new (this scaler)"])["new (this scaler)"] == me  # convert --replay's name
