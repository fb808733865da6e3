"""What a user's query reads, as the registry knows it: a preset's queue, a removed metric name;
and which router queues hold requests for a set of servers.

``scaler convert`` turns a KEDA trigger on a preset's queue into that preset; ``scaler
doctor`` flags a ScaledObject that reads only the engine's queue while a router's queue holds
requests for its servers (``RouterQueue``, ``holds_for``), and a removed name; ``scaler replay
--prometheus`` counts such a queue's requests as arrivals.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from scaler.matchers import LabelMatcher
from scaler.presets.promql import one_selector
from scaler.presets.registry import QUEUE_FIELD, REGISTRY, ROUTERS, Preset, Removal, Select


@dataclass(frozen=True, slots=True)
class QueueRead:
    """A query recognised as a preset's queue: the preset, the metric, and the user's other matchers."""

    preset: Preset
    metric: str
    matchers: tuple[LabelMatcher, ...]  # those the query adds to the preset's own
    aggregation: str | None = "sum"  # over the series (promql.AGGREGATIONS), None for a bare gauge

    @property
    def older(self) -> bool:
        """Whether the query reads an older name of the queue (the preset reads the current first)."""
        family = self.preset.family(QUEUE_FIELD[self.preset.kind])
        return family is not None and family.selectors()[0].metric != self.metric


def queue_read(query: str) -> QueueRead | None:
    """The preset whose queue ``query`` reads, when it is that queue's selector under an
    aggregation that keeps one series (``promql.one_selector``: ``sum(Q{m})``, ``sum(Q{m}) by
    (model_name)`` with ``model_name`` pinned, ``sum by (...) (...)``, a bare ``Q{m}``); else None.

    The matchers the preset writes itself (Triton's ``request_type="waiting"``) must be
    there and are left out. *Example*: ``sum(llm_d_epp_flow_control_queue_size{inference_pool="p"})``
    is the llm-d router's queue, with the matcher ``inference_pool="p"``.
    """
    read = one_selector(query)
    if read is None:
        return None
    written = read.matchers
    for preset in REGISTRY.all():
        family = preset.family(QUEUE_FIELD[preset.kind])
        for selector in family.selectors() if family is not None else ():
            if selector.metric == read.metric and set(selector.matchers) <= set(written):
                rest = tuple(m for m in written if m not in selector.matchers)
                return QueueRead(preset, selector.metric, rest, read.aggregation)
    return None


@dataclass(frozen=True, slots=True)
class RouterQueue:
    """A router's queue series found in Prometheus: the router (its preset), pool and model."""

    router: str
    pool: str  # its pool label's value ("" for a router read without a pool)
    model_label: str  # the label naming the model on the queue series
    model: str


def router_queue_queries() -> list[tuple[Preset, str, str]]:
    """Per router preset with a queue: the PromQL listing its queues (one series per pool and
    model, over the last minute) and the label that names the model on them. *Example*: llm-d's
    is ``sum by (inference_pool, model_name) (...)`` of its flow-control queue size."""
    out = []
    for router in ROUTERS.values():
        family = router.family(QUEUE_FIELD[router.kind])
        if family is None:
            continue
        model_label = family.model_label if family.select is Select.MODEL else router.model_label or ""
        by = tuple(label for label in (router.pool_label, model_label) if label)
        out.append((router, family.render(by, "1m"), model_label))
    return out


def holds_for(engine: str, matchers: Sequence[LabelMatcher], queue: RouterQueue) -> bool:
    """Whether ``queue`` holds requests for the servers of ``engine`` that ``matchers`` select: a
    router other than the engine's own frontend, for the model the matchers name (any, when they
    name none). *Example*: llm-d's queue for ``model_name="llama"`` holds for vLLM servers
    selected by ``model_name="llama"``, not for ``model_name="mistral"``; Dynamo's router holds
    for no Dynamo servers (their own queue already counts it)."""
    if queue.router == engine:
        return False
    on_model = [m for m in matchers if m.name == queue.model_label]
    return all(m.matches({queue.model_label: queue.model}) for m in on_model) and (
        bool(on_model) or not matchers
    )


def removed_in(query: str) -> list[tuple[str, Removal]]:
    """Each metric name in ``query`` that its upstream removed, with its removal (``Preset.removed``).

    A histogram's name is found in its series too: ``vllm:time_per_output_token_seconds_bucket``
    is ``vllm:time_per_output_token_seconds``.
    """
    return [
        (name, removal)
        for preset in REGISTRY.all()
        for name, removal in preset.removed.items()
        if re.search(rf"(?<![\w:]){re.escape(name)}(?:_bucket|_sum|_count)?(?![\w:])", query)
    ]


# GPU utilisation series, as KEDA triggers and HPAs name them: DCGM's exporter, the older
# nvidia_gpu_exporter, and the usual recording-rule names. scaler convert drops a trigger on
# one; scaler doctor reports an inference workload scaled on one.
GPU_UTILISATION = re.compile(r"dcgm_fi_dev_gpu_util|nvidia_gpu_duty_cycle|gpu_util|gpu_busy", re.I)
