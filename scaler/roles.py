"""Prefill and decode pools: which label tells a role's series apart. Pure.

A disaggregated deployment runs two pools of the same model: prefill replicas compute prompts
and hand the KV cache to decode replicas, which generate the tokens. Each pool is its own
Deployment with its own ScaledObject, and ``role: prefill`` or ``role: decode`` says which one a
ScaledObject scales (``both``, the default: replicas that do both). The role's series are picked
by one more label matcher beside the ``labelSelector``'s, applied in Python to the grouped series
like every matcher (``scaler.matchers``): the label name reaches PromQL's ``by`` clause, the
value never does.

The label is the ``roleSelector``, or the engine's default (its preset's ``role_label``,
``scaler.presets``):

* vLLM under llm-d: the **pod** label ``llm-d.ai/role`` (llm-d/llm-d-router,
  ``pkg/epp/framework/plugins/scheduling/filter/bylabel/roles.go``), values ``prefill`` and
  ``decode``; llm-d's decode filter accepts pods with no label, so a series without it counts
  as decode. A pod label reaches the series through the scrape's relabelling: Prometheus'
  Kubernetes discovery writes it as ``__meta_kubernetes_pod_label_llm_d_ai_role`` (every
  character that is not a letter, digit or ``_`` becomes ``_``), and a ``labelmap`` of
  ``__meta_kubernetes_pod_label_(.+)`` copies it onto the series as ``llm_d_ai_role``, the name
  read here.
* SGLang: the **metric** label ``engine_type`` (sgl-project/sglang,
  ``python/sglang/srt/observability/metrics_collector.py``, from ``--disaggregation-mode``),
  values ``prefill``, ``decode`` and ``unified`` (a ``both`` replica).
* Dynamo: ``worker_type`` (ai-dynamo/dynamo ``lib/runtime/src/metrics/prometheus_names.rs``,
  ``prefill``/``decode``) labels the KV router's queue (``router: dynamo``) and the frontend's
  per-worker gauges, not the frontend series ``engine: dynamo`` reads, which count both pools'
  requests; so a role is read from the workers' own series (``engine: vllm`` or ``sglang`` with
  a ``roleSelector``), and the Dynamo router's queue per ``worker_type``.

TGI and Triton label no role, and ``engine: custom``'s queries choose their own series.

*Example*: ``role: decode`` with vLLM keeps the series with ``llm_d_ai_role="decode"`` or none
(``llm_d_ai_role=~"decode|"``); ``role: prefill`` with SGLang keeps ``engine_type="prefill"``;
``roleSelector: disaggregatedset.x-k8s.io/role`` reads ``disaggregatedset_x_k8s_io_role``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from scaler.decider.spec import Role
from scaler.matchers import LABEL_NAME, LabelMatcher, MatchOp

# A Kubernetes label key: an optional DNS-subdomain prefix and "/", then a name of at most 63
# characters (alphanumerics, "-", "_", "." inside).
_K8S_LABEL_KEY = re.compile(
    r"^(?:[a-z0-9]([-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
MAX_PREFIX_LENGTH = 253  # a label key's DNS-subdomain prefix (Kubernetes' limit)
LLM_D_ROLE_LABEL = "llm-d.ai/role"


@dataclass(frozen=True, slots=True)
class RoleLabel:
    """The label that tells a role's series apart, as written and as the series carry it."""

    label: str  # as written: a pod label key or a series label name
    unlabelled: Role | None = None  # the role a series without the label counts as (llm-d: decode)

    @property
    def series_label(self) -> str:
        """The label name on the series (a pod label key as Prometheus' Kubernetes discovery writes it)."""
        return series_label(self.label)


# Dynamo's KV router labels its queue by the worker type it routes to (scaler.presets.routers).
DYNAMO_WORKER_TYPE = "worker_type"


