"""Cost of the GPU fit on a DRA cluster: CEL selectors evaluated once, then the fit per refresh.

    python -m benchmarks.gpu_gate [--nodes 200] [--mig-nodes 50] [--repeat 20]

A cluster of ``--nodes`` nodes of eight H100s published only as ResourceSlices (the NVIDIA DRA
driver's shape) and ``--mig-nodes`` nodes of one partitionable A100 (shared counters, 11 MIG
placements and the whole GPU), half their devices held by claims. Timed, from the objects'
JSON as the watches deliver it: parsing the slices and claims, building the DRA inventory,
the first fit of a 2-GPU ``nvidia.com/gpu`` replica (every device's CEL verdict computed) and
of a one-``1g.5gb`` MIG replica through a claim template, and then the same fits again
(verdicts remembered: what ``workload()`` costs on every refresh). Prints the figures and
writes benchmarks/results/gpu_gate.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT
from scaler.inventory import Node, ReplicaRequirement, schedulable_replicas
from scaler.inventory.dra import (
    ClassMatcher,
    DeviceRequest,
    deviceclass_from_json,
    dra_inventory,
    resourceclaim_from_json,
    resourceslice_from_json,
)

sys.path.insert(0, str(ROOT))
from tests import k8s_double as k8s

RESULTS = ROOT / "benchmarks" / "results"


def timed(run: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = run()
    return time.perf_counter() - started, value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--mig-nodes", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    raw_slices: list[dict[str, Any]] = []
    raw_claims: list[dict[str, Any]] = []
    for n in range(args.nodes):
        name = f"dra-{n}"
        raw_slices.append(k8s.resourceslice(name, 8))
        raw_claims += [
            k8s.resourceclaim(f"{name}-c{i}", "ns", name, [f"gpu-{2 * i}", f"gpu-{2 * i + 1}"])
            for i in range(2)
        ]
    for n in range(args.mig_nodes):
        name = f"mig-{n}"
        raw_slices += k8s.resourceslices_mig(name)
        raw_claims.append(
            k8s.resourceclaim(f"{name}-c", "ns", name, ["gpu-0-mig-1g5gb-0"], device_class="mig.nvidia.com")
        )
    classes = [
        deviceclass_from_json(k8s.deviceclass("gpu.nvidia.com", k8s.WHOLE_GPU, "nvidia.com/gpu")),
        deviceclass_from_json(k8s.deviceclass("mig.nvidia.com", k8s.MIG)),
    ]
    parse_s, (slices, claims) = timed(
        lambda: (
            [resourceslice_from_json(s) for s in raw_slices],
            [resourceclaim_from_json(c) for c in raw_claims],
        )
    )
    matcher = ClassMatcher()
    build_s, inventory = timed(lambda: dra_inventory(slices, classes, claims, None, matcher))
    nodes = [Node(f"dra-{n}") for n in range(args.nodes)] + [Node(f"mig-{n}") for n in range(args.mig_nodes)]
    whole = ReplicaRequirement({"nvidia.com/gpu": 2})
    profile = "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"
    mig = ReplicaRequirement(claims=(DeviceRequest("gpu", "mig.nvidia.com", 1, (profile,)),))
    cold_whole_s, fit_whole = timed(lambda: schedulable_replicas(nodes, [], whole, inventory))
    cold_mig_s, fit_mig = timed(lambda: schedulable_replicas(nodes, [], mig, inventory))
    warm_whole = [
        timed(lambda: schedulable_replicas(nodes, [], whole, inventory))[0] for _ in range(args.repeat)
    ]
    warm_mig = [timed(lambda: schedulable_replicas(nodes, [], mig, inventory))[0] for _ in range(args.repeat)]
    devices = sum(len(d) for d in inventory.devices.values())
    figures = {
        "nodes": args.nodes,
        "mig_nodes": args.mig_nodes,
        "devices": devices,
        "claims": len(claims),
        "parse_ms": round(parse_s * 1e3, 1),
        "build_ms": round(build_s * 1e3, 1),
        "first_fit_whole_gpu_ms": round(cold_whole_s * 1e3, 1),
        "first_fit_mig_ms": round(cold_mig_s * 1e3, 1),
        "fit_whole_gpu_median_ms": round(statistics.median(warm_whole) * 1e3, 2),
        "fit_mig_median_ms": round(statistics.median(warm_mig) * 1e3, 2),
        "whole_gpu_replicas_fit": fit_whole.replicas,
        "mig_replicas_fit": fit_mig.replicas,
    }
    print(
        f"{args.nodes} DRA nodes x 8 H100 + {args.mig_nodes} partitionable A100s: {devices} devices, {len(claims)} claims"
    )
    print(f"  parse slices and claims     {figures['parse_ms']:8.1f} ms")
    print(f"  build the DRA inventory     {figures['build_ms']:8.1f} ms")
    print(
        f"  first fit, 2 nvidia.com/gpu {figures['first_fit_whole_gpu_ms']:8.1f} ms  (CEL per device, once)  -> {fit_whole.replicas} replicas"
    )
    print(
        f"  first fit, 1 MIG 1g.5gb     {figures['first_fit_mig_ms']:8.1f} ms  -> {fit_mig.replicas} replicas"
    )
    print(
        f"  fit again, 2 nvidia.com/gpu {figures['fit_whole_gpu_median_ms']:8.2f} ms  (median of {args.repeat}; every refresh)"
    )
    print(f"  fit again, 1 MIG 1g.5gb     {figures['fit_mig_median_ms']:8.2f} ms")
    RESULTS.mkdir(exist_ok=True)
    Path(RESULTS / "gpu_gate.json").write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
