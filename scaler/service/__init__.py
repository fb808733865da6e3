"""The live service, `scaler serve`: its settings (flags and ``SCALER_*`` variables), the registry
of ScaledObjects KEDA has asked about, the refresh loop that observes, decides and publishes
for each (``runtime``), and the wiring of sources, decider and outputs into one process (``app``).

    settings -> app -> runtime (registry of targets) -> decider -> outputs

Edges only: the pure decider is ``scaler.decider``, the metadata it is built from ``scaler.config``.
"""
