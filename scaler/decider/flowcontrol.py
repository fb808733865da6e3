"""llm-d's flow control: the pool saturation its endpoint picker (EPP) gates dispatch on. Pure.

With flow control on (the EPP's ``featureGates: ["flowControl"]``) the EPP sends a request to the
model servers only while the pool's saturation is below 1; the rest waits in its own queue
(``llm_d_epp_flow_control_queue_size``). Its default utilization detector computes

    endpoint saturation = max(waiting / QUEUE_DEPTH_THRESHOLD, kv_cache_usage / KV_CACHE_UTIL_THRESHOLD)
    pool saturation     = the mean over the pool's endpoints (1 for an empty pool: it fails closed)

so the servers' own queue levels off near 5 waiting per pod, or their KV cache near 0.8, whichever
comes first, while the backlog grows in the router. Source: llm-d/llm-d-router
``pkg/epp/framework/plugins/flowcontrol/saturationdetector/utilization/README.md`` (defaults
queueDepthThreshold 5, kvCacheUtilThreshold 0.8, headroom 0); ../shared/stacks/README.md, 1e.

One model of the rule for the replay's router (``scaler/replay/fleet/router.py``) and the simulated
EPP of the live tests (``scaler/sim/router.py``).

*Example*: two endpoints, one with 5 waiting and its KV cache 60% used, one with 2 waiting and 90%
used: ``max(1.0, 0.75) = 1.0`` and ``max(0.4, 1.125) = 1.125``, a pool saturation of 1.06:
nothing is dispatched until a request gets its batch slot or finishes.
"""

from __future__ import annotations

from collections.abc import Iterable

QUEUE_DEPTH_THRESHOLD = 5.0  # requests waiting on one endpoint that read as saturated (EPP default)
KV_CACHE_UTIL_THRESHOLD = 0.8  # KV cache usage (0-1) that reads as saturated (EPP default)
GATE = 1.0  # pool saturation at or above which the EPP dispatches nothing (the gating set point)


def endpoint_saturation(waiting: float, kv_cache_usage: float) -> float:
    """One endpoint's saturation (module docstring): 1 where either threshold is reached."""
    return max(waiting / QUEUE_DEPTH_THRESHOLD, kv_cache_usage / KV_CACHE_UTIL_THRESHOLD)


def pool_saturation(endpoints: Iterable[tuple[float, float]]) -> float:
    """The mean saturation of ``(waiting, kv_cache_usage)`` endpoints; ``GATE`` (1) for none."""
    total = 0.0
    count = 0
    for waiting, kv in endpoints:
        total += endpoint_saturation(waiting, kv)
        count += 1
    return total / count if count else GATE


def dispatches(saturation: float) -> bool:
    """Whether the EPP sends a request to the servers at this pool saturation."""
    return saturation < GATE
