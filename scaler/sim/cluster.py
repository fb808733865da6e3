"""A simulated Deployment on a GPU pool, standing in for Kubernetes in the demo.

The pods move as ``scaler.sim.pods`` models them, the same lifecycle the replay's fleet uses:
replicas follow the last target set, a new pod starts when a GPU is free and stays Pending
otherwise, and is Ready after the cold start. The HPA KEDA creates for the ScaledObject
(``create_hpa``) is ``scaler.sim.hpa.Hpa``: ``sync_hpa`` runs it on the metrics KEDA serves and
sets its result, and ``workload()`` reports that same HPA (bounds, ``behavior`` tolerances,
last result), so what the decision reads of the HPA is what turns it into replicas.
``workload()`` answers like the Kubernetes inventory does. Thread-safe, on a real clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from scaler.decider.coldstart import measure
from scaler.hpa import Metric
from scaler.inventory import WorkloadState
from scaler.sim.hpa import Hpa, HpaStep
from scaler.sim.pods import Pod, PodLifecycle, PodState


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
        now = clock()
        # The initial pods were created one cold start ago and are Ready now, so the
        # cold-start measurement has them from the first look.
        self._pods = PodLifecycle(Pod, gpus_total, gpus_per_replica, cold_start_s, 0, now - cold_start_s)
        self._pods.scale_to(initial_replicas, now - cold_start_s)
        self._pods.advance(now)
        self._hpa: Hpa | None = None  # none until create_hpa, as before KEDA reads the ScaledObject

    @staticmethod
    def _name(pod: Pod) -> str:
        return f"vllm-{pod.index}"

    def set_target(self, replicas: int) -> None:
        """Scale to ``replicas``: add Pending pods, or remove Pending pods first, then the newest."""
        with self._lock:
            self._pods.scale_to(replicas, self.clock())

    def create_hpa(self, hpa: Hpa) -> None:
        """The HPA KEDA creates for the ScaledObject: ``sync_hpa`` runs it, ``workload`` reports it."""
        with self._lock:
            self._hpa = hpa

    def sync_hpa(self, metrics: Sequence[Metric]) -> HpaStep:
        """One HPA sync on the metrics KEDA serves ((value, target, type) each); scale to its result."""
        with self._lock:
            if self._hpa is None:
                raise RuntimeError("no HPA: create_hpa first")
            now = self.clock()
            replicas = len(self._pods.active)  # spec and status alike: every pod, Pending ones included
            step = self._hpa.step(now, replicas, replicas, metrics)
            self._pods.scale_to(step.replicas, now)
            return step

    @property
    def replicas(self) -> int:
        """The Deployment's replicas: every pod, Pending ones included (spec and status alike)."""
        with self._lock:
            return len(self._pods.active)

    def ready_pods(self) -> list[str]:
        """Names of the pods past their cold start."""
        with self._lock:
            self._pods.advance(self.clock())
            return [self._name(p) for p in self._pods.active if p.state is PodState.READY]

    def workload(
        self, namespace: str, scaledobject_name: str, gpus_per_replica_override: int | None = None
    ) -> WorkloadState:
        """The workload as the Kubernetes inventory reports it: replica counts, GPU room, cold starts."""
        with self._lock:
            pods = self._pods
            pods.advance(self.clock())
            pending, starting, ready = pods.counts()
            free = self.gpus_total - pods.gpus_bound
            fits = max(0, free // self.gpus_per_replica)
            times = tuple(pods.ready_times)
            replicas = len(pods.active)
            hpa = self._hpa  # the one sync_hpa runs
            return WorkloadState(
                current_replicas=replicas,
                ready_replicas=ready,
                starting_replicas=starting,
                pending_replicas=pending,
                gpus_per_replica=self.gpus_per_replica,
                gpu_resource="nvidia.com/gpu",
                gpu_schedulable_replicas=fits,
                explanation=f"simulated pool: {free} of {self.gpus_total} GPUs free, {fits} more fit",
                cold_start=measure(times),
                pod_times=times,
                deployment_replicas=replicas,
                hpa=None if hpa is None else hpa.status(f"keda-hpa-{scaledobject_name}", namespace, replicas),
                hpa_read=True,
            )
