"""The decider: one target's replica target, a pure function of its spec, its observations and
their instants. Nothing here reads the wall clock, the network, the metadata or PromQL.

    spec = parse_metadata(metadata).spec                  # the edge: scaler.config
    engine = Engine(spec)                                 # one per target, holds what it learned
    decision = engine.decide(observation)                 # each refresh, in time order

``Engine.decide`` runs one pipeline, each step a module of this package:

    observe   -> demand       offered work: served plus the queue's growth      demand
              -> capacity     what one replica holds, measured from the engine   capacity/
                              (why requests wait, named once; prefill rate, batch
                              slots, decode slowdown, the dispatch's pooling)
              -> forecast     the demand one cold start ahead, with its errors   forecast, coldstart
              -> calibrate    the scale of those capacities the measured          calibration
                              objective calls for, in both directions
              -> need         replicas per resource, late share within budget,    signals/load, queueing
                              the backlog's drain in the same sizing
              -> propose      floor, pre-warm, queue (while the load abstains),   signals/table
                              load, last known: one proposal each
              -> combine      the largest proposal, then maxReplicas, the GPUs    combine, signals/gpu
                              and the HPA's tolerance clamp it
              -> watch        did the last target land; is the target inert       landing, held

What the decider reads of the configuration is ``DeciderSpec`` (``spec``); its own constants,
each with its unit and why, are ``DeciderParams`` (``params``); which of its mechanisms run is
``Stages`` (``stages``: all of them, but in an ablation); the vocabulary it speaks
(``Observation``, ``Decision``, ``Capacity``) is ``scaler.model``. docs/decider.md explains each
step with its formula.
"""

from scaler.decider.engine import Engine
from scaler.decider.params import DEFAULT, DeciderParams
from scaler.decider.spec import DeciderSpec, Window
from scaler.decider.stages import ALL, Stages
from scaler.model import Decision, Observation

__all__ = [
    "ALL",
    "DEFAULT",
    "DeciderParams",
    "DeciderSpec",
    "Decision",
    "Engine",
    "Observation",
    "Stages",
    "Window",
]
