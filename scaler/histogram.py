"""Prometheus histograms read as Prometheus reads them. Pure: no I/O.

``histogram_quantile`` is Prometheus' own function of that name over cumulative bucket
counts keyed by upper bound (``le``). The live source uses it on summed per-bucket rates,
the replay on the simulated TTFT histogram, so both see the quantiles a dashboard shows
(the inputs derived from them: ``scaler.readings``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping


def histogram_quantile(q: float, buckets: Mapping[float, float]) -> float | None:  # noqa: PLR0911 - one return per case Prometheus defines
    """Prometheus' histogram_quantile over cumulative bucket counts keyed by upper bound.

    Linear interpolation inside the bucket, the lowest bucket starting at 0, and the
    +Inf bucket answered with the largest finite bound, as Prometheus does.
    """
    if not buckets or not 0 <= q <= 1:
        return None
    bounds = sorted(buckets)
    if not math.isinf(bounds[-1]):
        return None
    total = buckets[bounds[-1]]
    if total <= 0 or math.isnan(total):
        return None
    rank = q * total
    previous_bound, previous_count = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if math.isinf(bound):
                return previous_bound if len(bounds) > 1 else None
            if count == previous_count:
                return bound
            return previous_bound + (bound - previous_bound) * (rank - previous_count) / (
                count - previous_count
            )
        previous_bound, previous_count = bound, count
    return bounds[-2] if len(bounds) > 1 else None


def total(buckets: Mapping[float, float]) -> float | None:
    """The count of observations (the ``+Inf`` bucket); from bucket rates, the rate of them."""
    return next((v for k, v in buckets.items() if math.isinf(k)), None)


def share_above(value: float, buckets: Mapping[float, float]) -> float | None:  # noqa: PLR0911 - one per case
    """The share of observations above ``value``, from cumulative counts keyed by upper bound.

    Exact at the bucket bounds; between the two bounds around ``value`` the survival
    function is interpolated log-linearly (an exponential tail inside the bucket), not
    linearly as ``histogram_quantile`` does, because latencies thin out steeply inside a
    wide bucket: with vLLM's buckets a 2 s objective falls in (1, 2.5], and linear
    interpolation would put a third of that bucket's requests above 2 s. Above the largest
    finite bound the share above that bound is returned (an upper bound). None without
    observations.

    *Example*: 1,000 first tokens, 980 within 1 s, 998 within 2.5 s: 2% are above 1 s and
    0.2% above 2.5 s, so above 2 s: ``0.02 ** (1/3) * 0.002 ** (2/3) = 0.43%``.
    """
    bounds = sorted(buckets)
    if not bounds or not math.isinf(bounds[-1]):
        return None
    total = buckets[bounds[-1]]
    if not total > 0:
        return None
    lower, survive_lower = 0.0, 1.0
    for bound in bounds:
        survive = max(0.0, total - buckets[bound]) / total
        if math.isinf(bound):
            return survive_lower
        if value <= bound:
            if value <= lower:
                return survive_lower
            if survive <= 0.0:
                return 0.0
            w = (value - lower) / (bound - lower)
            return float(survive_lower ** (1.0 - w) * survive**w)
        lower, survive_lower = bound, survive
    return survive_lower
