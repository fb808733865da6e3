"""How the decider turns fractions into whole replicas and shares into percentages. Pure.

    ceil_replicas(x) = max(0, ceil(x - FLOAT_SLACK))     a need of 3.0000000001 replicas is 3
    whole percent    = ceil(share x PERCENT - FLOAT_SLACK) / PERCENT

*Example*: ``ceil_replicas(2.4) = 3``, ``ceil_replicas(3 + 1e-12) = 3``; a percentile of 99.5 is the
quantile ``99.5 / PERCENT = 0.995``.
"""

from __future__ import annotations

import math

# The float noise a ceiling or a floor forgives, in replicas (or in a share): sums of rates carry
# errors near 1e-15 relative, so 3 x (1/3) may read 1.0000000000000002 and must not ask 2.
FLOAT_SLACK = 1e-9
# A percentage's scale: the objective's percentile (99.5) over PERCENT is its quantile (0.995).
PERCENT = 100.0


def ceil_replicas(value: float) -> int:
    """Round a fractional replica need up, forgiving float noise (3.0000000001 is 3)."""
    return max(0, math.ceil(value - FLOAT_SLACK))
