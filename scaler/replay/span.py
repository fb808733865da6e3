"""The span of Prometheus history a command reads: ``--since``, ``--until``, ``--step``.

Durations are written as Prometheus writes them, a number and a unit: ``90s``, ``30m``,
``6h``, ``7d``. ``--until`` is ISO 8601 with a zone and defaults to now (the clock is passed
in), down to a whole step. *Example*: ``--since 7d --until 2026-12-07T00:00:00Z --step 1m`` is the week from
2026-11-30T00:00:00Z in 10,080 steps of 60 s.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from scaler.cliargs import seconds
from scaler.errors import InputError


class SpanError(InputError):
    """A duration or a time that cannot be used; the message names the option and the value."""


def duration_s(text: str) -> float:
    """Seconds in a duration such as ``90s``, ``30m``, ``6h`` or ``2d`` (``scaler.cliargs.seconds``,
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
