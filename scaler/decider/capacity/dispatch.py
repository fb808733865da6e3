"""Whether the fleet's dispatch pools its replicas, measured from how evenly they are loaded. Pure.

The load signal sizes each resource as a queue (``scaler.decider.queueing``). Which queue depends on how
requests reach the replicas: a router that sends each request to the least loaded replica (llm-d's
endpoint picker, Dynamo's KV router) makes the fleet one pooled queue (M/M/c over every replica's
servers); a Kubernetes Service, which spreads connections at random, makes each replica a queue of
its own with a share of the arrivals, which waits far longer at the same load (a replica can hold
a queue while another is idle). The metadata does not say which; the running counts do. Under a
pooling dispatch no replica runs much more than the mean; at random, the busiest runs about as
far above it as the largest of ``N`` draws of the Poisson scatter of a replica's count:

    spread = (busiest - mean) / (sqrt(mean) x e(N))    busiest: running on the busiest replica,
                                                       mean = running / ready
    e(N)   = the expected largest of N standard normal draws (Blom: Phi^-1((N - 3/8) / (N + 1/4)))

so ``spread`` is near 0 under a pooling dispatch and near 1 at random. It is averaged (over
``capacity_time_constant_s``) over steady refreshes with at least 2 Ready replicas and a
sequence each on average, with room (at the engines' cap every replica runs the cap, whatever the
dispatch: a random dispatch at its cap would read pooled), and the fleet is read as pooled while the
average is below
``DeciderParams.pooled_spread``. Until it is measured the fleet is taken as pooled where a router
that dispatches to the least loaded replica is named (``router: llm-d``) or while the busiest
replica's count may still come; where a steady fleet's running count is read but never the busiest
replica's (a stack read as sums only), each replica is taken as its own queue: a pooled queue is
the best case, which only a router gives, and assuming it there sizes a Service's fleet short (on
the replay's random dispatch read as sums only: 95.5% within 2 s at 0.84x the clairvoyant,
BENCHMARKS.md).

*Example*: 6 Ready replicas run 96 sequences, 16 on average, the busiest 23: ``e(6) = 1.28``, so
``spread = 7 / (4 x 1.28) = 1.37``: random, each replica its own queue. Under a least-loaded
router the busiest runs 17: ``spread = 0.2``, pooled.
"""

from __future__ import annotations

import math
from statistics import NormalDist

from scaler.decider.capacity.saturation import Bound, Saturation
from scaler.decider.params import DeciderParams
from scaler.decider.stages import Stages
from scaler.model import Observation

_NORMAL = NormalDist()
# Blom's plotting position for the largest of n normal draws, Phi^-1((n - a) / (n + 1 - 2a)) with
# a = 3/8: within a percent of the exact expectation for every n (Blom, 1958).
BLOM_A = 0.375
# The fewest replicas whose loads can be compared: one replica is always its own busiest.
COMPARED = 2


def expected_largest(n: int) -> float:
    """The expected largest of ``n`` standard normal draws, by Blom's approximation (0 for one)."""
    return 0.0 if n < COMPARED else _NORMAL.inv_cdf((n - BLOM_A) / ((n - BLOM_A) + (1 - BLOM_A)))


class Dispatch:
    """Whether the dispatch pools the replicas (module docstring)."""

    def __init__(self, params: DeciderParams, stages: Stages, routed: bool = False) -> None:
        self.params = params
        self.stages = stages
        self.routed = routed  # a router that sends each request to the least loaded replica is named
        self.spread: float | None = None
        self.samples = 0
        self.unread = False  # a steady fleet's running was read, never its busiest replica's

    @property
    def pooled(self) -> bool | None:
        """True where the fleet behaves as one queue, False where each replica is its own, None until
        known (the load signal then pools; module docstring)."""
        if not self.stages.dispatch_model:
            return None
        if self.spread is not None:
            return self.spread < self.params.pooled_spread
        if self.routed:
            return True
        return False if self.unread else None

    def observe(self, obs: Observation, saturation: Saturation, weight: float) -> None:
        """Learn from one steady refresh with room (requests do not wait on every replica) where the
        busiest replica's running count is read; ``weight`` is its share of the time constant. At the
        engines' cap every replica runs the cap, however the requests were dispatched: such a refresh
        says nothing of the dispatch."""
        ready, running, busiest = obs.ready_replicas, obs.requests_running, obs.requests_running_max
        if not (saturation.steady and saturation.drained and ready and ready >= COMPARED):
            return
        if saturation.bound is not Bound.ROOM:
            return
        if running is None or running < ready:
            return
        if busiest is None:
            self.unread = self.spread is None
            return
        mean = running / ready
        spread = (busiest - mean) / (math.sqrt(mean) * expected_largest(ready))
        self.spread = spread if self.spread is None else self.spread + weight * (spread - self.spread)
        self.samples += 1
