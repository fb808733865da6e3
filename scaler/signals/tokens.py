"""Token signal: forecast token load one cold start ahead, in replicas.

    busy(t)  = prompt_rate(t) / P + generation_rate(t) / G
    tokens   = ceil(busy(now + coldStartSeconds) / usable)

where the rates are forecasts (scaler.forecast) read at the horizon, because a
replica ordered now serves only after its cold start, and ``P``, ``G`` and ``usable`` are
the per-replica capacities and the usable fraction of them that the capacity calibration
(scaler.calibration) holds: the configured ``promptTokensPerSecondPerReplica``,
``generationTokensPerSecondPerReplica`` and ``targetUtilization`` at first, then what the
fleet showed it serves within the TTFT objective. Prefill and decode are added as GPU
time here; where they do not compete that overstates the need, and the calibration's
usable load, learned along the traffic's own token mix, takes it back.

*Example*: forecast 27,000 prompt and 5,400 generated tokens/s against 9,000 and 1,800 per
replica is 3 + 3 = 6 replicas of capacity; at a usable fraction of 0.75 that asks for 8.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from scaler.forecast import Forecast
from scaler.model import Capacity, Proposal, Signal
from scaler.signals import ceil_replicas

if TYPE_CHECKING:
    from scaler.signals.context import SignalInputs


@dataclass(frozen=True, slots=True)
class TokenDemand:
    """Replicas of capacity (fractional, before the usable fraction) now and at the horizon."""

    now: float
    horizon: float
    peak_within_horizon: float
    usable_fraction: float

    @property
    def replicas_at_horizon(self) -> float:
        """Replicas to ask for at the horizon: its demand over the usable fraction."""
        return self.horizon / self.usable_fraction

    @property
    def replicas_peak(self) -> float:
        """Replicas for the peak within the horizon, over the usable fraction."""
        return self.peak_within_horizon / self.usable_fraction


def demand(
    prompt: Forecast | None,
    generation: Forecast | None,
    capacity: Capacity,
    horizon_s: float,
    margin_scale: float = 1.0,
) -> TokenDemand | None:
    """Token demand from the forecasts the capacity needs; None when one of them is unknown."""
    if not capacity.known:
        return None
    if capacity.prompt_tokens_per_s and prompt is None:
        return None
    if capacity.generation_tokens_per_s and generation is None:
        return None

    def ends(f: Forecast | None) -> tuple[float, float]:
        # The forecast is linear in the horizon: its largest value over [0, horizon] is at an end.
        return (f.at(0.0, margin_scale), f.at(horizon_s, margin_scale)) if f else (0.0, 0.0)

    p_now, p_later = ends(prompt)
    g_now, g_later = ends(generation)
    return TokenDemand(
        now=capacity.busy(p_now, g_now),
        horizon=capacity.busy(p_later, g_later),
        peak_within_horizon=capacity.busy(max(p_now, p_later), max(g_now, g_later)),
        usable_fraction=capacity.usable_fraction,
    )


def propose(
    token_demand: TokenDemand | None, capacity: Capacity, horizon_s: float, unknown_reason: str
) -> Proposal:
    """The token signal's proposal: replicas for the forecast load at the horizon, or why it abstains."""
    if not capacity.known:
        return Proposal(
            Signal.TOKENS,
            None,
            "off: no capacity configured (promptTokensPerSecondPerReplica,"
            " generationTokensPerSecondPerReplica) and none measured yet; it is measured"
            " from the first minute in which requests queue",
        )
    if token_demand is None:
        return Proposal(Signal.TOKENS, None, f"token rates unknown ({unknown_reason})")
    replicas = ceil_replicas(token_demand.replicas_at_horizon)
    return Proposal(
        Signal.TOKENS,
        replicas,
        f"forecast {token_demand.horizon:.2f} replicas of capacity at now+{horizon_s:g}s"
        f" / {token_demand.usable_fraction:.2f} usable; {capacity.describe()}",
        {"busy_replicas_at_horizon": token_demand.horizon},
    )


def from_inputs(inputs: SignalInputs) -> Proposal:
    """The token signal on the table's one signature."""
    return propose(inputs.token_demand, inputs.capacity, inputs.horizon_s, inputs.token_unknown)
