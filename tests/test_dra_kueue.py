"""DRA's device counting and Kueue's quota, as tables over the objects' JSON (pure, no server)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from scaler.inventory import Node, ReplicaRequirement, schedulable_replicas
from scaler.inventory.dra import (
    DeviceRequest,
    claimtemplate_from_json,
    deviceclass_from_json,
    dra_inventory,
    resourceclaim_from_json,
    resourceslice_from_json,
)
from scaler.inventory.kueue import (
    ADMISSION_GATE,
    KueueInventory,
    admission,
    clusterqueue_from_json,
    free_quota,
    localqueue_from_json,
    queue_room,
)
from tests import k8s_double as k8s

GPU_CLASS = deviceclass_from_json(k8s.deviceclass("gpu.nvidia.com", k8s.WHOLE_GPU, "nvidia.com/gpu"))
MIG_CLASS = deviceclass_from_json(k8s.deviceclass("mig.nvidia.com", k8s.MIG))


def claim(node: str, *devices: str) -> Any:
    """A claim holding ``devices`` of ``node``'s pool."""
    return resourceclaim_from_json(k8s.resourceclaim(f"c-{'-'.join(devices)}", "ns", node, devices))


def mig_inventory(*held: str) -> Any:
    """One partitionable A100 on node mig-a, with ``held`` devices allocated."""
    slices = [resourceslice_from_json(s) for s in k8s.resourceslices_mig("mig-a")]
    return dra_inventory(slices, [GPU_CLASS, MIG_CLASS], [claim("mig-a", d) for d in held])


def fits(inventory: Any, device_class: str, count: int = 1, selectors: tuple[str, ...] = ()) -> int:
    """Replicas of ``count`` devices of ``device_class`` (through a claim) that fit on mig-a."""
    need = ReplicaRequirement(claims=(DeviceRequest("gpu", device_class, count, selectors),))
    return schedulable_replicas([Node("mig-a")], [], need, inventory).replicas


PROFILE = "device.attributes['gpu.nvidia.com'].profile == '{}'"


@pytest.mark.parametrize(
    ("held", "profile", "expected"),
    [
        ((), "1g.5gb", 7),
        (("gpu-0-mig-1g5gb-0", "gpu-0-mig-1g5gb-1"), "1g.5gb", 5),
        (("gpu-0-mig-3g20gb-0",), "1g.5gb", 3),  # slices 0-3 taken: placements 4, 5, 6 remain
        (("gpu-0-mig-3g20gb-0",), "3g.20gb", 1),
        (("gpu-0-mig-1g5gb-4",), "3g.20gb", 1),  # slice 4 taken: only the placement at 0
        (("gpu-0",), "1g.5gb", 0),  # the whole GPU takes every slice
    ],
)
def test_mig_placements_share_their_gpus_counters(held: tuple[str, ...], profile: str, expected: int) -> None:
    """A MIG device consumes slices of its GPU's counter set: what overlaps an allocated one is taken."""
    assert fits(mig_inventory(*held), "mig.nvidia.com", 1, (PROFILE.format(profile),)) == expected


def test_the_whole_gpu_is_free_only_while_no_partition_is_taken() -> None:
    """gpu.nvidia.com selects the whole GPU (type gpu) and not its MIG devices (type mig)."""
    assert fits(mig_inventory(), "gpu.nvidia.com") == 1
    assert fits(mig_inventory("gpu-0-mig-1g5gb-6"), "gpu.nvidia.com") == 0


def test_an_older_pool_generation_is_ignored() -> None:
    """A driver republishing a pool bumps its generation; the stale slice's devices do not count."""
    old = resourceslice_from_json(k8s.resourceslice("dra-a", 8, generation=1, name="old"))
    new = resourceslice_from_json(k8s.resourceslice("dra-a", 4, generation=2, name="new"))
    inventory = dra_inventory([old, new], [GPU_CLASS], [])
    need = ReplicaRequirement({"nvidia.com/gpu": 1})
    assert schedulable_replicas([Node("dra-a")], [], need, inventory).replicas == 4


