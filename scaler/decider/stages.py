"""Which of the decider's mechanisms run: every one, but in an ablation. Pure.

Production runs ``ALL``; nothing reads a stage from metadata, a flag or the environment.
``benchmarks/decision_quality.py --ablation`` removes one stage at a time
(``Engine(spec, params, ALL.without("calibration"))``) to show what it pays, and
``BENCHMARKS.md`` has the table: a stage that pays in neither world is removed from the code, not
switched off. The decider's tuned constants are ``scaler.decider.params``; these are not
constants, they say which steps exist.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace


@dataclass(frozen=True, slots=True)
class Stages:
    """One flag per removable mechanism, each True but in an ablation (module docstring)."""

    measure_capacity: bool = True
    """Measure the prefill rate and the batch slots (removed: the configured capacities only)."""
    phase_times: bool = True
    """Read the prefill rate and the prefill's busy share from the engine's phase times (removed:
    as for an engine that exports none)."""
    dispatch_model: bool = True
    """Size each replica as its own queue where the dispatch is measured not to pool (removed: the
    fleet is one pooled queue, whatever the dispatch)."""
    slot_cap: bool = True
    """Measure the engine's cap on the batch where it binds before the KV cache fills."""
    backlog_net: bool = True
    """The safety net: a backlog the Ready replicas do not clear within the objective is drained
    at the rate they are seen to serve, whatever the capacity model says."""
    offered_demand: bool = True
    """Size the offered demand, arrivals as served plus the queue's growth (removed: what was
    served)."""
    hold_plan: bool = True
    """Hold the largest plan of the last cold start (removed: the latest forecast alone)."""
    hold_answer: bool = True
    """Ask the most replicas sized within the last cold start (removed: the latest answer alone;
    ``scaler.decider.signals.load.LoadState.held``)."""
    errors_against_floor: bool = True
    """Count a forecast's miss against what the floor's replicas hold where that is more than the
    plan (removed: every miss a ratio to its plan, however small)."""
    queueing_headroom: bool = True
    """Size each resource by the queueing model's late share (removed: just above its load)."""
    calibration: bool = True
    """Scale the model's capacities by the measured objective (``scaler.decider.calibration``)."""
    join_fill: bool = True
    """Learn the scale only from a rate window that begins once a replica that joined has been handed
    its share of the requests in service (removed: from one that begins when the Ready replicas
    changed; ``scaler.decider.calibration``)."""
    backlog_in_load: bool = True
    """Size the backlog in the load signal's one proposal (removed: the queue signal proposes it)."""
    queue_signal: bool = True
    """The queue signal proposes (removed: it abstains, and the backlog has no signal of its own)."""
    start_hold: bool = True
    """Hold the replicas standing when the target was first watched until its demand has warmed up
    (removed: the first refresh's rates size the fleet; ``scaler.decider.signals.last_known``)."""
    batch_slowdown: bool = True
    """Size the batch slots with each request's time in service growing with its replica's batch, by
    the measured inter-token latency's line (removed: the time in service measured now, at every
    fleet size; ``scaler.decider.signals.load.Batch``)."""
    wait_bound: bool = True
    """Cut the scale no lower than the measured mean queue time allows: the model's mean wait at the
    fleet as it stands no longer than the one measured (removed: to wherever the model's late share is
    the one measured; ``scaler.decider.calibration``)."""
    size_slots: bool = True
    """Size the batch slots as a resource (removed: the prefill alone)."""

    def without(self, *names: str) -> Stages:
        """These stages with ``names`` removed; an unknown name is a ``ValueError`` naming it."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(names) - known)
        if unknown:
            raise ValueError(
                f"no decider stage named {', '.join(unknown)} (stages: {', '.join(sorted(known))})"
            )
        return replace(self, **{name: False for name in names})


ALL = Stages()
