"""Last known demand: while the demand is not known, the target does not fall below what was.

    last_known = the largest demand proposal (queue, load) of the last refresh whose inputs
                 were complete, while any of them is missing now;
                 the replicas standing when this target was first watched, while the demand has
                 been watched for less than its warm-up (``warm_up_s``)

A demand read for less than its warm-up is not yet a demand: its rates still hold time before the
scaler watched (a rate window of counters that began with the watch), and the forecast's level
still weighs its first value by more than ``e^-2`` (``scaler.decider.forecast.warm_up_s``: two
rate windows). A scaler that starts, or restarts without history, against a fleet already serving
would otherwise read the first seconds' rates as the demand and release replicas the traffic
needs, which are back only a cold start later. The replicas standing then (the scale target's
current replicas, else its Ready ones) are someone's plan: they are held until the demand can say
otherwise. A scale-up is never held back (the other signals propose above it), and a restart that
warms from history (``Engine.warm``) has watched its warm-up already.

*Example*: Prometheus stops answering after a decision of 7: the queue and load signals
abstain, and last_known proposes 7 until the inputs are back, so a missing source never
makes the target fall. A scaler started against 6 serving replicas, 45 s in, with rate windows of
60 s (a warm-up of 120 s): 6 held, whatever the first 45 s of rates say; at 120 s the demand sizes
the fleet, down as well as up. (In the decision-quality replay, before its policies were first
consulted a minute into its warm-up, the first refresh read no demand, released 4 of 6 replicas on a
decode-heavy trace, and the two left queued what the six served.)
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from scaler.decider.spec import DeciderSpec
from scaler.inputs import Input
from scaler.model import Observation, Proposal, Signal

# The inputs demand is read from. The queue always counts; the prompt rate counts once a prompt
# capacity is configured and the running count once a generation capacity is (the configuration
# says the engine reads them); any of them counts once it has been seen for this target (an
# engine that never exports one does not depend on it). While one that counts is missing the
# load abstains and last_known holds the target.
DEMAND_INPUTS = (Input.QUEUE_WAITING, Input.PROMPT_TOKENS_PER_S, Input.REQUESTS_RUNNING, Input.REQUESTS_PER_S)
DEMAND_SIGNALS = (Signal.QUEUE, Signal.LOAD)  # the proposals the last complete demand is the largest of


@dataclass(frozen=True, slots=True)
class Inputs:
    """What this signal remembers: the demand inputs the target depends on, when they were last all
    present, and the demand they gave then."""

    seen: frozenset[str] = frozenset({Input.QUEUE_WAITING})
    complete_at: float | None = None  # Unix seconds of the last refresh with none missing
    last_demand: int | None = None  # the largest demand proposal of that refresh
    first_at: float | None = None  # Unix seconds of the first observation watched (or warmed from)
    standing: int | None = None  # the replicas standing then: current, else Ready (None: unknown)

    def warming(self, t: float, warm_up_s: float) -> float | None:
        """Seconds of the warm-up still to watch at ``t``, or None once it is watched."""
        if self.first_at is None or t - self.first_at >= warm_up_s:
            return None
        return warm_up_s - (t - self.first_at)


def seen_in(state: Inputs, observations: list[Observation]) -> Inputs:
    """``state`` with the inputs these observations hold counted as ones the target depends on."""
    names = {n for obs in observations for n in DEMAND_INPUTS if getattr(obs, n) is not None}
    state = replace(state, seen=state.seen | names)
    if state.first_at is None and observations:
        first = observations[0]
        standing = first.current_replicas if first.current_replicas is not None else first.ready_replicas
        state = replace(state, first_at=first.timestamp, standing=standing)
    return state


def watch(state: Inputs, obs: Observation, spec: DeciderSpec) -> tuple[Inputs, list[str]]:
    """``state`` after ``obs``, and the demand inputs the target depends on that ``obs`` lacks
    (``DEMAND_INPUTS``)."""
    state = seen_in(state, [obs])
    expected = set(state.seen)
    if spec.prompt_tokens_per_second_per_replica is not None:
        expected.add(Input.PROMPT_TOKENS_PER_S)
    if spec.generation_tokens_per_second_per_replica is not None:
        expected.add(Input.REQUESTS_RUNNING)
    missing: list[str] = [
        str(name) for name in DEMAND_INPUTS if name in expected and getattr(obs, name) is None
    ]
    if not missing:
        state = replace(state, complete_at=obs.timestamp)
    return state, missing


def remember(state: Inputs, missing: list[str], proposals: list[Proposal]) -> Inputs:
    """``state`` with the demand this refresh's proposals asked for, where its inputs were complete."""
    asks = [p.replicas for p in proposals if p.signal in DEMAND_SIGNALS and p.replicas is not None]
    if asks and not missing:
        return replace(state, last_demand=max(asks))
    return state


def propose_last_known(
    previous: int | None, missing: list[str], standing: int | None = None, warming_s: float | None = None
) -> Proposal:
    """While a demand input is missing, the target does not fall below the last decision; while the
    demand is watched for less than its warm-up (``warming_s`` of it left), below the replicas
    ``standing`` when it was first watched (module docstring)."""
    if warming_s is not None and standing and (not missing or previous is None or previous < standing):
        why = f"missing {', '.join(missing)}; " if missing else ""
        return Proposal(
            Signal.LAST_KNOWN,
            standing,
            f"{why}demand watched for less than its warm-up ({warming_s:.0f}s left): holding the"
            f" {standing} replicas standing when this target was first watched",
        )
    if not missing:
        return Proposal(Signal.LAST_KNOWN, None, "all inputs present")
    if previous is None:
        return Proposal(Signal.LAST_KNOWN, None, f"missing {', '.join(missing)}; no earlier decision to hold")
    return Proposal(
        Signal.LAST_KNOWN,
        previous,
        f"missing {', '.join(missing)}: holding the last target {previous}",
    )
