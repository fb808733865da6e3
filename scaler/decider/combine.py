"""Combine proposals into one target, clamp it, and explain it. Pure.

    raw    = max(proposals)                      binding = the signal that asked for it
    target = min(raw, maxReplicas)               clamp "max"
    target = min(target, gpu capacity)           clamp "gpu_inventory" (scale-up beyond what fits)
    target = min(target, Kueue quota)            clamp "kueue_quota" (beyond what the queue admits)
    target = max(target, minReplicas)            clamp "floor_over_gpu" when the floor beats the GPUs
    target = what the HPA lands                  clamp "hpa_tolerance" (below)

Ties between proposals go to the earliest signal in ``scaler.model.Signal``. With
``gpuCheckFailure: closed`` an unknown inventory holds the target at the current
replica count; with ``open`` (the default) it does not limit, and a note says so.

**The HPA's tolerance.** The HPA ignores a target within its tolerance of the current
replicas (``scaler.hpa``: 0.1 by default, or the HPA's ``behavior`` tolerance read from
the cluster), so the decision accounts for it rather than asking for what will not land:

* a **scale-up** it would swallow becomes the smallest step that lands, when that is at
  most ``maxReplicas``: a replica the load needs and never gets costs TTFT, one replica more
  than needed costs at most the tolerance's share of the fleet. Where the free GPUs fit the
  target but not the whole step, the step is still asked: the replicas of it beyond them wait
  Pending (holding no GPU; a node autoscaler sees them) while the ones that fit run. Held to
  what fits, the target would never land, and the fleet would stand short of replicas the
  GPUs hold free (Llama 3 70B on four H100s, long prompts: 14 replicas for two hours where 15
  fit and were needed, 16.53 % of first tokens within the objective);
* a **scale-down** it would swallow is **held** at the current replicas (at most
  ``maxReplicas``): stepping further down than the load allows to make it land would cost
  TTFT, and the HPA holds anyway. Held above what fits, the replicas beyond wait Pending, as
  the step past the tolerance asked, and the decision says so: it names what stands rather
  than a target that will not land.

*Example*: at 10 replicas the load needs 11: the HPA ignores 11 (ratio 1.1), so the target
is 12. With one GPU replica free, 12 is still the target: 11 run and one waits Pending, and
at 12 with none free it stays 12 while the load needs 11. At 10 it needs 9: the target stays
10 until the load needs 8 or fewer. With ``scaleUp: {tolerance: 0}`` on the HPA, 11 lands
and is asked for as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

from scaler.decider.signals.gpu import capacity, queue_capacity
from scaler.decider.spec import DeciderSpec
from scaler.hpa import landing_step_up, tolerances, within_hpa_tolerance
from scaler.model import (
    Capacity,
    Clamp,
    ClampKind,
    Decision,
    ForecastRecord,
    Landing,
    Lead,
    Note,
    NoteKind,
    Observation,
    Proposal,
    Signal,
)

_ORDER = {signal: index for index, signal in enumerate(Signal)}


def combine(
    proposals: Sequence[Proposal],
    obs: Observation,
    spec: DeciderSpec,
    notes: Sequence[Note] = (),
    forecast: ForecastRecord | None = None,
    token_capacity: Capacity | None = None,
    lead: Lead | None = None,
    landing: Landing | None = None,
) -> Decision:
    """The decision from the signals' proposals: the largest wins, then the clamps (module docstring)."""
    asking = [p for p in proposals if p.replicas is not None]
    if not any(p.signal is Signal.FLOOR for p in asking):
        raise ValueError("the floor must always propose")
    winner = max(asking, key=lambda p: (p.replicas, -_ORDER[p.signal]))
    assert winner.replicas is not None
    target = winner.replicas
    clamps: list[Clamp] = []
    all_notes = list(notes)

    if target > spec.max_replicas:
        clamps.append(Clamp(ClampKind.MAX, target, spec.max_replicas, f"maxReplicas={spec.max_replicas}"))
        target = spec.max_replicas

    fits: int | None = None  # what the GPU inventory fits, when it was checked and known
    if spec.gpu_check:
        gpu = capacity(obs, spec)
        fits = gpu.replicas
        if gpu.replicas is None:
            if spec.gpu_check_failure == "closed" and obs.current_replicas is not None:
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
                    Note(
                        NoteKind.GPU_CHECK_SKIPPED,
                        f"{gpu.reason}: GPU check not applied (gpuCheckFailure={spec.gpu_check_failure})",
                    )
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
        target, admits = _through_queue(target, obs, clamps, all_notes)
        if admits is not None:
            fits = admits if fits is None else min(fits, admits)
    else:
        all_notes.append(Note(NoteKind.GPU_CHECK_OFF, "GPU check off (gpuCheck=false)"))

    if target < spec.min_replicas:
        over = "the Kueue quota" if clamps and clamps[-1].kind is ClampKind.KUEUE_QUOTA else "GPU capacity"
        clamps.append(
            Clamp(
                ClampKind.FLOOR_OVER_GPU,
                target,
                spec.min_replicas,
                f"minReplicas={spec.min_replicas} wins over {over} {target};"
                f" {spec.min_replicas - target} replica(s) may stay Pending",
            )
        )
        target = spec.min_replicas

    target = _through_tolerance(target, obs, spec, fits, clamps, all_notes)

    return Decision(
        now=obs.now,
        replicas=target,
        binding=winner.signal,
        proposals={p.signal: p.replicas for p in asking if p.replicas is not None},
        signal_reasons={p.signal: p.reason for p in proposals},
        clamps=tuple(clamps),
        notes=tuple(all_notes),
        reason=_sentence(target, winner, clamps),
        observation=obs,
        forecast=forecast or ForecastRecord(),
        capacity=token_capacity,
        lead=lead,
        landing=landing,
    )


