"""The targets KEDA asks about and their refresh loop: below the sources that observe them and the
outputs that publish their decisions, above the decider they run.

    registry   one Target per ScaledObject (its policy, its Engine, its latest decision), keyed,
               bounded, evicted when KEDA stops asking
    runtime    the refresh loop: every target observed, decided and handed to the sinks on one grid

The wiring of sources, targets and outputs into one process is ``scaler.service``.
"""
