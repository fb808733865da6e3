"""llm-d's endpoint picker (EPP) with flow control, in front of the replay's fleet (``router: llm-d``).

The rule is ``scaler.decider.flowcontrol``'s, the one the simulated EPP of the live tests follows too:
the pool's saturation is the mean over the Ready pods of ``max(waiting / 5, kv_cache_usage / 0.8)``
(1 with no Ready pod), and the EPP sends a request to the servers only while it is below 1.

* A request that arrives while the router holds none goes to a pod at once if the pool is below
  saturation; otherwise it joins the router's queue: first in, first out (one priority band, one
  fairness flow).
* Held requests go, oldest first, at the first instant the pool reads below saturation, read again
  after each one sent: when a request gets its batch slot or ends on a Ready pod, when a pod
  becomes Ready, or when the fleet is scaled (the EPP's dispatch cycle, with metrics never stale).
* A request sent goes to the Ready pod the fleet's routing picks at that instant
  (``Cluster.assign``); nothing is shed (no TTL): a held request waits until it can go.

So the servers' own queue levels off near 5 waiting per Ready pod, or their KV cache near 0.8,
whichever the pods reach first (``kv_cache_usage_full_batch`` in the cluster model says which),
and the rest of the backlog shows only in the router's queue. What the replay exports from it,
as the live source reads them: the queue (``llm_d_epp_flow_control_queue_size``), the saturation
(``llm_d_epp_flow_control_pool_saturation``, never stale here) and the TTFT from the request's
arrival at the router (``llm_d_epp_request_ttft_seconds``: queue time included). The servers'
TTFT histogram counts from the moment a request is sent.

*Example*: 2 Ready pods of 24 slots whose KV cache bounds the batch (usage = slots in use / 24).
At 19 running on each the pool reads ``19 / 24 / 0.8 = 0.99``: one more is sent, and the pool
reads ``(1.04 + 0.99) / 2 = 1.02``: the next one waits in the router until a request ends.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

from scaler.decider.flowcontrol import dispatches, pool_saturation
from scaler.replay.fleet.cluster import Cluster, StepCluster


class FlowControlRouter:
    """The EPP's queue in front of ``cluster``; ``send(request, t)`` hands a request to the fleet.

    Call ``offer`` in arrival order and ``release`` before reading the fleet at a control tick;
    times never go back.
    """

    def __init__(self, cluster: Cluster | StepCluster, send: Callable[[int, float], None]) -> None:
        self.cluster = cluster
        self.send = send
        self.held: deque[int] = deque()  # requests waiting in the router, oldest first
        self._t = -math.inf  # the router has been run up to here

    @property
    def queued(self) -> int:
        """Requests waiting in the router now (``llm_d_epp_flow_control_queue_size``)."""
        return len(self.held)

    def saturation(self, now: float) -> float:
        """The pool's saturation at ``now`` (``llm_d_epp_flow_control_pool_saturation``)."""
        self.cluster.advance(now)
        return pool_saturation(self.cluster.endpoints(now))

    def release(self, until: float) -> None:
        """Send the held requests the pool takes, at the instants it takes them, up to ``until``."""
        held, cluster = self.held, self.cluster
        t = self._t
        while held:
            if dispatches(self.saturation(t)):
                self.send(held.popleft(), t)
                continue
            t = cluster.next_change()
            if t > until or t == math.inf:  # nothing changes before then: they wait on
                break
        self._t = max(self._t, until)

    def offer(self, request: int, now: float) -> None:
        """A request arrives at ``now``: sent at once while nothing waits and the pool takes it, else held."""
        self.release(now)
        if not self.held and dispatches(self.saturation(now)):
            self.send(request, now)
        else:
            self.held.append(request)
