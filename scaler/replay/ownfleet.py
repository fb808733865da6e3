"""The replay checked against what ran, before it judges (issue 36, item 1).

``scaler replay --prometheus`` replays what-ifs (this scaler, the KEDA baseline, the clairvoyant)
through a model of one replica (``scaler.replay.replica``). Before any of them, the fleet as it
actually ran is replayed through the same model: the Ready replicas the history holds per window
(pods reporting), each ordered one cold start before the window that had it so that it is Ready
then, and removed when neither that window nor the next cold start's has it (``AsRanPolicy``).
The replica model is then all that differs from what ran, so what it replays is set beside what the
history measured: the share of first tokens within the objective, the TTFT mean (and the replay's
p95), the requests served, over the windows with data (the gaps' interpolated requests left out,
as the measured count leaves them out).

Where the share differs by more than ``POINTS`` percentage points, the report says so first, names
the replica's figures that are the cluster model's defaults rather than measured (the likeliest
cause), and marks every row of the table as computed from that model: a verdict that contradicts
the measured week is not printed as if it were sound.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from scaler.replay.fleet.cluster import ClusterConfig
from scaler.replay.history import Measured
from scaler.replay.policies import TickInputs
from scaler.replay.replay import run
from scaler.replay.report import Figures
from scaler.replay.trace import Trace

POINTS = 1.0  # percentage points of attainment beyond which the replica model does not reproduce the fleet
# The replica's figures that set its latency (scaler.replay.replica.LABELS): a default among them is
# named as the likeliest cause (GPUs per replica sets the cost only).
LATENCY_FIGURES = ("prefill", "batch slots", "decode", "physics")
NAME = "your fleet, as it ran"
MARK = " *"  # after a table row's policy when the model is off


class AsRanPolicy:
    """The replicas the history held per window of ``window_s`` (module docstring)."""

    def __init__(self, pods: Sequence[float], window_s: float, lead_s: float, max_replicas: int) -> None:
        self.name = NAME
        self.min_replicas = 1
        self.pods = [max(1, round(p)) for p in pods] or [1]
        self.max_replicas = max(max_replicas, *self.pods)
        self.window_s, self.lead_s = window_s, lead_s

    def need_at(self, t: float) -> int:
        """The replicas the history held in the window of ``t`` (the first before it, the last after)."""
        return self.pods[min(max(0, int(t // self.window_s)), len(self.pods) - 1)]

    def tick(self, tick: TickInputs) -> int:
        """What the history holds now, or one cold start on, whichever is more."""
        t = tick.now_s
        return max(self.need_at(t), self.need_at(t + self.lead_s))


@dataclass(frozen=True)
class OwnFleet:
    """What the history measured and what the replica model replays of the fleet as it ran."""

    objective_s: float
    measured_within: float | None
    replayed_within: float
    measured_mean_s: float | None
    replayed_mean_s: float
    replayed_p95_s: float
    measured_served: float
    replayed_served: int
    defaults: tuple[str, ...]  # the replica's figures left at the cluster model's defaults

    @property
    def off_by(self) -> float | None:
        """Replayed minus measured share within the objective, in percentage points (None: not measured)."""
        if self.measured_within is None:
            return None
        return 100 * (self.replayed_within - self.measured_within)

    @property
    def off(self) -> bool:
        """Whether the replica model does not reproduce the fleet as it ran."""
        return self.off_by is not None and abs(self.off_by) > POINTS

    def lines(self) -> list[str]:
        """The report's first lines: the warning where the model is off, then the two side by side."""
        out = []
        if self.off:
            assert self.off_by is not None
            assert self.measured_within is not None
            if self.defaults:
                cause = (
                    f"the replica's {', '.join(self.defaults)} {'is' if len(self.defaults) == 1 else 'are'}"
                    " the cluster model's default, not measured from your fleet"
                )
            else:
                cause = (
                    "every figure of the replica is measured or written; the model itself differs from"
                    " your fleet (its physics, the cold start, the routing)"
                )
            out.append(
                f"WARNING: the replica model does not reproduce your fleet: replayed as it ran,"
                f" {100 * self.replayed_within:.2f}% of first tokens within {self.objective_s:g}s against"
                f" {100 * self.measured_within:.2f}% measured ({self.off_by:+.2f} points); {cause}."
                f" Every row marked{MARK} is computed from this model, not a verdict on your fleet: give"
                " the replica's figures in --cluster (docs/replay.md)"
            )
        mean = "not read" if self.measured_mean_s is None else f"{self.measured_mean_s:.2f}s"
        within = "not read" if self.measured_within is None else f"{100 * self.measured_within:.2f}%"
        rows = [
            ("", "measured", "replayed"),
            (f"within {self.objective_s:g}s", within, f"{100 * self.replayed_within:.2f}%"),
            ("TTFT mean", mean, f"{self.replayed_mean_s:.2f}s"),
            ("TTFT p95", "not read", f"{self.replayed_p95_s:.2f}s"),
            ("served", f"{self.measured_served:,.0f}", f"{self.replayed_served:,}"),
        ]
        if self.off_by is None:
            verdict = "not checked (the TTFT histogram was not read)"
        elif self.off:
            verdict = f"OFF by {self.off_by:+.2f} points"
        else:
            verdict = f"within {POINTS:g} point ({self.off_by:+.2f})"
        out.append(
            f"own fleet: the replicas the history holds replayed through the replica model, over the"
            f" windows with data: {verdict}"
        )
        out += [f"  {a:<12} {b:>12} {c:>12}" for a, b, c in rows]
        return out

    def to_json(self) -> dict[str, Any]:
        """The check for summary.json."""
        return {
            "objective_s": self.objective_s,
            "measured": {
                "within_objective": self.measured_within,
                "ttft_mean_s": self.measured_mean_s,
                "served": self.measured_served,
            },
            "replayed": {
                "within_objective": self.replayed_within,
                "ttft_mean_s": self.replayed_mean_s,
                "ttft_p95_s": self.replayed_p95_s,
                "served": self.replayed_served,
            },
            "off_by_points": self.off_by,
            "off": self.off,
            "defaults": list(self.defaults),
        }


