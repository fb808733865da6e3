"""The replica the replay's fleet is made of: each figure written in ``--cluster``, measured from the
history, configured in the ScaledObject, or the default, said with how sure a measurement is.

The figures are the cluster model's (``ClusterConfig``): ``prefill_tokens_per_s``,
``decode_slots``, ``decode_tokens_per_s_per_seq``, ``physics`` and ``gpus_per_replica`` (the cold
start has its own choice, ``scaler.replay.startup``). For each, the first that applies:

1. written in ``--cluster``: configured, as a configured number always wins;
2. measured from the history (``--prometheus``) over at least ``MIN_SAMPLES`` refreshes;
3. configured in the trigger's metadata (``promptTokensPerSecondPerReplica``, ``gpusPerReplica``);
4. ``ClusterConfig``'s default.

**Measured** as the decider measures a live fleet, by its own capacity model: an ``Engine`` of the
ScaledObject's trigger (its capacity keys left out, so that nothing configured is mixed in) is
warmed over the history's points one at a time (``Engine.warm``), and its ``Capacity`` record is
read after each (``scaler.decider.capacity``):

    prefill_tokens_per_s = Capacity.prefill_tokens_per_s   the prefill-time histogram, else the mean
                                                           TTFT while nobody waited (a lower bound)
    decode_slots         = Capacity.slots                  running over the KV cache's usage
    physics              = shared where Capacity.decode_slowdown >= 0.5, else separate
                           (the nearer of the cluster model's two: slowdown 1 and 0)

A figure's samples are the refreshes that measured it (the record's count), its spread the 10th
to 90th percentile of the estimate over the later half of the points since it was first measured
(how much it still moved). The decode rate of a sequence is not in the record; it is read from the
same points, by Little's law as ``scaler.decider.capacity`` reads it, where nobody waits:

    decoding = running - served x mean TTFT       sequences past their first token
    r        = (generated - served) / decoding    tokens after the first, per sequence and second
    decode_tokens_per_s_per_seq = median of r, divided by (1 - f) under shared physics, where
                                  f = prompt tokens/s / (ready x prefill): the replayed pod gives
                                  prefill that share of its GPU, as the measured one did

*Example*: 4 Ready replicas run 20 sequences while 1.2 requests/s get their first token in 0.3 s
on average and 276 tokens/s are generated: ``decoding = 20 - 1.2 x 0.3 = 19.64`` sequences, ``r =
(276 - 1.2) / 19.64 = 14.0`` tokens/s each. Under shared physics with 900-token prompts on a
3,000 tokens/s prefill, ``f = 1,080 / 12,000 = 0.09`` and the replayed rate is ``14.0 / 0.91 =
15.4``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from scaler.config import TargetPolicy
from scaler.decider.coldstart import quantile
from scaler.decider.engine import Engine
from scaler.model import Observation
from scaler.presets import NO_ROUTER
from scaler.replay.fleet.cluster import ClusterConfig

MIN_SAMPLES = 5  # refreshes (points) a measurement needs before it replaces a default or the trigger's
SHARED_SLOWDOWN = 0.5  # a measured slowdown at least this is nearer shared physics (1) than separate (0)
SPREAD = (0.1, 0.9)  # the quantiles of the estimate reported as its spread
MAX_PREFILL_SHARE = 0.9  # the share of a GPU prefill may take (as the cluster model caps it)
Source = Literal["configured", "measured", "trigger", "default"]
FIGURES = (
    "prefill_tokens_per_s",
    "decode_slots",
    "decode_tokens_per_s_per_seq",
    "physics",
    "gpus_per_replica",
)
LABELS = {
    "prefill_tokens_per_s": "prefill",
    "decode_slots": "batch slots",
    "decode_tokens_per_s_per_seq": "decode",
    "physics": "physics",
    "gpus_per_replica": "GPUs per replica",
}
HOW = {
    "prefill_tokens_per_s": "the decider's prefill reading, scaler/decider/capacity/prefill.py",
    "decode_slots": "the requests running against the KV cache's usage, scaler/decider/capacity/slots.py",
    "decode_tokens_per_s_per_seq": "tokens generated over the sequences decoding, by Little's law",
    "physics": "how much decoding slowed while prompts were computed, scaler/decider/capacity/slowdown.py",
}
TRIGGER_KEYS = {
    "prefill_tokens_per_s": "promptTokensPerSecondPerReplica",
    "gpus_per_replica": "gpusPerReplica",
}


@dataclass(frozen=True)
class Measurement:
    """One figure as the history measured it: its value, the samples, and the estimate's spread."""

    value: float | str
    samples: int
    spread: tuple[float, float] | None = None
    detail: str = ""  # what else the measurement says (the slowdown behind the physics)


