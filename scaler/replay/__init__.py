"""What-if replay: a request trace through a simulated GPU fleet under several autoscaling policies.

trace.py     request traces and rate-only traces (expanded with a seeded Poisson process)
cluster.py   the fleet: pods (Pending, starting, Ready, draining), GPUs, routing, prefill and decode
hpa.py       the HorizontalPodAutoscaler rules KEDA hands its metrics to (pure)
keda.py      ScaledObjects as KEDA reads them: external, prometheus and cron triggers
policies.py  this scaler (through its engine), a KEDA baseline, and a clairvoyant reference
replay.py    the closed loop that runs one policy over one trace
report.py    figures, the comparison table, summary.json and replay.png
cli.py       ``scaler replay``
"""