def check(
    measured: Measured,
    trace: Trace,
    cluster: ClusterConfig,
    start: datetime,
    objective_s: float,
    defaults: Sequence[str],
    max_replicas: int,
) -> OwnFleet | None:
    """Replay the fleet as it ran (``measured.pods``) over ``trace`` through ``cluster`` and set it beside
    what ``measured`` holds; None where the history holds no pods reporting."""
    if measured.pods is None:
        return None
    policy = AsRanPolicy(measured.pods, measured.rates.window_s, cluster.cold_start_s, max_replicas)
    result = run(trace, cluster, policy, start, policy.pods[0])
    ttft, arrivals = result.ttft, result.arrivals
    seen = np.ones(len(arrivals), dtype=bool)
    for begin, length in measured.gaps:
        seen &= ~((arrivals >= begin) & (arrivals < begin + length))
    ttft = ttft[seen]
    served = arrivals[seen] + ttft <= result.horizon_s
    finite = ttft[np.isfinite(ttft)]
    return OwnFleet(
        objective_s=objective_s,
        measured_within=measured.within_objective,
        replayed_within=float(np.mean(ttft <= objective_s)) if len(ttft) else 1.0,
        measured_mean_s=measured.ttft_mean_s,
        replayed_mean_s=float(finite.mean()) if len(finite) else math.nan,
        replayed_p95_s=float(np.percentile(ttft, 95)) if len(ttft) else math.nan,
        measured_served=measured.served,
        replayed_served=int(np.count_nonzero(served)),
        defaults=tuple(d for d in defaults if d in LATENCY_FIGURES),
    )


def marked(rows: Sequence[Figures], own: OwnFleet | None) -> list[Figures]:
    """``rows`` for the table: each policy marked as the model's where ``own`` is off."""
    if own is None or not own.off:
        return list(rows)
    return [dataclasses.replace(r, policy=r.policy + MARK) for r in rows]
