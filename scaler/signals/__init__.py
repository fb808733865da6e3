"""Pure signals: each takes data and ``now`` and returns a Proposal. No I/O, no clock, no logging."""

import math


def ceil_replicas(value: float) -> int:
    """Round a fractional replica need up, forgiving float noise (3.0000000001 is 3)."""
    return max(0, math.ceil(value - 1e-9))
