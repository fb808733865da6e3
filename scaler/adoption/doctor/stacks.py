"""The checks of the serving stack around the servers: a router's queue, prefill/decode pools, metric names.

* ``router-queue-unread`` (error): a router other than the engine's own frontend holds
  requests in its queue (llm-d's EPP with flow control on: its flow-control queue series
  exist in Prometheus, for the ScaledObject's model), and the ScaledObject reads only the
  servers' queue. With flow control on, the EPP dispatches only while its pool is under
  saturation, so each server's queue levels off near 5 and the backlog grows in the router:
  a scaler reading the servers' queue sees a flat line while users wait.
* ``pd-one-scaledobject``: one ScaledObject over both prefill and decode pods (llm-d's
  ``llm-d.ai/role``; unlabelled counts as decode, as llm-d's decode filter takes it): error
  when its Deployment's selector takes pods of both roles (one HPA sizes two pools on their
  summed load); warning when the model's other role runs in a Deployment no ScaledObject
  scales (the one ScaledObject is sized for both, or the other pool never moves).
* ``removed-metric`` (warning): a query of the user's (this scaler's custom queries, or a
  KEDA ``prometheus`` trigger) reads a name its upstream removed (``Preset.removed``:
  ``vllm:time_per_output_token_seconds``, removed by vLLM PR #32661): on a current server it
  returns nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scaler.adoption.doctor.objects import (
    Cluster,
    Finding,
    Options,
    key_of,
    meta_of,
    our_trigger,
    policy_of,
    so_key,
    targets_of,
)
from scaler.config import CUSTOM_QUERY_KEYS
from scaler.inventory import ScaledObject, deployment_from_json
from scaler.matchers import LabelMatcher
from scaler.presets import NO_ROUTER, PRESETS, Kind, holds_for, queue_read, removed_in

# llm-d's prefill/decode role label and its values (llm-d/llm-d-router
# pkg/epp/framework/plugins/scheduling/filter/bylabel/roles.go). A pod without the label is
# taken as decode; prefill-decode (and its deprecated alias both) and the encode-* roles that
# include both stages serve both, so they make no split.
PD_ROLE_LABEL = "llm-d.ai/role"
PREFILL_ROLES = frozenset({"prefill", "encode-prefill"})
DECODE_ROLES = frozenset({"decode", ""})  # "": no label
# The label llm-d's charts put the model in; without it, two templates are one model's when
# their labels other than the role are the same.
MODEL_LABEL = "llm-d.ai/model"


@dataclass(frozen=True, slots=True)
class EngineQueueRead:
    """A ScaledObject that reads only its servers' queue: their engine, its matchers, its Prometheus."""

    engine: str
    matchers: tuple[LabelMatcher, ...]
    address: str | None  # its prometheusAddress (None: the one doctor was given)


def engine_queue_only(so: ScaledObject) -> EngineQueueRead | None:
    """How ``so`` reads the servers' queue, when it reads no router's; else None.

    This scaler's trigger with an engine preset and ``router: none``; or a KEDA ``prometheus``
    trigger on an engine's queue gauge and none on a router's.
    """
    ours = our_trigger(so)
    if ours is not None:
        policy = policy_of(ours[1])
        if policy is None or policy.engine not in PRESETS or policy.router != NO_ROUTER:
            return None
        return EngineQueueRead(policy.engine, policy.matchers, policy.prometheus_address)
    reads = [queue_read(str(t.metadata.get("query", ""))) for t in so.triggers if t.type == "prometheus"]
    found = [r for r in reads if r is not None]
    engines = [r for r in found if r.preset.kind is Kind.ENGINE]
    if not engines or any(r.preset.kind is Kind.ROUTER for r in found):
        return None
    return EngineQueueRead(engines[0].preset.name, engines[0].matchers, None)


def check_router_queue(cluster: Cluster, options: Options) -> Iterable[Finding]:
    """router-queue-unread findings: a router's queue exists for a ScaledObject reading the servers' only."""
    for so in cluster.scaledobjects:
        read = engine_queue_only(so)
        queues = cluster.router_queues.get(so_key(so), ())
        held = [q for q in queues if holds_for(read.engine, read.matchers, q)] if read is not None else []
        if not held:
            continue
        pools = ", ".join(sorted({f"{q.router} pool {q.pool or '?'}" for q in held}))
        first = held[0]
        yield Finding(
            "error",
            "router-queue-unread",
            f"ScaledObject {so_key(so)}",
            f"requests wait in the router ({pools}: its queue series exist, flow control is on) but"
            " it reads only the servers' queue, which the router holds near its saturation point"
            " while the backlog grows in the router",
            f"read the router's queue too: this scaler's trigger with router: {first.router}"
            + (f" and inferencePool: {first.pool}" if first.pool else "")
            + " (scaler convert writes them from a trigger on the router's queue)",
        )


