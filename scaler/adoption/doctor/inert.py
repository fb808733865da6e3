"""The checks of whether the scaler can act for each ScaledObject (``scaler.inert``), with ``--prometheus``.

From what Prometheus holds of the ScaledObject's series and the pods of its Deployment (the
probe the running scaler makes at every refresh, made once here), one finding per reason:

====================  ========  =================================================================
check                 severity  finding
====================  ========  =================================================================
inert-no-series       error     the labelSelector matches no series of the engine while the
                                Deployment has Ready pods: the values that exist, a did-you-mean
inert-stale           error     the series exist, their last sample older than two scrape intervals
inert-not-scraped     error     ``up == 0`` for the series' scrape target, or Ready pods without
                                series (no scrape target for them)
inert-stranded        warning   a router keeps per-endpoint series (llm-d's in-flight gauges) for
                                pods that are gone
====================  ========  =================================================================

and, from a running scaler's own ``llm_scaler_inert`` series at that Prometheus, the reasons only
its decisions can show (``inert-held``, ``inert-not-landed``, warnings) and any other it reports
that the probe did not find now.
"""

from __future__ import annotations

from collections.abc import Iterable

from scaler.adoption.doctor.objects import Cluster, Finding, Options, Severity, our_trigger, so_key
from scaler.model import InertReason

SEVERITY: dict[InertReason, Severity] = {
    InertReason.NO_SERIES: "error",
    InertReason.STALE: "error",
    InertReason.NOT_SCRAPED: "error",
    InertReason.STRANDED: "warning",
    InertReason.STUCK: "error",
    InertReason.HELD: "warning",
    InertReason.NOT_LANDED: "warning",
}
FIX: dict[InertReason, str] = {
    InertReason.NO_SERIES: "write the labelSelector the servers' series carry (the values above), or serve"
    " the model under the name it selects (vLLM's --served-model-name)",
    InertReason.STALE: "check the scrape of its pods on Prometheus' targets page, and whatever carries the"
    " series (federation, remote write, an agent)",
    InertReason.NOT_SCRAPED: "scrape every pod of the Deployment (a PodMonitor or prometheus.io annotations);"
    " where up == 0, its error says why",
    InertReason.STRANDED: "scale on the queue and the token load, never on these gauges; restarting the"
    " router drops them",
    InertReason.STUCK: "restart the pod named: its engine admits nothing while healthy (vLLM #53130, #39734);"
    " meanwhile the scaler does not count its queue as demand",
    InertReason.HELD: "compare the decision log's capacity and demand with the fleet's: a capacity that"
    " grows with the demand holds the target",
    InertReason.NOT_LANDED: "read the decision log's landing field: it names the HPA's state that holds it",
}


def check_name(reason: InertReason) -> str:
    """The finding's check name for ``reason``: ``inert-no-series``, ..."""
    return "inert-" + reason.value.replace("_", "-")


def check_inert(cluster: Cluster, options: Options) -> Iterable[Finding]:
    """inert-* findings: from the probe of each ScaledObject's series, then what a running scaler reports."""
    for so in cluster.scaledobjects:
        if our_trigger(so) is None:
            continue
        key = so_key(so)
        where = f"ScaledObject {key}"
        found = cluster.inert.get(key, ())
        for reason in found:
            named = f" ({len(reason.inputs)} inputs unknown)" if reason.inputs else ""
            yield Finding(
                SEVERITY[reason.reason],
                check_name(reason.reason),
                where,
                reason.text + named,
                FIX[reason.reason],
            )
        seen = {r.reason.value for r in found}
        for value in cluster.inert_reported.get(key, ()):
            if value in seen or value not in InertReason._value2member_map_:
                continue
            kind = InertReason(value)
            yield Finding(
                SEVERITY[kind]
                if kind in (InertReason.HELD, InertReason.NOT_LANDED, InertReason.STUCK)
                else "warning",
                check_name(kind),
                where,
                f"the running scaler reports it inert: {value} (its decision log's inert field says why)",
                FIX[kind],
            )
