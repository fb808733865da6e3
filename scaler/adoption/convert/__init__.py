"""``scaler convert``: a ScaledObject with plain KEDA triggers, rewritten for this scaler.

The rewrite, trigger by trigger (``convert``; every change is reported, one line each):

* ``prometheus`` on an engine's queue gauge (``sum(METRIC{matchers})``, with ``by`` labels
  the matchers pin, or a bare gauge, as ``scaler.presets.promql`` parses it): the matching
  ``engine`` preset, the matchers as ``labelSelector``, the threshold as
  ``targetQueuePerReplica``, ``serverAddress`` as ``prometheusAddress``. The queue gauges
  are each preset's queue family in the registry (``scaler.presets``, every name
  generation): ``vllm:num_requests_waiting``, ``sglang:num_queue_reqs``, ``tgi_queue_size``,
  ``nv_trt_llm_request_metrics{request_type="waiting"}``, ``dynamo_frontend_queued_requests``.
* ``prometheus`` on a router's queue (llm-d's ``llm_d_epp_flow_control_queue_size`` or its
  older ``inference_extension_*`` name, Dynamo's KV router
  ``dynamo_frontend_router_queue_pending_requests``): that ``router``, ``inferencePool``
  from the ``inference_pool="NAME"`` matcher (a pooled router's query without one stays
  custom, with a warning), the engine of the router's name or the default one, and the
  matchers on the model label as ``labelSelector`` (others dropped, and said).
* any other ``prometheus`` query (the first one): ``engine: custom`` with ``queueQuery``; a
  query that does not parse is refused, with where it stops.
  A query reading a name its upstream removed (``vllm:time_per_output_token_seconds``) is
  warned of, with the name to read instead.
* ``prometheus`` on GPU utilisation (DCGM, ``nvidia_gpu_*``, ``*gpu_util*``): dropped.
  Utilisation lags the queue and cannot see requests waiting; the load signal replaces it.
  Its threshold is not carried (the report says so): the load signal's headroom comes from the
  TTFT objective at the forecast load, not from a utilisation target.
* ``cron``: pre-warm windows (``prewarmStart``/``prewarmEnd``/``prewarmReplicas``/
  ``timezone`` for one, ``prewarmWindows`` for several); KEDA's four keys are required.
* anything else: kept, with a warning: the HPA takes the largest of its metrics, so while
  another trigger asks for more, the GPU check cannot hold a scale-up.

No key is lost silently: every key of a converted trigger is carried (a report line says
where to), dropped with its reason, or refused with the key it most resembles, against the
keys KEDA's scaler of that type accepts (``PROMETHEUS_KEYS``, ``CRON_KEYS``) and, for the
ScaledObject's own fields, its CRD (``scaler.manifest``). A refused key raises
``RefusedKeysError``; with ``force`` it is dropped and reported instead. An error names the
key the user wrote (``desiredReplicas``), never one the conversion writes
(``prewarmReplicas``).

Then ``minReplicaCount``/``maxReplicaCount`` and the metadata's ``minReplicas``/``maxReplicas``
are written equal (``minReplicaCount: 0`` becomes 1: a cold start on the next request is
what this scaler exists to avoid); the example's ``fallback`` and HPA ``behavior`` are added
where the object has none; an HPA of the input already on the target is taken over (its name as
``advanced.horizontalPodAutoscalerConfig.name``, KEDA's ``transfer-hpa-ownership`` annotation; its
document leaves the output); every other field is kept as written, comments included.

Worked example: the published configuration (``benchmarks/baseline-published.yaml``) has
``sum(vllm:num_requests_waiting{model_name="llama-70b"})`` over 50, a DCGM utilisation
trigger over 85 and a weekday 09:00-12:00 cron for 8 replicas. It becomes one external
trigger with ``engine: vllm``, ``labelSelector: model_name="llama-70b"``,
``targetQueuePerReplica: "50"``, ``prewarmStart: 0 9 * * 1-5``, ``prewarmEnd: 0 12 * * 1-5``,
``prewarmReplicas: "8"``, ``timezone: Asia/Shanghai``, ``minReplicas: "2"``,
and ``maxReplicas: "16"``; the utilisation trigger is gone, with a comment saying why. The
per-replica capacities are not in the old object: the scaler measures them (``scaler.decider.capacity``).

The modules, each one step: ``report`` (the change lines and the errors), ``keys`` (the keys
KEDA accepts, did-you-mean for the rest), ``triggers`` (the walk over the old triggers),
``rewrite`` (the ScaledObject rewritten around them), ``compare`` (``--replay``) and
``command`` (the CLI). ruamel.yaml, which keeps the user's comments and key order, is the
``convert`` extra (``pip install 'llm-gpu-scaler[convert]'``): the server image has none, so
this package loads the modules that need it when they are first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from scaler.adoption.convert.command import add_parser, run
from scaler.manifest import DEFAULT_SCALER_ADDRESS

if TYPE_CHECKING:  # loaded on first use: ruamel.yaml is the convert extra, not in the server image
    from scaler.adoption.convert.keys import CRON_KEYS, PROMETHEUS_KEYS
    from scaler.adoption.convert.report import Conversion, ConvertError, RefusedKeysError
    from scaler.adoption.convert.rewrite import convert, convert_text, dump

_LAZY = {
    "CRON_KEYS": "keys",
    "PROMETHEUS_KEYS": "keys",
    "Conversion": "report",
    "ConvertError": "report",
    "RefusedKeysError": "report",
    "convert": "rewrite",
    "convert_text": "rewrite",
    "dump": "rewrite",
}


def __getattr__(name: str) -> Any:
    """The conversion's names, imported when first asked for (they need ruamel.yaml)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)


__all__ = [
    "CRON_KEYS",
    "DEFAULT_SCALER_ADDRESS",
    "PROMETHEUS_KEYS",
    "Conversion",
    "ConvertError",
    "RefusedKeysError",
    "add_parser",
    "convert",
    "convert_text",
    "dump",
    "run",
]
