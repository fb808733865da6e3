"""The live service, `scaler serve`: its settings (flags and ``SCALER_*`` variables) and the wiring
of sources, targets and outputs into one process (``app``).

    settings -> app -> sources -> targets (registry, runtime) -> decider -> outputs

The wiring only: the targets and their refresh loop are ``scaler.targets``, the pure decider
``scaler.decider``, the metadata it is built from ``scaler.config``.
"""
