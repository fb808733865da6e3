"""The cold start the replay's pods take: measured from the Deployment's pods, configured, or the default.

A simulated pod is Pending until its GPUs are free (the replay models that wait itself), then
starting for ``cold_start_s``, then Ready. So what is measured is what a real pod took once it
had a node, ``Ready - PodScheduled`` (``Ready - created`` where the scheduling time is
unknown; ``scaler.decider.coldstart.startup_times``), over the Deployment's current pods that are
Ready (the 20 most recently created at most). One cold start stands for every replayed pod,
so the replay takes the **median**: the typical pod, which one slow pull or one pod whose
readiness flapped (its Ready time is its last change) does not move; the p90 and the range
are reported beside it. The scaler's own lead is the p90 (it orders for the slow ones); the
replay's fleet needs the typical start.

Which one runs, first that applies:

1. ``cold_start_s`` written in ``--cluster``: configured, as a configured number always wins
   (the measurement, when there is one, is reported and not used);
2. ``--kubeconfig`` and at least one Ready pod of the ScaledObject's Deployment: measured;
3. with ``--prometheus``, the Deployment's pods that kube-state-metrics recorded over the span
   (``scaler.sources.kube_state``: gone ones too, each from scheduled to Ready): measured from
   the history (``with_recorded``);
4. otherwise ``ClusterConfig``'s default, 180 s.

Each choice says which it is, and a ``limit`` line how it limits the replay: the cold start
sets how early a replica must be ordered, so every policy's latency depends on it.

*Example*: pods that took 180, 200, 210, 240, 260, 280 and 300 s from scheduled to Ready
give a cold start of 240 s (the median of seven), p90 288 s, range 180-300 s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from scaler.decider.coldstart import MIN_SAMPLES, WINDOW, quantile

MIN_COLD_START_S = 1.0  # a pod Ready the second it was scheduled: the fleet's model needs a start > 0
Source = Literal["configured", "measured", "history", "default"]
WHY_IT_MATTERS = "it sets how early a replica must be ordered, so every policy's latency depends on it"


@dataclass(frozen=True)
class ColdStartChoice:
    """The cold start the replay runs with, where it came from, and what the pods measured."""

    seconds: float
    source: Source
    said: str  # one line: which cold start, and from what
    limits: tuple[str, ...]  # how that limits the replay, one line each
    deployment: str = ""  # namespace/name, when its pods were read
    pods: int = 0  # pods measured
    median_s: float | None = None
    p90_s: float | None = None
    fastest_s: float | None = None
    slowest_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The choice for summary.json."""
        return {
            "seconds": self.seconds,
            "source": self.source,
            "deployment": self.deployment or None,
            "pods_measured": self.pods,
            "median_s": self.median_s,
            "p90_s": self.p90_s,
            "range_s": None if self.fastest_s is None else [self.fastest_s, self.slowest_s],
        }


