"""The pod lifecycle shared by the replay and the demo, and the demo's simulated cluster on it."""

from __future__ import annotations

import pytest

from scaler.sim.cluster import SimulatedCluster
from scaler.sim.pods import Pod, PodLifecycle, PodState
from tests.helpers import SecondsClock


def _pods(gpus: int = 4, initial: int = 2) -> PodLifecycle[Pod]:
    return PodLifecycle(Pod, gpus_free=gpus, gpus_per_replica=1, cold_start_s=180.0, initial_ready=initial)


def test_the_docstring_example_binds_two_and_leaves_one_pending() -> None:
    """4 GPUs, 2 Ready: scaling to 5 binds two new pods and leaves the third Pending."""
    pods = _pods()
    pods.scale_to(5, 0.0)
    assert pods.counts() == (1, 2, 2)
    assert pods.gpus_bound == 4
    pods.advance(180.0)
    assert pods.counts() == (1, 0, 4)  # Ready after the cold start; still no GPU for the fifth


def test_scale_down_removes_pending_then_the_newest_starting_pod() -> None:
    """A ReplicaSet's order: the Pending pod goes first, then the newest starting one."""
    pods = _pods()
    pods.scale_to(5, 0.0)
    pods.scale_to(3, 60.0)
    assert [(p.index, p.state) for p in pods.active] == [
        (0, PodState.READY),
        (1, PodState.READY),
        (2, PodState.STARTING),
    ]
    assert pods.pods[3].state is PodState.GONE
    assert pods.pods[4].state is PodState.GONE
    assert pods.gpus_bound == 3  # the removed starting pod held no requests: its GPU is free at once


class _Busy(Pod):
    """A pod whose requests all end at t=50."""

    __slots__ = ()

    def holds_requests(self) -> bool:
        return True

    def last_request_end(self, now: float) -> float:
        return max(now, 50.0)


def test_a_removed_ready_pod_drains_and_its_gpu_then_binds_the_pending_pod() -> None:
    """A Ready pod holding requests drains until its last one ends; then a Pending pod gets its GPU."""
    pods = PodLifecycle(_Busy, gpus_free=2, gpus_per_replica=1, cold_start_s=180.0, initial_ready=2)
    pods.scale_to(1, 10.0)  # pod 1 drains until 50
    assert [p.index for p in pods.draining] == [1]
    pods.scale_to(2, 20.0)  # the new pod waits for pod 1's GPU
    assert pods.counts() == (1, 0, 1)
    pods.advance(50.0)
    assert pods.counts() == (0, 1, 1)
    assert pods.pods[2].bound_at == 50.0
    assert pods.pods[1].state is PodState.GONE


def test_ready_times_are_what_the_cold_start_measurement_reads() -> None:
    """Each pod that became Ready is recorded with creation, bind and Ready times; initial pods are not."""
    pods = _pods(gpus=3)
    pods.scale_to(4, 100.0)  # one binds at 100, one waits
    pods.advance(280.0)
    assert [(t.created_at, t.scheduled_at, t.ready_at) for t in pods.ready_times] == [(100.0, 100.0, 280.0)]


def test_gpu_and_pending_time_are_accounted() -> None:
    """GPU-seconds count bound pods; Pending pod-seconds count the pods waiting for a GPU."""
    pods = _pods(gpus=2)
    pods.scale_to(3, 0.0)
    pods.advance(100.0)
    assert pods.gpu_seconds == pytest.approx(200.0)
    assert pods.pending_pod_seconds == pytest.approx(100.0)


def test_simulated_cluster_reports_the_workload_like_the_inventory() -> None:
    """The demo's cluster: Pending beyond the pool, Ready after the cold start, cold start measured."""
    clock = SecondsClock()
    cluster = SimulatedCluster(gpus_total=3, cold_start_s=20.0, initial_replicas=2, clock=clock)
    first = cluster.workload("inference", "llama")
    assert (first.ready_replicas, first.gpu_schedulable_replicas) == (2, 1)
    assert first.cold_start is not None
    assert first.cold_start.lead_p90_s == pytest.approx(20.0)
    cluster.set_target(4)
    clock.t += 5.0
    state = cluster.workload("inference", "llama")
    assert (state.current_replicas, state.ready_replicas, state.starting_replicas) == (4, 2, 1)
    assert (state.pending_replicas, state.gpu_schedulable_replicas) == (1, 0)
    assert cluster.ready_pods() == ["vllm-0", "vllm-1"]
    clock.t += 20.0
    assert cluster.ready_pods() == ["vllm-0", "vllm-1", "vllm-2"]
    cluster.set_target(2)
    assert cluster.replicas == 2
    assert cluster.workload("inference", "llama").gpu_schedulable_replicas == 1