def series_label(key: str) -> str:
    """The Prometheus label name a pod label key becomes (each character outside ``[A-Za-z0-9_]``
    turned to ``_``, as Kubernetes discovery's ``__meta_kubernetes_pod_label_*`` names are).
    *Example*: ``llm-d.ai/role`` -> ``llm_d_ai_role``; ``engine_type`` stays."""
    return re.sub(r"[^A-Za-z0-9_]", "_", key)


def parse_role_label(text: str) -> RoleLabel:
    """A ``roleSelector``: a series label name or a pod label key; ValueError naming what is wrong.
    llm-d's own label (either form) keeps its rule that an unlabelled pod is a decode pod."""
    text = text.strip()
    if not (LABEL_NAME.fullmatch(text) or _K8S_LABEL_KEY.match(text)):
        raise ValueError(
            "must be a label name: a series label such as engine_type, or a pod label key such as"
            " llm-d.ai/role (read as Prometheus' Kubernetes discovery writes it, llm_d_ai_role)"
        )
    prefix = text.rpartition("/")[0]
    if len(prefix) > MAX_PREFIX_LENGTH:
        raise ValueError(f"a pod label key's prefix is at most {MAX_PREFIX_LENGTH} characters")
    if series_label(text).startswith("__"):
        raise ValueError("names starting with __ are Prometheus' own and never on a stored series")
    unlabelled: Role | None = "decode" if series_label(text) == series_label(LLM_D_ROLE_LABEL) else None
    return RoleLabel(text, unlabelled)


def role_matcher(role: Role, label: RoleLabel | None) -> tuple[LabelMatcher, ...]:
    """The matcher that keeps ``role``'s series (none for ``both`` or without a label).
    *Example*: decode on llm-d's label -> ``llm_d_ai_role=~"decode|"`` (an absent label reads as
    empty, as in PromQL); prefill on ``engine_type`` -> ``engine_type="prefill"``."""
    if role == "both" or label is None:
        return ()
    if label.unlabelled == role:
        return (LabelMatcher(label.series_label, MatchOp.RE, f"{role}|"),)
    return (LabelMatcher(label.series_label, MatchOp.EQ, role),)


def role_problems(
    role: Role,
    selector: str | None,
    engine: str,
    *,
    default: str | None,
    custom: bool,
    frontend: bool,
    matchers: tuple[LabelMatcher, ...],
) -> list[tuple[str, str]]:
    """What is wrong with ``role`` and ``roleSelector`` beside the engine and the ``labelSelector``'s
    ``matchers``: each a metadata key and the rule it breaks (``scaler.config`` reports them).
    ``default``: the engine's role label (its preset's); ``custom``: the engine is your own
    queries; ``frontend``: one frontend exports the fleet's sums (its series cannot tell the pools)."""
    problems: list[tuple[str, str]] = []
    if selector is not None and role == "both":
        problems.append(("roleSelector", "only used with role: prefill or decode (role is both)"))
    if role == "both":
        return problems
    if frontend:
        problems.append(
            (
                "role",
                f"engine: {engine} reads one frontend whose series sum both pools' requests: read each"
                " pool's servers with an engine whose pods export their own series, and a roleSelector",
            )
        )
    elif custom and selector is not None:
        rule = f"not used with engine: {engine} (your queries pick the pool's series)"
        problems.append(("roleSelector", rule))
    elif not custom and default is None and selector is None:
        problems.append(
            (
                "roleSelector",
                f"required with role: {role} and engine: {engine}, whose series carry no role label: the"
                f" pod or series label that tells the pools apart, e.g. {LLM_D_ROLE_LABEL}",
            )
        )
    text = None if custom or frontend else (selector or default)
    label = parse_role_label(text) if text else None
    if label is not None and any(m.name == label.series_label for m in matchers):
        problems.append(
            (
                "labelSelector",
                f"matches on {label.series_label}, the label role: {role} picks its series by;"
                " leave it to role",
            )
        )
    return problems
