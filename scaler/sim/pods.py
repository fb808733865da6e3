"""A Deployment's pods on a GPU pool, as Kubernetes moves them. Pure: the time is passed in.

One model of the pod lifecycle, shared by the replay's fleet (``replay/fleet/cluster.py``, which
adds routing, prefill and decode) and the demo's simulated cluster (``sim/cluster.py``):

* **Pending** until the workload's free GPUs hold ``gpus_per_replica`` more (first come,
  first served: the scheduler binds pods in creation order);
* **starting** for ``cold_start_s`` once bound (image pull, weight load, warm-up);
* **Ready**: the only pods that receive requests;
* **scale-down** removes Pending pods first, then starting ones (newest first), then Ready
  ones (newest first), as a ReplicaSet does. A removed pod that holds requests **drains**:
  it takes no new ones, finishes those it has, and frees its GPUs when the last ends.

*Example*: 4 GPUs, 1 per replica, cold start 180 s, 2 pods Ready at t=0. ``scale_to(5, 0)``
creates three pods: two bind at once (Ready at 180 s) and one stays Pending until a GPU
frees. ``scale_to(3, 60)`` then removes the Pending pod and the newest starting one.

GPU time is accounted as GPU-seconds bound (starting, Ready and draining pods hold their
GPUs), and Pending time as pod-seconds, both up to the last ``advance``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from enum import IntEnum
from typing import Generic, TypeVar

from scaler.decider.coldstart import WINDOW, PodTimes


class PodState(IntEnum):
    """A pod's stage, in the order it goes through them."""

    PENDING = 0
    STARTING = 1
    READY = 2
    DRAINING = 3
    GONE = 4


class Pod:
    """One pod's lifecycle: its stage and when it entered each. Subclasses add what it serves."""

    __slots__ = ("bound_at", "created_at", "drain_end", "index", "ready_at", "state")

    def __init__(self, index: int, now: float) -> None:
        self.index = index
        self.state = PodState.PENDING
        self.created_at = now
        self.bound_at = math.inf
        self.ready_at = math.inf
        self.drain_end = math.inf

    def holds_requests(self) -> bool:
        """Whether requests were given to the pod that it has not finished (none here)."""
        return False

    def last_request_end(self, now: float) -> float:
        """When the pod finishes the last request it holds (``now`` when it holds none)."""
        return now


PodT = TypeVar("PodT", bound=Pod)


