"""A simulated Deployment on a GPU pool, standing in for Kubernetes in the demo.

Replicas follow the last target set (as KEDA and the HPA would make them): new pods start
when a GPU is free and stay Pending otherwise; a started pod is Ready after the cold start.
``workload()`` answers like the Kubernetes inventory does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from scaler.coldstart import PodTimes, measure
from scaler.inventory import WorkloadState
from scaler.model import HpaStatus


@dataclass
class _Pod:
    name: str
    created: float
    started: float | None = None  # bound to a node, cold start running


class SimulatedCluster:
    """A Deployment's pods on a pool of GPUs, following the last target set (module docstring)."""

    def __init__(
        self,
        gpus_total: int = 8,
        gpus_per_replica: int = 1,
        cold_start_s: float = 20.0,
        initial_replicas: int = 2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.gpus_total = gpus_total
        self.gpus_per_replica = gpus_per_replica
        self.cold_start_s = cold_start_s
        self.clock = clock
        self._lock = threading.Lock()
        self._serial = 0
        now = clock()
        self._pods: list[_Pod] = []
        for _ in range(initial_replicas):
            pod = self._new_pod(now - cold_start_s)
            pod.started = now - cold_start_s
            self._pods.append(pod)

    def _new_pod(self, now: float) -> _Pod:
        pod = _Pod(f"vllm-{self._serial}", now)
        self._serial += 1
        return pod

    def _tick(self) -> None:
        now = self.clock()
        bound = [p for p in self._pods if p.started is not None]
        free = self.gpus_total - len(bound) * self.gpus_per_replica
        for pod in self._pods:
            if pod.started is None and free >= self.gpus_per_replica:
                pod.started = now
                free -= self.gpus_per_replica

    def set_target(self, replicas: int) -> None:
        """Scale to ``replicas``: add Pending pods, or remove unscheduled pods first, then the youngest."""
        with self._lock:
            now = self.clock()
            while len(self._pods) < replicas:
                self._pods.append(self._new_pod(now))
            if len(self._pods) > replicas:
                # the ReplicaSet removes unscheduled pods first, then the youngest
                self._pods.sort(key=lambda p: (p.started is None, p.started or 0.0, p.created))
                del self._pods[replicas:]
            self._tick()

    @property
    def replicas(self) -> int:
        """The Deployment's replicas: every pod, Pending ones included (spec and status alike)."""
        with self._lock:
            return len(self._pods)

    def ready_pods(self) -> list[str]:
        """Names of the pods past their cold start."""
        with self._lock:
            self._tick()
            now = self.clock()
            return [
                p.name for p in self._pods if p.started is not None and now - p.started >= self.cold_start_s
            ]

    def workload(
        self, namespace: str, scaledobject_name: str, gpus_per_replica_override: int | None = None
    ) -> WorkloadState:
        """The workload as the Kubernetes inventory reports it: replica counts, GPU room, cold starts."""
        with self._lock:
            self._tick()
            now = self.clock()
            ready = sum(
                1 for p in self._pods if p.started is not None and now - p.started >= self.cold_start_s
            )
            pending = sum(1 for p in self._pods if p.started is None)
            bound = len(self._pods) - pending
            starting = bound - ready
            free = self.gpus_total - bound * self.gpus_per_replica
            fits = max(0, free // self.gpus_per_replica)
            times = [
                PodTimes(p.name, p.created, p.started, p.started + self.cold_start_s)
                for p in self._pods
                if p.started is not None and now - p.started >= self.cold_start_s
            ]
            return WorkloadState(
                current_replicas=len(self._pods),
                ready_replicas=ready,
                starting_replicas=starting,
                pending_replicas=pending,
                gpus_per_replica=self.gpus_per_replica,
                gpu_resource="nvidia.com/gpu",
                gpu_schedulable_replicas=fits,
                explanation=f"simulated pool: {free} of {self.gpus_total} GPUs free, {fits} more fit",
                cold_start=measure(times),
                pod_times=tuple(times),
                deployment_replicas=len(self._pods),
                # set_target applies the target directly: an HPA that always follows it
                hpa=HpaStatus("simulated", namespace, True, 0, None, None, len(self._pods), len(self._pods)),
                hpa_read=True,
            )
