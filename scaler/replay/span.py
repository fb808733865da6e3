"""The span of Prometheus history a command reads: ``--since``, ``--until``, ``--step``.

Durations are written as Prometheus writes them, a number and a unit: ``90s``, ``30m``,
``6h``, ``7d``. ``--until`` is ISO 8601 with a zone and defaults to now (the clock is passed
in), down to a whole step. *Example*: ``--since 7d --until 2026-12-07T00:00:00Z --step 1m`` is the week from
2026-11-30T00:00:00Z in 10,080 steps of 60 s.

Every rate is taken over one step, and ``rate()`` needs two samples of a series inside its
window: a step shorter than two scrape intervals sees one sample of most series (all but those
whose scrapes happen to fall at both ends) and reads a fraction of the traffic, without an
error. ``step_for_scrapes`` says which step two scrapes need: a ``--step`` written shorter is
refused, the default lengthened (``scaler.replay.cli.from_history``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from scaler.cli.args import seconds
from scaler.errors import InputError


class SpanError(InputError):
    """A duration or a time that cannot be used; the message names the option and the value."""


def duration_s(text: str) -> float:
    """Seconds in a duration such as ``90s``, ``30m``, ``6h`` or ``2d`` (``scaler.cli.args.seconds``,
    the one reader of durations); SpanError otherwise."""
    try:
        return seconds(text)
    except ValueError as exc:
        raise SpanError(str(exc)) from None


@dataclass(frozen=True)
class Span:
    """From ``start`` to ``end``, in steps of ``step_s`` seconds."""

    start: datetime
    end: datetime
    step_s: float

    @property
    def steps(self) -> int:
        """Whole steps between start and end."""
        return int((self.end - self.start).total_seconds() // self.step_s)


def span(since: str, until: str | None, step: str, now: datetime) -> Span:
    """The span ``since`` before ``until`` (default ``now``), in steps of ``step``; SpanError names
    the option that is wrong."""
    if until:
        try:
            end = datetime.fromisoformat(until.replace("Z", "+00:00"))
        except ValueError:
            raise SpanError(
                f"--until {until!r} is not an ISO 8601 time such as 2026-12-07T00:00:00Z"
            ) from None
        if end.tzinfo is None:
            raise SpanError(f"--until {until!r} needs a zone (Z or +08:00)")
    length = duration_s(since)
    step_s = duration_s(step)
    if step_s < 1:
        raise SpanError(f"--step {step!r}: at least 1s")
    if not until:  # now, down to a whole step: the same windows for everyone who asks in it
        end = datetime.fromtimestamp(now.timestamp() // step_s * step_s, tz=UTC)
    if length < 2 * step_s:
        raise SpanError(f"--since {since!r} must cover at least two steps of --step {step!r}")
    return Span(end - timedelta(seconds=length), end, step_s)


# The steps a history is read in when the one asked for is too short: a whole number of a unit.
ROUND_STEPS_S = (1, 2, 5, 10, 15, 20, 30, 60, 120, 180, 300, 600, 900, 1200, 1800, 3600, 7200, 10800, 21600)


def written(seconds: float) -> str:
    """A duration as Prometheus writes it, in its largest whole unit: ``60`` -> ``1m``, ``90`` -> ``90s``."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size:.0f}{unit}"
    return f"{seconds:g}s"


def step_for_scrapes(step_s: float, scrape_s: float | None) -> float | None:
    """None when a window of ``step_s`` holds two scrapes of a series scraped every ``scrape_s``
    (or the interval is unknown); else the shortest round step that does (``ROUND_STEPS_S``).

    *Example*: a 30 s step on series scraped every 30 s gives 60.0 (``1m``); a 1 m step, None.
    """
    if scrape_s is None or step_s >= 2 * scrape_s:
        return None
    need = 2 * scrape_s
    return float(next((s for s in ROUND_STEPS_S if s >= need), math.ceil(need / 3600) * 3600))


def too_short(step: str, scrape_s: float, need_s: float) -> SpanError:
    """The error of a ``--step`` written shorter than two scrapes: the rule, what was measured, the
    step to use."""
    return SpanError(
        f"--step {step!r}: at least two scrape intervals, and this history's series are scraped every"
        f" {written(round(scrape_s))} (measured): a rate over {step} holds one sample of most series and"
        f" reads a fraction of the traffic; use --step {written(need_s)} or longer"
    )