class PodLifecycle(Generic[PodT]):
    """The pods of one Deployment on a GPU pool (module docstring). Call in time order.

    ``make_pod(index, now)`` creates each pod: ``Pod`` itself, or a subclass that serves.
    """

    def __init__(
        self,
        make_pod: Callable[[int, float], PodT],
        gpus_free: int,
        gpus_per_replica: int,
        cold_start_s: float,
        initial_ready: int,
        now: float = 0.0,
    ) -> None:
        self.make_pod = make_pod
        self.gpus_free = gpus_free
        self.gpus_per_replica = gpus_per_replica
        self.cold_start_s = cold_start_s
        self.pods: list[PodT] = []
        self.active: list[PodT] = []  # pending, starting, ready (the Deployment's replicas)
        self.ready: list[PodT] = []
        self.draining: list[PodT] = []
        self._next_index = 0
        self._gpus_bound = 0
        self._next_event = math.inf
        self._acc_t = now
        self.gpu_seconds = 0.0
        self.pending_pod_seconds = 0.0
        for _ in range(max(0, min(initial_ready, gpus_free // gpus_per_replica))):
            pod = self._new_pod(now)
            pod.state = PodState.READY
            pod.bound_at = pod.ready_at = now
            self._gpus_bound += gpus_per_replica
            self.ready.append(pod)
        self._pending: deque[PodT] = deque()
        # Counts every change of the pods' states: what was read of them is current while it stands.
        self.changes = 0
        # The pods that became Ready, newest last: what the scaler's cold-start measurement
        # reads from the API (the initial pods were Ready before anyone looked).
        self.ready_times: deque[PodTimes] = deque(maxlen=WINDOW)

    @property
    def gpus_bound(self) -> int:
        """GPUs held by starting, Ready and draining pods."""
        return self._gpus_bound

    def counts(self) -> tuple[int, int, int]:
        """The Deployment's pods as (Pending, starting, Ready), after the last ``advance``."""
        # The active pods are the Pending ones (queued for GPUs), the Ready ones and the starting rest.
        pending, ready = len(self._pending), len(self.ready)
        return pending, len(self.active) - pending - ready, ready

    # ---- bookkeeping -----------------------------------------------------------------

    def _new_pod(self, now: float) -> PodT:
        pod = self.make_pod(self._next_index, now)
        self._next_index += 1
        self.pods.append(pod)
        self.active.append(pod)
        return pod

    def _accumulate(self, now: float) -> None:
        dt = now - self._acc_t
        if dt > 0:
            self.gpu_seconds += self._gpus_bound * dt
            self.pending_pod_seconds += len(self._pending) * dt
            self._acc_t = now

    def _refresh_next_event(self) -> None:
        nxt = math.inf
        for pod in self.active:
            if pod.state is PodState.STARTING and pod.ready_at < nxt:
                nxt = pod.ready_at
        for pod in self.draining:
            nxt = min(nxt, pod.drain_end)
        self._next_event = nxt

    def _schedule_pending(self, now: float) -> None:
        per = self.gpus_per_replica
        while self._pending and self.gpus_free - self._gpus_bound >= per:
            pod = self._pending.popleft()
            pod.state = PodState.STARTING
            pod.bound_at = now
            pod.ready_at = now + self.cold_start_s
            self._gpus_bound += per
        self._refresh_next_event()

    def advance(self, now: float) -> None:
        """Apply every pod event (Ready, drained) up to ``now``, in time order."""
        while self._next_event <= now:
            t = self._next_event
            self.changes += 1
            self._accumulate(t)
            for pod in [p for p in self.active if p.state is PodState.STARTING and p.ready_at <= t]:
                pod.state = PodState.READY
                self.ready.append(pod)
                self.ready_times.append(PodTimes(str(pod.index), pod.created_at, pod.bound_at, pod.ready_at))
            for pod in [p for p in self.draining if p.drain_end <= t]:
                pod.state = PodState.GONE
                self.draining.remove(pod)
                self._gpus_bound -= self.gpus_per_replica
            self._schedule_pending(t)
        self._accumulate(now)

    def scale_to(self, replicas: int, now: float) -> None:
        """Set the Deployment's replicas: create Pending pods or remove pods."""
        self.advance(now)
        self.changes += 1
        replicas = max(0, replicas)
        current = len(self.active)
        if replicas > current:
            for _ in range(replicas - current):
                self._pending.append(self._new_pod(now))
            self._schedule_pending(now)
            return
        if replicas == current:
            return
        remove = current - replicas
        rank = {PodState.PENDING: 0, PodState.STARTING: 1, PodState.READY: 2}
        victims = sorted(self.active, key=lambda p: (rank[p.state], -p.index))[:remove]
        per = self.gpus_per_replica
        for pod in victims:
            self.active.remove(pod)
            if pod.state is PodState.PENDING:
                self._pending.remove(pod)
                pod.state = PodState.GONE
            elif pod.state is PodState.STARTING and not pod.holds_requests():
                pod.state = PodState.GONE
                self._gpus_bound -= per
            else:
                # A Ready pod, or a starting one that requests waited for while no pod was
                # Ready: it serves what it holds, then goes.
                if pod.state is PodState.READY:
                    self.ready.remove(pod)
                pod.state = PodState.DRAINING
                pod.drain_end = pod.last_request_end(now)
                self.draining.append(pod)
        self._schedule_pending(now)
        self.advance(now)