def _template_labels(deployment: Mapping[str, Any]) -> dict[str, str]:
    """The labels of a Deployment's pod template: what its pods carry."""
    template = (deployment.get("spec") or {}).get("template") or {}
    return {str(k): str(v) for k, v in ((template.get("metadata") or {}).get("labels") or {}).items()}


def _side(labels: Mapping[str, str]) -> str | None:
    """``prefill`` or ``decode`` for pods with these labels, or None for a role that serves both."""
    role = labels.get(PD_ROLE_LABEL, "")
    if role in PREFILL_ROLES:
        return "prefill"
    return "decode" if role in DECODE_ROLES else None


def _same_model(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    """Whether two pod templates serve one model: the same llm-d.ai/model, or without it the same
    labels apart from the role."""
    if MODEL_LABEL in a or MODEL_LABEL in b:
        return a.get(MODEL_LABEL) == b.get(MODEL_LABEL)
    return {k: v for k, v in a.items() if k != PD_ROLE_LABEL} == {
        k: v for k, v in b.items() if k != PD_ROLE_LABEL
    }


def check_pd_roles(cluster: Cluster, options: Options) -> Iterable[Finding]:
    """pd-one-scaledobject findings: one ScaledObject over a model's prefill and decode pods."""
    scaled = targets_of(cluster.scaledobjects)
    for key, so in scaled.items():
        namespace = key.split("/")[0]
        here = [d for d in cluster.deployments if meta_of(d).get("namespace") == namespace]
        target = next((d for d in here if key_of(d) == key), None)
        if target is None:
            continue
        selector = deployment_from_json(target).selector
        where = f"ScaledObject {so_key(so)}"
        taken = [d for d in here if not selector.empty and selector.matches(_template_labels(d))]
        if {_side(_template_labels(d)) for d in taken} >= {"prefill", "decode"}:
            yield Finding(
                "error",
                "pd-one-scaledobject",
                where,
                f"its Deployment's selector ({selector}) takes prefill and decode pods"
                f" ({', '.join(sorted(key_of(d) for d in taken))}): one HPA sizes both pools on their"
                " summed load, though prefill is bound by prompt work and decode by running sequences",
                f"give each role its own Deployment (a selector on {PD_ROLE_LABEL}) and ScaledObject",
            )
            continue
        own = _template_labels(target)
        side = _side(own)
        unscaled = [
            d
            for d in here
            if key_of(d) not in scaled
            and {side, _side(_template_labels(d))} == {"prefill", "decode"}
            and _same_model(own, _template_labels(d))
        ]
        for other in unscaled:
            yield Finding(
                "warning",
                "pd-one-scaledobject",
                where,
                f"one ScaledObject for a prefill/decode model: it scales the {side} pool, and no"
                f" ScaledObject scales {key_of(other)}, the model's"
                f" {_side(_template_labels(other))} pool, though both serve the same arrivals",
                f"a ScaledObject for {key_of(other)} too: one a role",
            )


def _queries(so: ScaledObject) -> Sequence[tuple[str, str]]:
    """The user's queries in ``so``: (where, query) for each custom query of this scaler's trigger
    and each KEDA prometheus trigger's query."""
    ours = our_trigger(so)
    out = []
    for index, trigger in enumerate(so.triggers):
        meta = trigger.metadata
        if trigger.type == "prometheus" and "query" in meta:
            out.append((f"triggers[{index}] query", str(meta["query"])))
        elif ours is not None and ours[0] == index:
            out += [(f"triggers[{index}] {k}", str(meta[k])) for k in CUSTOM_QUERY_KEYS if k in meta]
    return out


def check_removed_metrics(cluster: Cluster, options: Options) -> Iterable[Finding]:
    """removed-metric findings: a user's query reading a name its upstream removed."""
    for so in cluster.scaledobjects:
        for where, query in _queries(so):
            for name, removal in removed_in(query):
                yield Finding(
                    "warning",
                    "removed-metric",
                    f"ScaledObject {so_key(so)}",
                    f"{where} reads {name}, removed by {removal.by}: on a current server it returns nothing",
                    f"read {removal.instead}",
                )
