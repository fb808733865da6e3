"""Combine proposals into one target, clamp it, and explain it. Pure.

    raw    = max(proposals)                      binding = the signal that asked for it
    target = min(raw, maxReplicas)               clamp "max"
    target = min(target, gpu capacity)           clamp "gpu_inventory" (scale-up beyond what fits)
    target = max(target, minReplicas)            clamp "floor_over_gpu" when the floor beats the GPUs

Ties between proposals go to the earliest signal in ``scaler.model.Signal``. With
``gpuCheckFailure: closed`` an unknown inventory holds the target at the current
replica count; with ``open`` (the default) it does not limit, and a note says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from scaler.config import TargetPolicy
from scaler.model import Capacity, Clamp, ClampKind, Decision, Landing, Lead, Observation, Proposal, Signal
from scaler.signals.gpu import capacity

_ORDER = {signal: index for index, signal in enumerate(Signal)}


def combine(
    proposals: Sequence[Proposal],
    obs: Observation,
    policy: TargetPolicy,
    notes: Sequence[str] = (),
    forecast: dict[str, float] | None = None,
    token_capacity: Capacity | None = None,
    lead: Lead | None = None,
    landing: Landing | None = None,
) -> Decision:
    asking = [p for p in proposals if p.replicas is not None]
    if not any(p.signal is Signal.FLOOR for p in asking):
        raise ValueError("the floor must always propose")
    winner = max(asking, key=lambda p: (p.replicas, -_ORDER[p.signal]))
    assert winner.replicas is not None
    target = winner.replicas
    clamps: list[Clamp] = []
    all_notes = list(notes)

    if target > policy.max_replicas:
        clamps.append(Clamp(ClampKind.MAX, target, policy.max_replicas, f"maxReplicas={policy.max_replicas}"))
        target = policy.max_replicas

    if policy.gpu_check:
        gpu = capacity(obs, policy)
        if gpu.replicas is None:
            if policy.gpu_check_failure == "closed" and obs.current_replicas is not None:
                if target > obs.current_replicas:
                    clamps.append(
                        Clamp(
                            ClampKind.GPU_UNKNOWN_HOLD,
                            target,
                            max(obs.current_replicas, 1),
                            f"{gpu.reason}; gpuCheckFailure=closed holds scale-up at current replicas",
                        )
                    )
                    target = max(obs.current_replicas, 1)
            else:
                all_notes.append(
                    f"{gpu.reason}: GPU check not applied (gpuCheckFailure={policy.gpu_check_failure})"
                )
        elif target > gpu.replicas:
            clamps.append(
                Clamp(
                    ClampKind.GPU_INVENTORY,
                    target,
                    gpu.replicas,
                    f"GPU inventory fits {gpu.replicas}: {gpu.reason}",
                )
            )
            target = gpu.replicas
    else:
        all_notes.append("GPU check off (gpuCheck=false)")

    if target < policy.min_replicas:
        clamps.append(
            Clamp(
                ClampKind.FLOOR_OVER_GPU,
                target,
                policy.min_replicas,
                f"minReplicas={policy.min_replicas} wins over GPU capacity {target};"
                f" {policy.min_replicas - target} replica(s) may stay Pending",
            )
        )
        target = policy.min_replicas

    if within_hpa_tolerance(target, obs.current_replicas):
        all_notes.append(
            f"HPA tolerance: {obs.current_replicas} -> {target} is within 10% of the current replicas;"
            " the HPA will not act on it until the target moves further"
        )

    return Decision(
        now=obs.now,
        replicas=target,
        binding=winner.signal,
        proposals={p.signal.value: p.replicas for p in asking if p.replicas is not None},
        signal_reasons={p.signal.value: p.reason for p in proposals},
        clamps=tuple(clamps),
        notes=tuple(all_notes),
        reason=_sentence(target, winner, clamps),
        observation=obs,
        forecast=forecast or {},
        capacity=token_capacity,
        lead=lead,
        landing=landing,
    )


HPA_TOLERANCE = 0.1  # kube-controller-manager --horizontal-pod-autoscaler-tolerance, default 0.1


def within_hpa_tolerance(target: int, current: int | None) -> bool:
    """True when the HPA would ignore this change: |target / current - 1| <= 0.1.

    With an AverageValue target of 1 per replica the HPA's usage ratio is
    target / current, and it skips scaling while the ratio is within its tolerance.
    """
    if not current or target == current:
        return False
    return abs(target / current - 1.0) <= HPA_TOLERANCE + 1e-12


def landing_step_down(current: int, tolerance: float = HPA_TOLERANCE) -> int:
    """The largest replica count below ``current`` that the HPA acts on (outside its tolerance).

    The HPA ignores a target within ``tolerance`` of the current replicas, so from 10
    replicas up a step of one never lands. *Example*: from 13, 12 is within 10% (12/13 =
    0.92) and 11 is not (0.85): the smallest step down that lands is to 11.
    """
    target = current - 1
    while target > 1 and within_hpa_tolerance(target, current):
        target -= 1
    return max(1, target)


def _sentence(target: int, winner: Proposal, clamps: list[Clamp]) -> str:
    plural = "s" if target != 1 else ""
    head = f"{target} replica{plural}: {winner.signal.value} asks {winner.replicas} ({winner.reason})"
    changed = [c for c in clamps if c.before != c.after]
    if not changed:
        return head
    return head + "; " + "; ".join(f"{c.kind.value} {c.before}->{c.after} ({c.reason})" for c in changed)
