"""A Deployment's pods as kube-state-metrics recorded them in Prometheus, over a span.

``scaler replay --prometheus`` replays a span of history; the pods that ran then, gone ones
included, say how long a replica took to start. kube-state-metrics exports, per pod, when it was
created, scheduled and became Ready (``kube_pod_created``, ``kube_pod_status_scheduled_time``;
``kube_pod_status_ready_time`` since kube-state-metrics 2.8), and who owns it
(``kube_pod_owner``: its ReplicaSet; ``kube_replicaset_owner``: the ReplicaSet's Deployment).
Each is read once, at the span's end, as the last value each series took over the span
(``max_over_time(...[span])``), in the Deployment's namespace; the pods kept are those whose
ReplicaSet the Deployment owns. Five instant queries, whatever the span.
"""

from __future__ import annotations

from datetime import datetime

from scaler.decider.coldstart import PodTimes
from scaler.sources.prometheus import PrometheusClient

OWNED_BY = 'max_over_time(kube_replicaset_owner{{{ns}owner_kind="Deployment",owner_name="{name}"}}[{span}])'
POD_OWNER = 'max_over_time(kube_pod_owner{{{ns}owner_kind="ReplicaSet"}}[{span}])'
TIMES = {
    "created": "max_over_time(kube_pod_created{{{ns}}}[{span}])",
    "scheduled": "max_over_time(kube_pod_status_scheduled_time{{{ns}}}[{span}])",
    "ready": "max_over_time(kube_pod_status_ready_time{{{ns}}}[{span}])",
}


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def recorded_pods(
    address: str, namespace: str, deployment: str, start: datetime, end: datetime, timeout_s: float = 30.0
) -> tuple[str, list[PodTimes]]:
    """``namespace/deployment`` and the times of each of its pods kube-state-metrics recorded
    between ``start`` and ``end`` (module docstring); "" for a namespace matches any. An empty list
    where kube-state-metrics holds none; PrometheusQueryError when a query fails."""
    client = PrometheusClient(address, timeout_s)
    ns = f'namespace="{_quoted(namespace)}",' if namespace else ""
    span = f"{max(1, round((end - start).total_seconds()))}s"
    owned = {
        (s.labels.get("namespace", ""), s.labels.get("replicaset", ""))
        for s in client.instant(OWNED_BY.format(ns=ns, name=_quoted(deployment), span=span), end)
    }
    pods = {
        (s.labels.get("namespace", ""), s.labels.get("pod", ""))
        for s in client.instant(POD_OWNER.format(ns=ns, span=span), end)
        if (s.labels.get("namespace", ""), s.labels.get("owner_name", "")) in owned
    }
    times: dict[str, dict[tuple[str, str], float]] = {}
    for key, query in TIMES.items():
        times[key] = {
            (s.labels.get("namespace", ""), s.labels.get("pod", "")): s.value
            for s in client.instant(query.format(ns=ns.rstrip(","), span=span), end)
            if s.value > 0
        }
    out = [
        PodTimes(
            name,
            times["created"].get((where, name)),
            times["scheduled"].get((where, name)),
            times["ready"].get((where, name)),
        )
        for where, name in sorted(pods)
    ]
    return f"{namespace or '(any namespace)'}/{deployment}", out
