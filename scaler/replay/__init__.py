"""What-if replay: a request trace through a simulated GPU fleet under several autoscaling policies.

trace.py     request traces and rate-only traces (expanded with a seeded Poisson process)
history.py   a rate trace from Prometheus history (the reader is passed in: sources.prometheus)
span.py      the span of history read: --since, --until, --step
fleet/       the simulated serving fleet the rest drives (cluster, stepped, kernel, series, router,
             disagg); it imports only trace.py of the replay
keda.py      ScaledObjects as KEDA reads them: external, prometheus and cron triggers
policies.py  this scaler (through its engine), a KEDA baseline, and a clairvoyant reference,
             each landing through scaler.hpa (the HPA model the demo uses too)
replay.py    the closed loop that runs one policy over one trace
ownfleet.py  the fleet as the history holds it, replayed: the replica model checked against what ran
report.py    figures, the comparison table, summary.json and replay.png
cli.py       ``scaler replay``
"""

from __future__ import annotations

EXTRA_MODULES = ("numpy", "matplotlib", "tqdm")
INSTALL_HINT = "the replay needs its extra: pip install 'llm-gpu-scaler[replay]' (numpy, matplotlib, tqdm)"


def missing_extra(exc: ModuleNotFoundError) -> bool:
    """Whether ``exc`` is one of the replay extra's modules missing (not a bug of ours)."""
    return (exc.name or "").split(".")[0] in EXTRA_MODULES
