"""Kubernetes' resource.Quantity, read exactly. Pure.

    quantity = number x suffix,   number: a decimal with an optional sign;
    suffix: a decimal exponent (e3), an SI one (n u m k M G T P E: 10^-9 .. 10^18)
            or a binary one (Ki Mi Gi Ti Pi Ei: 2^10 .. 2^60)

*Example*: ``"40Gi"`` is ``40 * 2**30``, ``"500m"`` is 1/2, ``"1e3"`` is 1000, ``3`` is 3.
The one reader of quantities: GPU counts, DRA's counters and capacities and Kueue's quotas
(``scaler.inventory``), and the HPA's tolerances (``scaler.hpa``).
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$")
_SI_PREFIXES = "kMGTPE"  # 10^3 .. 10^18, each a thousand times the one before
_SUFFIX = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    **{prefix: Fraction(1000) ** power for power, prefix in enumerate(_SI_PREFIXES, 1)},
    # The binary suffixes: Ki = 2^10 .. Ei = 2^60, each 1024 times the one before (k becomes Ki).
    **{f"{prefix.upper()}i": Fraction(1024) ** power for power, prefix in enumerate(_SI_PREFIXES, 1)},
}


def parse_quantity(value: Any) -> Fraction | None:
    """A Kubernetes quantity as an exact fraction, or None when it is not one (or negative).

    *Example*: ``parse_quantity("40Gi") == 40 * 2**30``, ``parse_quantity("500m") == Fraction(1, 2)``,
    ``parse_quantity(3) == 3``. DRA's counters and capacities and Kueue's quotas are quantities.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return Fraction(value) if value >= 0 else None
    match = _QUANTITY.match(value.strip()) if isinstance(value, str) else None
    if match is None:
        return None
    number, exponent, suffix = match.groups()
    amount = Fraction(number) * _SUFFIX[suffix or ""]
    if exponent:
        power = int(exponent[1:])
        if abs(power) > 30:
            return None
        amount = amount * Fraction(10) ** power
    return amount if amount >= 0 else None