def _through_queue(
    target: int, obs: Observation, clamps: list[Clamp], notes: list[Note]
) -> tuple[int, int | None]:
    """The target under the Kueue queue's quota (clamp "kueue_quota"), and what it admits (None: not
    under Kueue, or unknown, with a note)."""
    queue = queue_capacity(obs)
    if queue is None:
        return target, None
    if queue.replicas is None:
        notes.append(Note(NoteKind.KUEUE_QUOTA_UNKNOWN, f"{queue.reason}: Kueue quota not applied"))
        return target, None
    if target > queue.replicas:
        clamps.append(
            Clamp(
                ClampKind.KUEUE_QUOTA,
                target,
                queue.replicas,
                f"Kueue admits {queue.replicas}: {queue.reason}",
            )
        )
        return queue.replicas, queue.replicas
    return target, queue.replicas


def _through_tolerance(
    target: int,
    obs: Observation,
    spec: DeciderSpec,
    fits: int | None,
    clamps: list[Clamp],
    notes: list[Note],
) -> int:
    """The target the HPA will act on: a swallowed scale-up stepped past, a swallowed scale-down held."""
    current = obs.current_replicas
    tolerance = tolerances(obs.hpa)
    if current is None or not within_hpa_tolerance(target, current, tolerance):
        return target
    if target < current:
        # Never hold above maxReplicas: a scale-down it asked for is its. Above what fits, the HPA
        # holds the replicas anyway, the ones beyond waiting Pending (a step past the tolerance asks
        # them): the decision says what stands rather than a target that will not land.
        held = min(current, spec.max_replicas)
        if held <= target:
            return target
        pending = "" if fits is None or held <= fits else f", {_beyond(held, fits)} Pending"
        clamps.append(
            Clamp(
                ClampKind.HPA_TOLERANCE,
                target,
                held,
                f"the HPA ignores {current} -> {target} (within its scale-down tolerance of"
                f" {tolerance[1]:g}): holding {held}{pending}",
            )
        )
        return held
    step = landing_step_up(current, tolerance[0])
    if step > spec.max_replicas:
        notes.append(
            Note(
                NoteKind.HPA_TOLERANCE,
                f"HPA tolerance: {current} -> {target} is within its scale-up tolerance of {tolerance[0]:g}"
                f" and {step}, the smallest step that lands, is beyond maxReplicas={spec.max_replicas};"
                " the HPA will not act on it until the target moves further",
            )
        )
        return target
    # The target fits (the clamps above), the step may not: the replicas of it beyond what the free
    # GPUs (and Kueue's quota) fit wait Pending, holding no GPU, while the ones that fit run.
    pending = "" if fits is None or step <= fits else f"; {_beyond(step, fits)} may wait Pending"
    clamps.append(
        Clamp(
            ClampKind.HPA_TOLERANCE,
            target,
            step,
            f"the HPA ignores {current} -> {target} (within its scale-up tolerance of {tolerance[0]:g}):"
            f" {step}, the smallest step that lands{pending}",
        )
    )
    return step


def _beyond(replicas: int, fits: int) -> str:
    """The replicas of ``replicas`` beyond the ``fits`` that fit, as the clamp names them."""
    return f"the {replicas - fits} beyond the {fits} that fit"


def _sentence(target: int, winner: Proposal, clamps: list[Clamp]) -> str:
    plural = "s" if target != 1 else ""
    head = f"{target} replica{plural}: {winner.signal.value} asks {winner.replicas} ({winner.reason})"
    changed = [c for c in clamps if c.before != c.after]
    if not changed:
        return head
    return head + "; " + "; ".join(f"{c.kind.value} {c.before}->{c.after} ({c.reason})" for c in changed)
