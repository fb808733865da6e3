"""The share of requests over an objective, read from a Prometheus histogram's buckets."""

from __future__ import annotations

import math

import pytest

from scaler.histogram import share_above

# 1,000 first tokens: 980 within 1 s, 998 within 2.5 s (cumulative, as `le` buckets count).
TYPICAL = {0.5: 900.0, 1.0: 980.0, 2.5: 998.0, 5.0: 1000.0, math.inf: 1000.0}


@pytest.mark.parametrize(
    ("value", "buckets", "expected"),
    [
        (1.0, TYPICAL, 0.02),  # exact at a bound
        (2.5, TYPICAL, 0.002),
        (2.0, TYPICAL, 0.02 ** (1 / 3) * 0.002 ** (2 / 3)),  # log-linear inside (1, 2.5]: 0.43%
        (0.25, TYPICAL, 1.0**0.5 * 0.1**0.5),  # inside the lowest bucket, which starts at 0 with all above
        (6.0, TYPICAL, 0.0),  # above the largest finite bound: what is above it (none here)
        (3.0, {1.0: 980.0, 2.5: 1000.0, math.inf: 1000.0}, 0.0),  # nothing above 2.5 s
        (2.0, {1.0: 980.0, 2.5: 1000.0, math.inf: 1000.0}, 0.0),  # and so nothing interpolated towards it
        (9.0, {1.0: 900.0, 5.0: 990.0, math.inf: 1000.0}, 0.01),  # +Inf holds 1%: an upper bound
        (1.0, {1.0: 0.0, math.inf: 0.0}, None),  # no observations
        (1.0, {1.0: 5.0}, None),  # no +Inf bucket
        (1.0, {}, None),
    ],
    ids=[
        "at-bound-1s",
        "at-bound-2.5s",
        "inside-bucket",
        "lowest-bucket",
        "above-largest-bound",
        "none-above",
        "none-above-inside",
        "inf-bucket",
        "empty",
        "no-inf",
        "no-buckets",
    ],
)
def test_share_above_table(value: float, buckets: dict[float, float], expected: float | None) -> None:
    """Exact at bucket bounds, log-linear in the survival function between them, None without data."""
    got = share_above(value, buckets)
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_log_linear_is_below_linear_inside_a_wide_bucket() -> None:
    """Inside (1, 2.5] the share above 2 s is below what linear interpolation gives (1/3 of the bucket).

    Latencies thin out steeply inside a wide bucket; the linear reading would credit a
    third of the bucket's 18 requests (6) to the tail above 2 s.
    """
    linear = (1000.0 - 980.0 - (998.0 - 980.0) * (1.0 / 1.5)) / 1000.0
    got = share_above(2.0, TYPICAL)
    assert got is not None
    assert 0.002 < got < linear
