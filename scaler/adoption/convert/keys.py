"""The keys KEDA's scalers accept, and every other key refused with the one it most resembles.

No key is lost silently: a trigger key KEDA accepts is carried or dropped with its reason
(``PROMETHEUS_KEYS``); a key KEDA does not accept (``treshold``), in a trigger or in the
ScaledObject's own fields (its CRD, ``scaler.manifest``), is refused, or with ``--force``
dropped and reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ruamel.yaml.comments import CommentedMap

from scaler.adoption.convert.report import Conversion, where_of
from scaler.manifest import closest, unknown_fields

# The metadata keys KEDA's prometheus scaler accepts, as its documentation lists them:
# https://keda.sh/docs/2.19/scalers/prometheus/ (kedacore/keda-docs,
# content/docs/2.19/scalers/prometheus.md): the trigger specification's keys, ``authModes``
# from its authentication parameters, ``awsRegion`` and ``identityOwner`` from its Amazon
# Managed Prometheus example; ``metricName`` and ``cortexOrgID`` from the 2.10 page (both
# deprecated then, gone in 2.12). Each with what becomes of it here: None when the conversion
# carries it (the report says where to), otherwise why it is dropped.
_IDENTITY = "this scaler reads Prometheus with its own identity (docs/deploy.md)"
AUTH_DROPPED = (
    "KEDA gives it to its own Prometheus scaler, not to an external one; grant this scaler's"
    " ServiceAccount access to Prometheus"
)
PROMETHEUS_KEYS: Mapping[str, str | None] = {
    "serverAddress": None,
    "query": None,
    "threshold": None,
    "activationThreshold": "this scaler is always active: its floor never reaches zero",
    "ignoreNullValues": "a missing input never makes this scaler's target fall",
    "namespace": "Thanos/Cortex tenancy is not read; point prometheusAddress at the tenant's URL",
    "customHeaders": _IDENTITY,
    "unsafeSsl": "this scaler verifies Prometheus' certificate with the system's CAs",
    "queryParameters": "the presets' queries take no extra parameters",
    "timeout": "this scaler's Prometheus timeout is its --prometheus-timeout-seconds, one for every target",
    "authModes": AUTH_DROPPED,
    "awsRegion": _IDENTITY,
    "identityOwner": _IDENTITY,
    "metricName": "KEDA names the metric itself (the key was deprecated in KEDA 2.10 and removed in 2.12)",
    "cortexOrgID": "KEDA removed it in 2.12; point prometheusAddress at the tenant's URL",
}
# The metadata keys KEDA's cron scaler accepts, all four required:
# https://keda.sh/docs/2.18/scalers/cron/ (kedacore/keda-docs, content/docs/2.18/scalers/cron.md).
CRON_KEYS = ("timezone", "start", "end", "desiredReplicas")
# A cron trigger's keys -> the pre-warm window's fields (scaler.config.PrewarmWindow).
WINDOW_FIELDS = {"start": "start", "end": "end", "replicas": "desiredReplicas", "timezone": "timezone"}
ACCEPTED_KEYS: Mapping[str, tuple[str, ...]] = {
    "prometheus": tuple(PROMETHEUS_KEYS),
    "cron": CRON_KEYS,
}


def unknown_keys(doc: CommentedMap, force: bool, out: Conversion) -> list[str]:
    """Every key KEDA does not accept: a line each to refuse, or with ``force`` removed and reported.

    The ScaledObject's own fields against its CRD (``scaler.manifest``), then the metadata
    of each ``prometheus`` and ``cron`` trigger against the keys KEDA's scaler of that type
    accepts. *Example*: ``treshold`` in a prometheus trigger gives ``triggers[0]
    (prometheus): treshold is not a key of KEDA's prometheus scaler; did you mean threshold?``.
    """
    refused: list[str] = []

    def found(what: str, why: str, parent: Any, key: Any) -> None:
        if force:
            del parent[key]
            out.changes.append(f"{what} dropped (--force): {why}")
        else:
            refused.append(f"{what} is {why}")

    for unknown in unknown_fields(doc):
        parent: Any = doc
        for step in unknown.location[:-1]:
            parent = parent[step]
        found(unknown.path, unknown.why, parent, unknown.location[-1])
    spec = doc.get("spec")
    triggers = spec.get("triggers") if isinstance(spec, Mapping) else None
    for index, trigger in enumerate(triggers if isinstance(triggers, list) else []):
        meta = trigger.get("metadata") if isinstance(trigger, Mapping) else None
        accepted = ACCEPTED_KEYS.get(str(trigger.get("type"))) if isinstance(trigger, Mapping) else None
        if accepted is None or not isinstance(meta, Mapping):
            continue
        for key in [k for k in meta if k not in accepted]:
            guess = closest(str(key), accepted)
            hint = f"; did you mean {guess}?" if guess else f" (it accepts {', '.join(accepted)})"
            found(
                f"{where_of(index, trigger)}: {key}",
                f"not a key of KEDA's {trigger['type']} scaler{hint}",
                meta,
                key,
            )
    return refused
