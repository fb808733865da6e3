"""Held and not landed: the two reasons a target is inert that its own decisions show. Pure.

``scaler.inert`` names the reasons the sources show (no series, stale, not scraped, stranded); these
two are the decider's: ``InertMonitor``, one per target, which the engine runs on each decision.

``held``         for ``HELD_REFRESHES`` refreshes the target equalled the current replicas while the
                 offered demand moved beyond the HPA's tolerance since the hold began
``not_landed``   the landing monitor's gap has a reason the HPA's own rules do not explain
                 (``scaler.decider.landing.ALERTING``) and has lasted longer than one cold start
                 (``scaler.decider.landing.inert``)

**held**, the formula. With ``d`` the offered demand (requests/s offered, ``arrivals_per_s``; else
the prompt tokens/s) and ``d0`` its value at the first refresh of the hold:

    proportional = ceil(current x d / d0)       what an HPA reading the demand itself would ask
    moved        = proportional is outside the HPA's tolerance of current (scaler.hpa)
    held         = target == current for HELD_REFRESHES refreshes in a row that moved

A floor or pre-warm binding, or a clamp that changed the target (``maxReplicas``, the GPUs, the
HPA's tolerance), explains a hold and ends it. *Example*: 4 replicas held while the offered demand
goes from 2.0 to 2.6 requests/s: ``ceil(4 x 1.3) = 6``, 6/4 = 1.5 is outside 0.1: after 20 such
refreshes (5 minutes at the 15 s default) the target is ``held``.
"""

from __future__ import annotations

from dataclasses import replace

from scaler.decider.landing import inert as landing_inert
from scaler.decider.units import ceil_replicas
from scaler.hpa import tolerances, within_hpa_tolerance
from scaler.model import Decision, Inert, InertReason, Signal

# Refreshes the target may equal the current replicas while the demand moved beyond the HPA's
# tolerance before it is held: 5 minutes at the 15 s default refresh, longer than the one cold start
# (180 s by default) for which the load signal keeps the demand it planned.
HELD_REFRESHES = 20


def _demand(decision: Decision) -> tuple[float, str] | None:
    """The offered demand a decision read, and its unit: requests/s offered, else prompt tokens/s."""
    arrivals = decision.forecast.arrivals_per_s
    if arrivals is not None and arrivals > 0:
        return arrivals, "requests/s"
    prompt = decision.observation.prompt_tokens_per_s
    if prompt is not None and prompt > 0:
        return prompt, "prompt tokens/s"
    return None


def not_landed(decision: Decision) -> Inert | None:
    """not_landed: a landing gap the HPA's rules do not explain, lasting longer than one cold start
    (the landing monitor's rule, ``scaler.decider.landing.inert``)."""
    landing, lead = decision.landing, decision.lead
    if landing is None or lead is None or not landing_inert(landing, lead.seconds):
        return None
    return Inert(
        InertReason.NOT_LANDED,
        f"{landing.reason}: {landing.explanation} (longer than one cold start, {lead.seconds:.0f}s)",
    )


class InertMonitor:
    """Per target: whether its target has been held while the demand moved (module docstring), and
    every reason a decision is inert, put on the decision (``judge``)."""

    def __init__(self, refreshes: int = HELD_REFRESHES) -> None:
        self.refreshes = refreshes
        self._start: tuple[float, str] | None = None  # the demand at the hold's first refresh
        self._moved = 0  # refreshes in a row since then that moved beyond the tolerance

    def _reset(self) -> None:
        self._start, self._moved = None, 0

    def held(self, decision: Decision) -> Inert | None:
        """held, when this decision makes ``refreshes`` in a row (module docstring)."""
        current = decision.observation.current_replicas
        demand = _demand(decision)
        explained = decision.binding in (Signal.FLOOR, Signal.PREWARM) or any(
            c.before != c.after for c in decision.clamps
        )
        if not current or decision.replicas != current or explained or demand is None:
            self._reset()
            return None
        if self._start is None or self._start[1] != demand[1]:
            self._start, self._moved = demand, 0
            return None
        ratio = demand[0] / self._start[0]
        proportional = max(1, ceil_replicas(current * ratio))
        if proportional == current or within_hpa_tolerance(
            proportional, current, tolerances(decision.observation.hpa)
        ):
            self._moved = 0
            return None
        self._moved += 1
        if self._moved < self.refreshes:
            return None
        return Inert(
            InertReason.HELD,
            f"the target has equalled the current {current} replicas for {self._moved} refreshes while the"
            f" offered demand moved {ratio - 1:+.0%} ({self._start[0]:,.3g} to {demand[0]:,.3g} {demand[1]}):"
            f" an HPA reading it would ask {proportional}",
        )

    def judge(self, decision: Decision) -> Decision:
        """``decision`` with every reason it is inert: the sources' (its observation's), held, not_landed."""
        found = list(decision.observation.inert)
        for reason in (self.held(decision), not_landed(decision)):
            if reason is not None:
                found.append(reason)
        return replace(decision, inert=tuple(found)) if found else decision
