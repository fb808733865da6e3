"""Resource names and quantities: which resources are GPUs, and what a pod requests. Pure.

    effective(pod) = max(sum(app containers) + sum(sidecars),
                         max over init containers i of (request(i) + sidecars before i)) + overhead

*Example*: a pod whose vLLM container requests ``nvidia.com/gpu: "2"`` and whose init
container requests one GPU reserves 2 (the init container runs before, not beside, it);
``parse_count("1k") == 1000``, ``parse_count("500m") is None`` (not a whole count). The
quantity grammar itself is ``scaler.quantity``'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

from scaler.kubejson import as_items, as_mapping, as_str
from scaler.quantity import parse_quantity

# Resource names read as GPUs (fnmatch patterns). Time-sliced GPUs renamed by the NVIDIA
# device plugin (``nvidia.com/gpu.shared``) and every MIG profile are included.
GPU_RESOURCE_PATTERNS: tuple[str, ...] = (
    "nvidia.com/gpu",
    "nvidia.com/gpu.*",
    "nvidia.com/mig-*",
    "amd.com/gpu",
    "gpu.intel.com/*",
    "habana.ai/gaudi",
    "aws.amazon.com/neuron",
    "aws.amazon.com/neuroncore",
    "aws.amazon.com/neurondevice",
    "google.com/tpu",
)
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"


def is_gpu_resource(name: str, patterns: Sequence[str] = GPU_RESOURCE_PATTERNS) -> bool:
    """Whether the resource name matches one of the GPU patterns (fnmatch, case-sensitive)."""
    return any(fnmatchcase(name, p) for p in patterns)


def is_extended_resource(name: str) -> bool:
    """Extended (device) resources are domain-qualified: ``vendor.example/thing``.

    ``cpu``, ``memory``, ``ephemeral-storage``, ``pods`` and ``hugepages-*`` are not.
    """
    return "/" in name and not name.startswith(("kubernetes.io/", "requests.", "limits."))


def parse_count(value: Any) -> int | None:
    """A Kubernetes quantity that must be a whole number (extended resources are), or None.

    Accepts ``2``, ``"2"``, ``"1k"``, ``"2e0"``; a fraction (``"500m"``), a negative or
    anything unparsable is None.
    """
    amount = parse_quantity(value)
    return int(amount) if amount is not None and amount.denominator == 1 else None


def _extended(resources: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, raw in as_mapping(resources).items():
        if isinstance(name, str) and is_extended_resource(name):
            count = parse_count(raw)
            if count is not None:
                out[name] = count
    return out


def _add(total: dict[str, int], more: Mapping[str, int]) -> dict[str, int]:
    out = dict(total)
    for name, count in more.items():
        out[name] = out.get(name, 0) + count
    return out


def _max(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    return {name: max(a.get(name, 0), b.get(name, 0)) for name in set(a) | set(b)}


def container_requests(container: Mapping[str, Any]) -> dict[str, int]:
    """Extended-resource requests of one container; a limit stands in for a missing request
    (for extended resources Kubernetes requires requests == limits and defaults one from the other)."""
    resources = as_mapping(container.get("resources"))
    return {**_extended(resources.get("limits")), **_extended(resources.get("requests"))}


def pod_requests(pod_spec: Mapping[str, Any]) -> dict[str, int]:
    """The pod's effective extended-resource request, as the scheduler reserves it.

    effective = max(sum(app containers) + sum(sidecars), max over init containers i of
                    (request(i) + sum(sidecars listed before i))) + overhead
    where sidecars are init containers with ``restartPolicy: Always``.
    """
    apps: dict[str, int] = {}
    for container in as_items(pod_spec.get("containers")):
        apps = _add(apps, container_requests(container))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in as_items(pod_spec.get("initContainers")):
        own = container_requests(container)
        if as_str(container.get("restartPolicy")) == "Always":
            sidecars = _add(sidecars, own)
            init_peak = _max(init_peak, sidecars)
        else:
            init_peak = _max(init_peak, _add(own, sidecars))
    effective = _max(_add(apps, sidecars), init_peak)
    effective = _add(effective, _extended(pod_spec.get("overhead")))
    return {name: count for name, count in effective.items() if count > 0}