@dataclass(frozen=True)
class MeasuredReplica:
    """What the history's points say of one replica (module docstring); a figure not measured is absent,
    with why in ``unmeasured``."""

    points: int
    figures: Mapping[str, Measurement] = field(default_factory=dict)
    unmeasured: Mapping[str, str] = field(default_factory=dict)


def _spread(estimates: Sequence[float]) -> tuple[float, float] | None:
    later = list(estimates[len(estimates) // 2 :])
    low, high = quantile(later, SPREAD[0]), quantile(later, SPREAD[1])
    return None if low is None or high is None else (low, high)


def _unconfigured(policy: TargetPolicy) -> TargetPolicy:
    """The trigger's policy without its capacity keys, so the engine measures from nothing, and
    without a router: the replayed pod is the server itself (a router in front is the cluster
    model's own, ``router``), not the share of its cache llm-d's flow control gives it."""
    return policy.model_copy(
        update={
            "prompt_tokens_per_second_per_replica": None,
            "generation_tokens_per_second_per_replica": None,
            "router": NO_ROUTER,
        }
    )


def _decode_rates(points: Sequence[Observation], prefill: float | None, shared: bool) -> list[float]:
    """Per point where nobody waits, a sequence's decode rate (module docstring)."""
    rates = []
    for p in points:
        ready, running, served, mean = (
            p.ready_replicas,
            p.requests_running,
            p.requests_per_s,
            p.ttft_mean_seconds,
        )
        generated, waiting = p.generation_tokens_per_s, p.queue_waiting
        if not (ready and running and served and mean is not None and generated) or waiting:
            continue
        if p.router_queue_waiting:
            continue
        decoding = running - served * mean
        if decoding < 1.0:
            continue
        r = (generated - served) / decoding
        if shared and prefill and p.prompt_tokens_per_s is not None:
            r /= 1.0 - min(MAX_PREFILL_SHARE, p.prompt_tokens_per_s / (ready * prefill))
        if r > 0 and math.isfinite(r):
            rates.append(r)
    return rates


def measure(points: Sequence[Observation], policy: TargetPolicy) -> MeasuredReplica:
    """The replica's figures the history's ``points`` (oldest first) measure (module docstring)."""
    engine = Engine(_unconfigured(policy).spec)
    prefill: list[float] = []
    slots: list[float] = []
    capacity = engine.capacity.capacity()
    for point in points:
        engine.warm((point,))
        capacity = engine.capacity.capacity()
        if capacity.prefill_source == "measured" and capacity.prefill_tokens_per_s:
            prefill.append(capacity.prefill_tokens_per_s)
        if capacity.slots_source == "measured" and capacity.slots:
            slots.append(capacity.slots)
    figures: dict[str, Measurement] = {}
    unmeasured: dict[str, str] = {}
    for name, values, samples in (
        ("prefill_tokens_per_s", prefill, capacity.prefill_samples),
        ("decode_slots", slots, capacity.slots_samples),
    ):
        if samples >= MIN_SAMPLES and values:
            figures[name] = Measurement(values[-1], samples, _spread(values))
        else:
            unmeasured[name] = f"measured at {samples} refresh(es), fewer than {MIN_SAMPLES}"
    slowdown = capacity.decode_slowdown
    if slowdown is not None:
        physics = "shared" if slowdown >= SHARED_SLOWDOWN else "separate"
        figures["physics"] = Measurement(physics, len(points), None, f"slowdown {slowdown:.2f}")
        shared = physics == "shared"
    else:
        unmeasured["physics"] = "the prefill's share of the replicas did not vary enough to show it"
        shared = True  # the default physics, which the decode rate is then read for
    prefill_now = capacity.prefill_tokens_per_s if "prefill_tokens_per_s" in figures else None
    rates = _decode_rates(points, prefill_now, shared)
    median = quantile(rates, 0.5)
    if median is not None and len(rates) >= MIN_SAMPLES:
        low, high = quantile(rates, SPREAD[0]), quantile(rates, SPREAD[1])
        spread = None if low is None or high is None else (low, high)
        figures["decode_tokens_per_s_per_seq"] = Measurement(median, len(rates), spread)
    else:
        unmeasured["decode_tokens_per_s_per_seq"] = (
            f"{len(rates)} point(s) with sequences decoding and nobody waiting, fewer than {MIN_SAMPLES}"
        )
    return MeasuredReplica(len(points), figures, unmeasured)


@dataclass(frozen=True)
class Figure:
    """One figure of the replica the replay runs, and where it came from."""

    name: str
    value: float | str
    source: Source
    said: str  # where from, in words
    samples: int = 0
    spread: tuple[float, float] | None = None

    def to_json(self) -> dict[str, Any]:
        """The figure for summary.json."""
        return {
            "value": self.value,
            "source": self.source,
            "samples": self.samples,
            "spread": None if self.spread is None else list(self.spread),
        }


@dataclass(frozen=True)
class ReplicaChoice:
    """The replica the replay runs: every figure with its source."""

    figures: tuple[Figure, ...]

    @property
    def overrides(self) -> dict[str, Any]:
        """The cluster model's keys to set."""
        return {f.name: f.value for f in self.figures}

    def lines(self) -> list[str]:
        """The ``replica:`` block of the report, a line a figure."""
        width = max(len(LABELS[f.name]) for f in self.figures)
        return [f"  {LABELS[f.name] + ':':<{width + 1}} {_value(f)}, {f.said}" for f in self.figures]

    def defaults(self) -> list[str]:
        """The figures left at the cluster model's default."""
        return [LABELS[f.name] for f in self.figures if f.source == "default"]

    def to_json(self) -> dict[str, Any]:
        """The figures for summary.json."""
        return {f.name: f.to_json() for f in self.figures}


def _value(f: Figure) -> str:
    return _shown(f.name, f.value)


def _shown(name: str, value: float | str) -> str:
    """A figure's value in words, with its unit."""
    if name == "prefill_tokens_per_s":
        return f"{float(value):,.0f} prompt tokens/s"
    if name == "decode_slots":
        return f"{float(value):,.0f} sequences at once"
    if name == "decode_tokens_per_s_per_seq":
        return f"{float(value):,.1f} tokens/s a sequence"
    return str(value)


def _number(name: str, value: float) -> float | int:
    """A measured value as the cluster model takes it (slots and GPUs are whole)."""
    if name == "decode_slots":
        return max(1, round(value))
    return value


def _measured_said(name: str, m: Measurement) -> str:
    spread = ""
    if m.spread is not None:
        fmt = ",.0f" if name == "prefill_tokens_per_s" else ",.1f"
        spread = f", p10-p90 {m.spread[0]:{fmt}}-{m.spread[1]:{fmt}}"
    if name == "physics":
        return f"measured from the history ({HOW[name]}: {m.detail})"
    unit = "refreshes" if name in ("prefill_tokens_per_s", "decode_slots") else "points"
    return f"measured from the history ({HOW[name]}; {m.samples:,} {unit}{spread})"


def choose(
    cluster: ClusterConfig,
    written: frozenset[str],
    policy: TargetPolicy,
    measured: MeasuredReplica | None,
) -> ReplicaChoice:
    """Each figure of the replica the replay runs (the module's order)."""
    default = ClusterConfig()
    figures = []
    for name in FIGURES:
        m = None if measured is None else measured.figures.get(name)
        trigger_key = TRIGGER_KEYS.get(name)
        trigger_value = None
        if name == "prefill_tokens_per_s":
            trigger_value = policy.prompt_tokens_per_second_per_replica
        elif name == "gpus_per_replica":
            trigger_value = policy.gpus_per_replica
        if name in written:
            also = ""
            if m is not None:
                also = f"; the history measured {_shown(name, m.value)}, not used (delete it to use that)"
            figures.append(Figure(name, getattr(cluster, name), "configured", f"{name} in --cluster{also}"))
        elif m is not None:
            value = m.value if isinstance(m.value, str) else _number(name, m.value)
            figures.append(Figure(name, value, "measured", _measured_said(name, m), m.samples, m.spread))
        elif trigger_value is not None:
            figures.append(Figure(name, trigger_value, "trigger", f"{trigger_key} in the trigger"))
        else:
            if measured is None:
                why = "a trace holds nothing to measure it from: --prometheus measures it from the history"
            elif name in measured.unmeasured:
                why = f"not measured: {measured.unmeasured[name]}"
            else:
                why = "the history does not hold it"
            where = f"{name} in --cluster" + (f" or {trigger_key} in the trigger" if trigger_key else "")
            figures.append(
                Figure(name, getattr(default, name), "default", f"the default ({why}; set it with {where})")
            )
    return ReplicaChoice(tuple(figures))
