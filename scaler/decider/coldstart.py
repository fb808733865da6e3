"""Cold start measured from the pods themselves: how long a new replica takes to serve. Pure.

A replica ordered now serves only after its cold start, so the scaler orders one cold start
ahead (the forecast horizon, the hold, the pre-warm lead). The cold start is a property of
the cluster (image pull, weights, warm-up; and any wait for a GPU), and every pod carries
its own: ``metadata.creationTimestamp``, and the ``lastTransitionTime`` of its
``PodScheduled`` and ``Ready`` conditions once they are True. Over the Deployment's most
recent pods that became Ready (at most ``WINDOW``):

    lead     = p90(Ready - created)          what a replica ordered now takes to serve
    pending  = p90(scheduled - created)      time waiting for a node (a GPU): ~0 when the GPU check works
    startup  = p90(Ready - scheduled)        image, weights and warm-up on the node

With ``coldStartSeconds`` unset (or ``auto``), the engine uses ``lead`` once at least
``MIN_SAMPLES`` pods have been measured, and 180 s until then; a configured number always
wins. Each decision says which (``configured``, ``measured p90 over N pods``, ``default``).
Percentiles interpolate linearly between order statistics (numpy's default).

*Example*: the last pods took 180, 200, 210, 240, 260, 280 and 300 s from creation to Ready,
each scheduled 2 s after it was created: ``lead`` = 288 s (the 0.9 quantile of seven
values: 40% of the way from 280 to 300), ``pending`` 2 s, ``startup`` 286 s.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

WINDOW = 20  # the most recent pods measured
MIN_SAMPLES = 5  # pods measured before the measurement replaces the configured or default lead
DEFAULT_LEAD_S = 180.0  # s: the lead with none configured or measured (a vLLM pod: image, weights, warm-up)
# The quantile of the measured pods a lead is read at: p90, so one slow pull in ten pods does not
# set the lead and most replicas ordered one lead ahead are Ready in time.
LEAD_QUANTILE = 0.9


@dataclass(frozen=True, slots=True)
class PodTimes:
    """When one pod was created, scheduled and became Ready (Unix seconds; None if not yet)."""

    name: str
    created_at: float | None
    scheduled_at: float | None
    ready_at: float | None


@dataclass(frozen=True, slots=True)
class ColdStart:
    """The cold start of a Deployment's recent pods."""

    samples: int
    lead_p90_s: float | None  # created -> Ready
    pending_p90_s: float | None  # created -> scheduled
    startup_p90_s: float | None  # scheduled -> Ready


NONE = ColdStart(0, None, None, None)


def quantile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile by linear interpolation between order statistics; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _recent(pods: Iterable[PodTimes], window: int) -> list[tuple[float, str, float, float | None]]:
    """(created, name, ready, scheduled) of the ``window`` most recently created pods that became Ready."""
    done: list[tuple[float, str, float, float | None]] = []
    for p in pods:
        if p.created_at is not None and p.ready_at is not None and p.ready_at >= p.created_at:
            done.append((p.created_at, p.name, p.ready_at, p.scheduled_at))
    return sorted(done)[-window:]


def measure(pods: Iterable[PodTimes], window: int = WINDOW) -> ColdStart:
    """p90s over the ``window`` most recently created pods that became Ready."""
    recent = _recent(pods, window)
    if not recent:
        return NONE
    leads = [ready - created for created, _, ready, _ in recent]
    pending = [max(0.0, at - created) for created, _, _, at in recent if at is not None]
    startup = [max(0.0, ready - at) for _, _, ready, at in recent if at is not None]
    q = LEAD_QUANTILE
    return ColdStart(len(recent), quantile(leads, q), quantile(pending, q), quantile(startup, q))


def startup_times(pods: Iterable[PodTimes], window: int = WINDOW) -> list[float]:
    """What each of the ``window`` most recently created pods that became Ready took once it had
    a node: Ready - scheduled, or Ready - created when its scheduling time is unknown.

    The replay's simulated pod waits for its GPUs itself, then starts for one cold start: this
    is that start. *Example*: created at 0, scheduled at 2, Ready at 182 -> 180 s.
    """
    return [
        ready - (created if at is None else max(created, at))
        for created, _, ready, at in _recent(pods, window)
    ]


def lead(configured: float | None, measured: ColdStart | None) -> tuple[float, str]:
    """The lead a decision uses and where it came from."""
    if configured is not None:
        return configured, "configured"
    if measured is not None and measured.samples >= MIN_SAMPLES and measured.lead_p90_s is not None:
        return max(1.0, measured.lead_p90_s), f"measured p90 over {measured.samples} pods"
    return DEFAULT_LEAD_S, "default"