def test_a_pool_is_counted_only_once_its_latest_generation_is_complete() -> None:
    """A driver rewriting its pool (generation 2 of two slices, one published yet): neither the stale
    generation nor the partial one counts, the pool is named, and both slices in count all eight."""
    old = resourceslice_from_json(k8s.resourceslice("dra-a", 8, generation=1, name="old"))
    half = resourceslice_from_json(k8s.resourceslice("dra-a", 4, generation=2, name="a", slices=2))
    rest = resourceslice_from_json(k8s.resourceslice("dra-a", 4, generation=2, name="b", slices=2, first=4))
    need = ReplicaRequirement({"nvidia.com/gpu": 1})
    partial = schedulable_replicas([Node("dra-a")], [], need, dra_inventory([old, half], [GPU_CLASS], []))
    assert not partial.countable
    assert partial.uncounted.endswith(
        "DRA pools not counted until complete: gpu.nvidia.com pool dra-a (1 of 2 slices of generation 2)"
    )
    whole = dra_inventory([old, half, rest], [GPU_CLASS], [])
    assert whole.incomplete == ()
    assert schedulable_replicas([Node("dra-a")], [], need, whole).replicas == 8


def test_an_extended_resource_is_served_by_the_newest_class_naming_it() -> None:
    """Two classes declare nvidia.com/gpu: the scheduler takes the newer; any serves its implicit name."""

    def made(name: str, when: str) -> Any:
        raw = k8s.deviceclass(name, k8s.WHOLE_GPU, "nvidia.com/gpu")
        raw["metadata"]["creationTimestamp"] = when
        return deviceclass_from_json(raw)

    older, newer = made("a-gpus", "2026-01-01T00:00:00Z"), made("z-gpus", "2026-06-01T00:00:00Z")
    inventory = dra_inventory([], [older, newer, MIG_CLASS], [])
    assert inventory.class_for("nvidia.com/gpu") == newer
    assert inventory.class_for("deviceclass.resource.kubernetes.io/mig.nvidia.com") == MIG_CLASS
    assert inventory.class_for("amd.com/gpu") is None


def test_selectors_read_capacity_as_quantities_and_count_what_they_cannot_evaluate() -> None:
    """compareTo(quantity()) compares capacities exactly; a function not provided (semver) counts the device,
    and the explanation says the selector was not understood."""
    slices = [resourceslice_from_json(k8s.resourceslice("dra-a", 2))]
    big = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('79Gi')) >= 0"  # 81559Mi is 79.6Gi
    huge = "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('80Gi'))"
    newer = "device.attributes['gpu.nvidia.com'].cudaComputeCapability.isGreaterThan(semver('8.0.0'))"
    inventory = dra_inventory(slices, [GPU_CLASS], [])
    assert fits_on(inventory, big) == 2
    assert fits_on(inventory, huge) == 0
    unsure = schedulable_replicas(
        [Node("dra-a")],
        [],
        ReplicaRequirement(claims=(DeviceRequest("g", "gpu.nvidia.com", 1, (newer,)),)),
        inventory,
    )
    assert unsure.replicas == 2
    assert "selector not understood" in unsure.explanation
    assert "semver" in unsure.explanation


def fits_on(inventory: Any, selector: str) -> int:
    """Replicas of one gpu.nvidia.com device passing ``selector`` that fit on dra-a."""
    need = ReplicaRequirement(claims=(DeviceRequest("g", "gpu.nvidia.com", 1, (selector,)),))
    return schedulable_replicas([Node("dra-a")], [], need, inventory).replicas