def choose(
    configured_s: float | None,
    default_s: float,
    deployment: str = "",
    startups: Sequence[float] | None = None,
    problem: str | None = None,
) -> ColdStartChoice:
    """The cold start to replay with (the module's order).

    ``startups`` are the measured pods' starts (None when no kubeconfig was given), ``problem``
    why the Deployment's pods could not be read.
    """
    measured = list(startups or ())
    median = quantile(measured, 0.5)
    found: dict[str, Any] = {}
    seen = ""
    if median is not None:
        found = {
            "deployment": deployment,
            "pods": len(measured),
            "median_s": median,
            "p90_s": quantile(measured, 0.9),
            "fastest_s": min(measured),
            "slowest_s": max(measured),
        }
        seen = (
            f"the median of {len(measured)} pod(s) of Deployment {deployment} from scheduled to Ready"
            f" (p90 {found['p90_s']:g}s, {found['fastest_s']:g}-{found['slowest_s']:g}s)"
        )
    if configured_s is not None:
        also = f"; measured {median:g}s, {seen}, not used" if median is not None else ""
        limit = (
            f"the cold start is --cluster's cold_start_s {configured_s:g}s, not measured{also}"
            + (": delete cold_start_s to replay with the measurement" if median is not None else "")
            + f"; {WHY_IT_MATTERS}"
        )
        return ColdStartChoice(
            configured_s,
            "configured",
            f"cold start {configured_s:g}s: cold_start_s in --cluster",
            (limit,),
            **found,
        )
    if median is not None:
        seconds = max(MIN_COLD_START_S, median)
        few = (
            f"; only {len(measured)} pod(s), fewer than {MIN_SAMPLES}: it may not be typical"
            if len(measured) < MIN_SAMPLES
            else ""
        )
        limit = (
            f"every replayed pod starts in {seconds:g}s, the median of the pods of Deployment {deployment}"
            f" Ready now{few}: pods gone since are not measured, and a pod whose readiness changed after"
            " it started counts from its last change"
        )
        return ColdStartChoice(
            seconds, "measured", f"cold start {seconds:g}s: measured, {seen}", (limit,), **found
        )
    if problem is not None:
        why = f"the Deployment's pods could not be read ({problem})"
    elif startups is not None:
        why = f"no pod of Deployment {deployment} is Ready, so none could be measured"
    else:
        why = (
            "not measured: --kubeconfig measures it from the Deployment's pods, or set cold_start_s"
            " in --cluster"
        )
    limit = f"the cold start is the default {default_s:g}s; {why}; {WHY_IT_MATTERS}"
    return ColdStartChoice(
        default_s, "default", f"cold start {default_s:g}s: the default", (limit,), deployment=deployment
    )


def with_recorded(
    choice: ColdStartChoice,
    deployment: str,
    startups: Sequence[float] | None,
    problem: str | None = None,
) -> ColdStartChoice:
    """``choice``, or where it is the default, the cold start of the pods kube-state-metrics
    recorded in the history (the module's third rule). ``startups`` are theirs (None: not read),
    ``problem`` why they could not be read. A choice already configured (their median then said,
    not used) or measured is kept."""
    measured = list(startups or ())
    median = quantile(measured, 0.5)
    if choice.source == "configured" and median is not None and choice.limits:
        unused = f"; the pods kube-state-metrics recorded in the history measured {median:g}s, not used"
        return dataclasses.replace(choice, limits=(choice.limits[0] + unused, *choice.limits[1:]))
    if choice.source != "default":
        return choice
    if median is None:
        if problem is not None:
            why = f"kube-state-metrics' pods could not be read from the history ({problem})"
        elif startups is not None:
            why = f"kube-state-metrics recorded no Ready pod of Deployment {deployment} in the span"
        else:
            return choice
        limit = f"{choice.limits[0]}; {why}" if choice.limits else why
        return dataclasses.replace(choice, limits=(limit, *choice.limits[1:]))
    seconds = max(MIN_COLD_START_S, median)
    p90 = quantile(measured, 0.9)
    few = (
        f"; only {len(measured)} pod(s), fewer than {MIN_SAMPLES}: it may not be typical"
        if len(measured) < MIN_SAMPLES
        else ""
    )
    seen = (
        f"the median of {len(measured)} pod(s) of Deployment {deployment} kube-state-metrics recorded,"
        f" from scheduled to Ready (p90 {p90:g}s, {min(measured):g}-{max(measured):g}s)"
    )
    limit = (
        f"every replayed pod starts in {seconds:g}s, the median of the newest pods (at most {WINDOW}) of"
        f" Deployment {deployment} that kube-state-metrics recorded over the span{few}: a pod whose"
        " readiness changed after it started counts from its last change"
    )
    return ColdStartChoice(
        seconds,
        "history",
        f"cold start {seconds:g}s: measured from the history, {seen}",
        (limit,),
        deployment,
        len(measured),
        median,
        p90,
        min(measured),
        max(measured),
    )
