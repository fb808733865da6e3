"""The reference policy (scaler.replay.reference): a saturated fleet is sized up in the world it runs in.

Four replicas each computing 2,500 prompt tokens/s (half of P = 5,000) and generating 216 tokens/s
(half of G = 432): where prefill and decode share the GPU (vLLM), every replica's time is spent, and
the policy asks ceil(4 / 0.8) = 5; where they run on resources of their own, each is half busy and
it asks ceil(2 / 0.8) = 3. Walked in refreshes of 15 s, no wall clock.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scaler.config import parse_metadata
from scaler.model import Observation
from scaler.replay.reference import ReferenceDecider

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
METADATA = {
    "minReplicas": "1",
    "maxReplicas": "40",
    "promptTokensPerSecondPerReplica": "5000",
    "generationTokensPerSecondPerReplica": "432",
    "coldStartSeconds": "180",
}


def _steady(shares_gpu: bool, replicas: int = 4, refreshes: int = 40) -> int:
    """The policy's replicas after ``refreshes`` at the same token rates (no misses, no trend)."""
    policy = ReferenceDecider(parse_metadata(METADATA).spec, shares_gpu=shares_gpu)
    decision = None
    for i in range(refreshes):
        decision = policy.decide(
            Observation(
                now=T0 + timedelta(seconds=15 * i),
                prompt_tokens_per_s=2500.0 * replicas,
                generation_tokens_per_s=216.0 * replicas,
                current_replicas=replicas,
                ready_replicas=replicas,
            )
        )
    assert decision is not None
    return decision.replicas


@pytest.mark.parametrize(("shares_gpu", "replicas"), [(True, 5), (False, 3)])
def test_a_fleet_half_busy_on_each_phase_is_sized_by_the_resource_that_binds(
    shares_gpu: bool, replicas: int
) -> None:
    """Sharing the GPU, the shares add: a saturated fleet is sized up, not held (or sized down)."""
    assert _steady(shares_gpu) == replicas