def test_claims_allocated_for_admin_access_take_no_device() -> None:
    """adminAccess results (monitoring) leave the device to workloads, as the allocator does."""
    raw = k8s.resourceclaim("watch", "ns", "dra-a", ["gpu-0"])
    raw["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = True
    assert resourceclaim_from_json(raw).allocated == ()


def test_a_template_asking_for_every_device_is_not_counted() -> None:
    """allocationMode All and prioritized lists have no per-replica count: the request says why."""
    raw = k8s.resourceclaimtemplate("all", "ns", "gpu.nvidia.com")
    raw["spec"]["spec"]["devices"]["requests"][0]["exactly"]["allocationMode"] = "All"
    (request,) = claimtemplate_from_json(raw).requests
    assert request.problem == "request gpu asks for allocationMode All"


ML = {"cohort": "ml"}


def queue(name: str, nominal: int, used: int, **kw: Any) -> Any:
    """A ClusterQueue parsed from the double's JSON."""
    return clusterqueue_from_json(k8s.clusterqueue(name, nominal, used, **kw))


@pytest.mark.parametrize(
    ("mine", "peers", "free"),
    [
        ({"nominal": 8, "used": 3}, [], 5),  # no cohort: nominal - used
        ({"nominal": 8, "used": 8, "cohort": "ml"}, [{"nominal": 8, "used": 2, "cohort": "ml"}], 6),
        ({"nominal": 8, "used": 8, **ML, "borrowing_limit": 4}, [{"nominal": 8, "used": 2, **ML}], 4),
        ({"nominal": 8, "used": 8, **ML}, [{"nominal": 8, "used": 2, **ML, "lending_limit": 2}], 2),
        ({"nominal": 8, "used": 8, **ML}, [{"nominal": 8, "used": 7, **ML, "lending_limit": 2}], 1),
        ({"nominal": 8, "used": 8, "cohort": "ml"}, [{"nominal": 8, "used": 2, "cohort": "other"}], 0),
        # a peer borrowing from us shrinks what is left of our own nominal quota
        ({"nominal": 8, "used": 2, "cohort": "ml"}, [{"nominal": 8, "used": 12, "cohort": "ml"}], 2),
    ],
)  # fmt: skip
def test_free_quota_with_the_cohorts_lending(
    mine: dict[str, Any], peers: list[dict[str, Any]], free: int
) -> None:
    """free = own guaranteed left + the cohort's lendable quota not drawn, within nominal + borrowingLimit."""
    me = queue("me", **mine)
    others = [queue(f"peer-{i}", **p) for i, p in enumerate(peers)]
    assert free_quota(me, [me, *others], "h100", "nvidia.com/gpu") == Fraction(free)


def test_a_stopped_queue_admits_nothing_and_an_uncovered_resource_has_no_quota() -> None:
    """stopPolicy Hold admits no new workload; a queue without the GPU resource cannot admit a GPU pod."""
    raw = k8s.clusterqueue("held", 8, 0)
    raw["spec"]["stopPolicy"] = "Hold"
    assert queue_room(clusterqueue_from_json(raw), [], {"nvidia.com/gpu": 1}).replicas == 0
    room = queue_room(queue("amd", 8, 0, resource="amd.com/gpu"), [], {"nvidia.com/gpu": 1})
    assert (room.replicas, "has no quota for nvidia.com/gpu" in room.explanation) == (0, True)


def test_admission_of_a_workload() -> None:
    """Not under Kueue: nothing. A queue-name label, or a gated pod (the namespace's default queue): the
    admitted replicas plus the room; a missing queue is unknown with the reason."""
    queues = KueueInventory(
        {("ns", "default"): localqueue_from_json(k8s.localqueue("default", "ns", "cq"))},
        {"cq": queue("cq", 8, 4)},
    )
    assert admission("ns", None, 2, 0, {"nvidia.com/gpu": 2}, queues).managed is False
    by_gate = admission("ns", None, 2, 1, {"nvidia.com/gpu": 2}, queues)
    assert (by_gate.managed, by_gate.replicas) == (True, 4)
    assert f"1 waiting behind {ADMISSION_GATE}" in by_gate.explanation
    missing = admission("ns", "gpus", 2, 0, {"nvidia.com/gpu": 2}, queues)
    assert (missing.replicas, missing.explanation) == (None, "LocalQueue ns/gpus not found")
    claims = admission("ns", "default", 2, 0, {}, queues, through_claims=True)
    assert claims.replicas is None
    assert "resourceClaims" in claims.explanation
