"""Token signal: forecast token load one cold start ahead, in replicas of GPU time.

Prompt (prefill) and generation (decode) work share one GPU, so they add as GPU
time, not as independent maxima:

    busy(t)  = prompt_rate(t) / promptTokensPerSecondPerReplica
             + generation_rate(t) / generationTokensPerSecondPerReplica
    tokens   = ceil(busy(now + coldStartSeconds) / targetUtilization)

where the rates are forecasts (scaler.signals.forecast) read at the horizon: a
replica ordered now serves only after its cold start.
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.config import TargetPolicy
from scaler.model import Proposal, Signal
from scaler.signals import ceil_replicas
from scaler.signals.forecast import Forecast


@dataclass(frozen=True, slots=True)
class TokenDemand:
    """Replicas of GPU time (fractional, before utilisation) now and at the horizon."""

    now: float
    horizon: float
    peak_within_horizon: float


def busy_replicas(prompt_rate: float, generation_rate: float, policy: TargetPolicy) -> float:
    """GPU time needed per second, in replicas, for the given token rates."""
    busy = 0.0
    if policy.prompt_tokens_per_second_per_replica:
        busy += prompt_rate / policy.prompt_tokens_per_second_per_replica
    if policy.generation_tokens_per_second_per_replica:
        busy += generation_rate / policy.generation_tokens_per_second_per_replica
    return busy


def demand(prompt: Forecast | None, generation: Forecast | None, policy: TargetPolicy) -> TokenDemand | None:
    """Token demand from the forecasts the policy needs; None when one of them is unknown."""
    if not policy.token_capacity_known:
        return None
    if policy.prompt_tokens_per_second_per_replica and prompt is None:
        return None
    if policy.generation_tokens_per_second_per_replica and generation is None:
        return None
    horizon = policy.cold_start_seconds

    def ends(f: Forecast | None) -> tuple[float, float]:
        # The forecast is linear in the horizon: its largest value over [0, horizon] is at an end.
        return (f.at(0.0), f.at(horizon)) if f else (0.0, 0.0)

    p_now, p_later = ends(prompt)
    g_now, g_later = ends(generation)
    return TokenDemand(
        now=busy_replicas(p_now, g_now, policy),
        horizon=busy_replicas(p_later, g_later, policy),
        peak_within_horizon=busy_replicas(max(p_now, p_later), max(g_now, g_later), policy),
    )


def propose(token_demand: TokenDemand | None, policy: TargetPolicy, unknown_reason: str) -> Proposal:
    if not policy.token_capacity_known:
        return Proposal(
            Signal.TOKENS,
            None,
            "off: set promptTokensPerSecondPerReplica and/or generationTokensPerSecondPerReplica",
        )
    if token_demand is None:
        return Proposal(Signal.TOKENS, None, f"token rates unknown ({unknown_reason})")
    replicas = ceil_replicas(token_demand.horizon / policy.target_utilization)
    return Proposal(
        Signal.TOKENS,
        replicas,
        f"forecast {token_demand.horizon:.2f} replicas of GPU time at now+{policy.cold_start_seconds:g}s"
        f" / {policy.target_utilization:g} utilisation",
        {"busy_replicas_at_horizon": token_demand.horizon},
    )
