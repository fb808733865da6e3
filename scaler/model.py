"""Typed values shared by every layer: what the engine observes and what it decides.

Everything here is a frozen dataclass: decisions are values that can be compared,
printed, logged and exported without knowing where they came from.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Literal, TypeVar

from scaler.inputs import Input, InputSpec


class Signal(StrEnum):
    """The signals that propose a replica count. Ties go to the earliest here."""

    FLOOR = "floor"
    PREWARM = "prewarm"
    QUEUE = "queue"
    LOAD = "load"
    LAST_KNOWN = "last_known"


class ClampKind(StrEnum):
    """What can limit the proposed target, applied in this order."""

    MAX = "max"
    GPU_INVENTORY = "gpu_inventory"
    KUEUE_QUOTA = "kueue_quota"
    FLOOR_OVER_GPU = "floor_over_gpu"
    GPU_UNKNOWN_HOLD = "gpu_unknown_hold"
    HPA_TOLERANCE = "hpa_tolerance"


class NoteKind(StrEnum):
    """What a decision's note is about."""

    INPUTS_MISSING = "inputs_missing"  # a demand input is unknown now, and why
    INPUTS_AGE = "inputs_age"  # how long ago the inputs were last complete
    NOT_LANDED = "not_landed"  # the previous target has not landed, and why
    GPU_CHECK_SKIPPED = "gpu_check_skipped"  # the inventory is unknown and the check fails open
    GPU_CHECK_OFF = "gpu_check_off"  # gpuCheck=false
    HPA_TOLERANCE = "hpa_tolerance"  # the HPA's tolerance swallows a step; the one past it is beyond max
    KUEUE_QUOTA_UNKNOWN = "kueue_quota_unknown"  # Kueue admits the pods and their queue's quota is unknown


class Note(str):
    """A decision's caveat: its text, typed by ``kind``. It is the text wherever a string is
    expected (logs, the dry-run line, JSON), so a reader matches on ``kind``, not on words.

    *Example*: ``Note(NoteKind.GPU_CHECK_OFF, "GPU check off (gpuCheck=false)")``.
    """

    kind: NoteKind

    def __new__(cls, kind: NoteKind, text: str) -> Note:
        """A note of ``kind`` whose string value is ``text``."""
        note = super().__new__(cls, text)
        note.kind = kind
        return note

    def __reduce__(self) -> tuple[Any, ...]:
        return (Note, (self.kind, str(self)))


class InertReason(StrEnum):
    """Why a target's autoscaler cannot act though it looks healthy (``scaler.inert``), in the order
    they are looked for."""

    NO_SERIES = "no_series"  # the selector matches no series while the Deployment has Ready pods
    STALE = "stale"  # the series exist, their last sample older than two scrape intervals
    NOT_SCRAPED = "not_scraped"  # the engine's pods are not scraped: up == 0, or no target for them
    STRANDED = "stranded"  # a router series stranded on pods that no longer exist
    STUCK = "stuck"  # a pod's engine admits nothing while healthy: its queue is not counted as demand
    HELD = "held"  # the target held at the current replicas while the demand it reads moved
    NOT_LANDED = "not_landed"  # the HPA does not land what was asked (scaler.decider.landing)


@dataclass(frozen=True, slots=True)
class Inert:
    """One reason a target cannot act: its kind, the cause in words, and the inputs it leaves unknown.

    *Example*: ``Inert(InertReason.STALE, "last sample 480s ago, over two scrape intervals (120s)",
    ("queue_waiting", "prompt_tokens_per_s"))``.
    """

    reason: InertReason
    text: str
    inputs: tuple[str, ...] = ()

    def __str__(self) -> str:
        named = f" ({', '.join(self.inputs)})" if self.inputs else ""
        return f"{self.reason.value}{named}: {self.text}"

    def to_json(self) -> dict[str, Any]:
        """The reason as a JSON object (``from_json`` reads it back)."""
        return {"reason": self.reason.value, "text": self.text, "inputs": list(self.inputs)}

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> Inert:
        """The inverse of to_json (an observation log read back); ValueError on a wrong shape."""
        try:
            return cls(
                InertReason(row["reason"]), str(row["text"]), tuple(str(i) for i in row.get("inputs") or ())
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            kinds = ", ".join(InertReason)
            raise ValueError(f"inert: {row!r} is not a reason ({kinds}) with a text") from None


# Where a capacity figure came from: the metadata's number, the refreshes, the engine's own figure
# before any refresh measured it (the slots from its KV cache's size), or nowhere.
CapacitySource = Literal["configured", "measured", "exported", "unknown"]


@dataclass(frozen=True, slots=True)
class Capacity:
    """What one Ready replica holds, configured or measured, and where each figure came from
    (``scaler.decider.capacity``): its prefill rate and its batch slots. The load signal sizes with
    the figures times the capacity scale (``scaler.decider.calibration.scaled``)."""

    prefill_tokens_per_s: float | None  # prompt tokens/s one replica computes; None: unknown
    slots: float | None  # sequences one replica runs at once (max_num_seqs or what its KV cache holds)
    prefill_source: CapacitySource = "unknown"
    slots_source: CapacitySource = "unknown"
    prefill_samples: int = 0  # refreshes that measured the prefill rate
    slots_samples: int = 0  # refreshes that measured the slots
    # How much a replica's prefill slows its decoding: 0 when they do not compete, 1 when they
    # add as GPU time (scaler.decider.capacity); None until the refreshes have shown it.
    decode_slowdown: float | None = None
    # The sequences per replica whose inter-token latency meets itlObjectiveSeconds (scaler.decider.capacity);
    # None without the objective or until the refreshes have shown how the latency grows.
    itl_slots: float | None = None
    # How a replica's inter-token latency grows with the sequences it decodes, fitted (seconds, and
    # seconds per sequence; scaler.decider.capacity.itl); None until the refreshes have shown it grow.
    itl_base_s: float | None = None
    itl_per_sequence_s: float | None = None
    prefill_method: str = ""  # what the prefill rate was last read from (scaler.decider.capacity.prefill)
    slots_method: str = ""  # which reading binds the slots (scaler.decider.capacity.slots)
    saturation: str = "unsettled"  # why requests waited at this refresh (scaler.decider.capacity.saturation)
    # Whether the dispatch pools the replicas (one queue for the fleet), measured from how evenly
    # they are loaded (scaler.decider.capacity.dispatch); None until measured: sized as pooled.
    pooled: bool | None = None

    @property
    def known(self) -> bool:
        """Whether either resource's capacity is known (configured or measured)."""
        return self.prefill_tokens_per_s is not None or self.slots is not None

    def describe(self) -> str:
        """The capacity in words: per replica, and where each figure came from."""
        parts = []
        for value, unit, source, samples in (
            (self.prefill_tokens_per_s, "prompt tokens/s", self.prefill_source, self.prefill_samples),
            (self.slots, "slots", self.slots_source, self.slots_samples),
        ):
            if value is None:
                parts.append(f"{unit} unknown")
            else:
                where = f"measured over {samples} refreshes" if source == "measured" else source
                parts.append(f"{value:,.0f} {unit} ({where})")
        for label, method in (("prefill", self.prefill_method), ("slots", self.slots_method)):
            if method and method != "configured":
                parts.append(f"{label} from {method}")
        if self.decode_slowdown is not None:
            parts.append(f"prefill slows decoding by {self.decode_slowdown:.2f} of its busy share")
        if self.itl_slots is not None:
            parts.append(f"{self.itl_slots:,.0f} sequences within the ITL objective")
        if self.itl_base_s is not None and self.itl_per_sequence_s is not None:
            parts.append(
                f"inter-token latency {self.itl_base_s * 1000:.1f} ms"
                f" + {self.itl_per_sequence_s * 1000:.3f} ms a sequence decoding"
            )
        if self.pooled is False:
            parts.append("each replica its own queue (a dispatch that does not pool them)")
        return "per replica: " + ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """The capacity as a JSON object: every field, by its name."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class ForecastRecord:
    """What a decision forecast and sized on, each None where it was not computed: the offered
    requests/s (``scaler.decider.demand``); the prompt tokens/s and sequences in service planned one cold
    start ahead and their margins, the errors at the objective's percentile (0.2: 20%,
    ``scaler.decider.forecast``); the replicas busy now and at the horizon and the late share
    expected (``scaler.decider.signals.load``); the scale of the model's capacities the measured
    objective calibrated (``scaler.decider.calibration``)."""

    arrivals_per_s: float | None = None
    prompt_tokens_per_s: float | None = None
    prompt_tokens_per_s_margin: float | None = None
    concurrency: float | None = None
    concurrency_margin: float | None = None
    busy_replicas_now: float | None = None
    busy_replicas_at_horizon: float | None = None
    late_expected: float | None = None
    capacity_scale: float | None = None

    def to_json(self) -> dict[str, float]:
        """The figures computed (None left out), by field name."""
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}


@dataclass(frozen=True, slots=True)
class Lead:
    """How far ahead a decision orders replicas (the cold start) and where that came from:
    ``configured``, ``measured p90 over N pods`` or ``default`` (scaler.decider.coldstart)."""

    seconds: float
    source: str


@dataclass(frozen=True, slots=True)
class HpaStatus:
    """The HPA KEDA created for a ScaledObject, as the landing monitor and the policy read it (scaler.hpa)."""

    name: str
    namespace: str
    lists_metric: bool  # an External metric named ...<scaler.hpa.METRIC_NAME> is among spec.metrics
    other_metrics: int  # metrics that are not this scaler's (other triggers, or a CPU rewrite)
    min_replicas: int | None
    max_replicas: int | None
    current_replicas: int | None
    desired_replicas: int | None
    conditions: tuple[tuple[str, str, str], ...] = ()  # (type, status, reason)
    # spec.behavior.scaleUp/scaleDown.tolerance (KEP-4951); None: the cluster's default
    scale_up_tolerance: float | None = None
    scale_down_tolerance: float | None = None

    def to_json(self) -> dict[str, Any]:
        """Every field as JSON, conditions as lists (``from_json`` reads it back)."""
        out = {name: getattr(self, name) for name in self.__slots__}
        out["conditions"] = [list(c) for c in self.conditions]
        return out

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> HpaStatus:
        """The inverse of to_json (an observation log read back); TypeError on a wrong shape."""
        values = dict(row)
        values["conditions"] = tuple(tuple(str(x) for x in c) for c in values.get("conditions") or ())
        return cls(**values)


@dataclass(frozen=True, slots=True)
class Landing:
    """What the Deployment runs against the target the scaler decided one refresh earlier."""

    landed: int  # the Deployment's spec.replicas
    ready: int | None
    target: int  # the previous decision's target
    gap: int  # target - landed
    reason: str  # "landed", or why not (scaler.decider.landing)
    since_s: float  # how long the gap has lasted
    explanation: str

    def to_json(self) -> dict[str, Any]:
        """The landing as a JSON object: every field, by its name."""
        return asdict(self)


K = TypeVar("K")
V = TypeVar("V")


def _frozen(mapping: Mapping[K, V] | None) -> Mapping[K, V]:
    return MappingProxyType(dict(mapping or {}))


def _input(name: Input) -> Any:
    """An Observation field that is the input ``name``: its default and row come from the table."""
    return field(default=name.spec.default, metadata={"input": name})


@dataclass(frozen=True, slots=True)
class Observation:
    """What is known about one target at one instant.

    ``None`` means unknown (the source had no data); it is never read as zero.
    ``missing`` says why a field is unknown, keyed by field name. Each input field is a row of
    the input table (``scaler.inputs.Input``), whose name it must have (checked below, at
    import): the row says how it is validated, exported, queried under ``engine: custom`` and
    documented. Observations are built from what the sources read in one place
    (``scaler.readings``).
    """

    now: datetime
    queue_waiting: float | None = _input(Input.QUEUE_WAITING)
    requests_running: float | None = _input(Input.REQUESTS_RUNNING)
    prompt_tokens_per_s: float | None = _input(Input.PROMPT_TOKENS_PER_S)
    generation_tokens_per_s: float | None = _input(Input.GENERATION_TOKENS_PER_S)
    current_replicas: int | None = _input(Input.CURRENT_REPLICAS)
    ready_replicas: int | None = _input(Input.READY_REPLICAS)
    gpu_schedulable_replicas: int | None = _input(Input.GPU_SCHEDULABLE_REPLICAS)
    pending_replicas: int = _input(Input.PENDING_REPLICAS)
    starting_replicas: int = _input(Input.STARTING_REPLICAS)
    ttft_p95_seconds: float | None = _input(Input.TTFT_P95_SECONDS)
    ttft_p99_seconds: float | None = _input(Input.TTFT_P99_SECONDS)
    ttft_over_objective: float | None = _input(Input.TTFT_OVER_OBJECTIVE)
    ttft_mean_seconds: float | None = _input(Input.TTFT_MEAN_SECONDS)
    requests_per_s: float | None = _input(Input.REQUESTS_PER_S)
    requests_running_max: float | None = _input(Input.REQUESTS_RUNNING_MAX)
    kv_cache_usage_max: float | None = _input(Input.KV_CACHE_USAGE_MAX)
    prefill_busy_max: float | None = _input(Input.PREFILL_BUSY_MAX)
    queue_time_mean_seconds: float | None = _input(Input.QUEUE_TIME_MEAN_SECONDS)
    prefill_time_mean_seconds: float | None = _input(Input.PREFILL_TIME_MEAN_SECONDS)
    kv_cache_usage: float | None = _input(Input.KV_CACHE_USAGE)
    itl_mean_seconds: float | None = _input(Input.ITL_MEAN_SECONDS)
    itl_tail_seconds: float | None = _input(Input.ITL_TAIL_SECONDS)
    itl_over_objective: float | None = _input(Input.ITL_OVER_OBJECTIVE)
    router_queue_waiting: float | None = _input(Input.ROUTER_QUEUE_WAITING)
    router_saturation: float | None = _input(Input.ROUTER_SATURATION)
    slots_per_replica: float | None = _input(Input.SLOTS_PER_REPLICA)
    queue_waiting_capacity: float | None = _input(Input.QUEUE_WAITING_CAPACITY)
    queue_waiting_deferred: float | None = _input(Input.QUEUE_WAITING_DEFERRED)
    kv_cache_tokens: float | None = _input(Input.KV_CACHE_TOKENS)
    cold_start_seconds: float | None = _input(Input.COLD_START_SECONDS)
    cold_start_pending_seconds: float | None = _input(Input.COLD_START_PENDING_SECONDS)
    cold_start_samples: int = _input(Input.COLD_START_SAMPLES)
    deployment_replicas: int | None = _input(Input.DEPLOYMENT_REPLICAS)
    kueue_quota_replicas: int | None = _input(Input.KUEUE_QUOTA_REPLICAS)
    kueue_quota_reason: str | None = None  # how the Kueue quota was counted (the clamp's reason)
    hpa: HpaStatus | None = None  # the HPA KEDA created for the ScaledObject, when found
    hpa_read: bool = False  # the HPAs were read (a synced watch): hpa None then means there is none
    scaledobject_fallback: bool | None = None  # the ScaledObject's Fallback condition is True
    missing: Mapping[str, str] = field(default_factory=dict)
    # Why the sources found the target inert (its series absent, stale or unscraped; a router's
    # series stranded on pods that are gone): scaler.inert, from what Prometheus holds.
    inert: tuple[Inert, ...] = ()

    def __post_init__(self) -> None:
        if self.now.tzinfo is None or self.now.utcoffset() is None:
            raise ValueError("Observation.now must be timezone-aware")
        for name, spec in INPUTS.items():
            value = getattr(self, name)
            if value is None:
                continue
            if spec.count:
                if value < 0:
                    raise ValueError(f"Observation.{name} must be >= 0, got {value!r}")
            elif not math.isfinite(value) or value < 0:
                raise ValueError(f"Observation.{name} must be a finite number >= 0, got {value!r}")
        object.__setattr__(self, "missing", _frozen(self.missing))
        object.__setattr__(self, "inert", tuple(self.inert))

    @property
    def timestamp(self) -> float:
        """``now`` as Unix seconds."""
        return self.now.timestamp()

    def to_json(self) -> dict[str, Any]:
        """The fields that are set, as a JSON object (``now`` in ISO 8601)."""
        out: dict[str, Any] = {"now": self.now.isoformat()}
        for name in self.__dataclass_fields__:
            if name in ("now", "missing", "hpa", "inert"):
                continue
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.hpa is not None:
            out["hpa"] = self.hpa.to_json()
        if self.missing:
            out["missing"] = dict(self.missing)
        if self.inert:
            out["inert"] = [i.to_json() for i in self.inert]
        return out


def _check_fields() -> None:
    """The Observation's input fields are the table's inputs, by name and in order."""
    declared = [(f.name, f.metadata["input"]) for f in fields(Observation) if "input" in f.metadata]
    wrong = [f"{name} holds {member}" for name, member in declared if name != member]
    missing = [str(i) for i in Input if i not in {member for _, member in declared}]
    if wrong or missing or len(declared) != len(Input):
        raise TypeError(f"Observation's input fields differ from the input table: {wrong + missing}")


_check_fields()
# The input table's rows by input (in field order): what the layers iterate over.
INPUTS: Mapping[str, InputSpec] = MappingProxyType({i: i.spec for i in Input})


@dataclass(frozen=True, slots=True)
class Proposal:
    """One signal's answer: a replica count, or an abstention (``replicas is None``) with why."""

    signal: Signal
    replicas: int | None
    reason: str
    inputs: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", _frozen(self.inputs))


@dataclass(frozen=True, slots=True)
class Clamp:
    """A limit that changed (or would have changed) the target, with its reason."""

    kind: ClampKind
    before: int
    after: int
    reason: str

    @property
    def held_back(self) -> int:
        """Replicas the clamp removed from the target (0 when it raised it)."""
        return max(0, self.before - self.after)


@dataclass(frozen=True, slots=True)
class Decision:
    """The engine's answer for one target at one instant.

    ``replicas`` is always >= 1: the floor never reaches zero. ``binding`` is the
    signal whose proposal set the target before clamps; ``clamps`` lists every limit
    that then changed it. ``notes`` carries caveats (missing inputs, checks skipped).
    """

    now: datetime
    replicas: int
    binding: Signal
    proposals: Mapping[Signal, int]  # what each signal asked for (abstaining ones absent)
    signal_reasons: Mapping[Signal, str]
    clamps: tuple[Clamp, ...]
    notes: tuple[Note, ...]
    reason: str
    observation: Observation
    forecast: ForecastRecord = ForecastRecord()
    # What one replica holds, configured or measured (scaler.decider.capacity); the load signal
    # sized the fleet at it times ``forecast.capacity_scale`` (scaler.decider.calibration).
    capacity: Capacity | None = None
    lead: Lead | None = None  # the cold start it ordered ahead by (scaler.decider.coldstart)
    landing: Landing | None = None  # whether the previous target landed (scaler.decider.landing)
    # Unix seconds when every demand input was last present, as of this decision (None: never).
    inputs_complete_at: float | None = None
    inert: tuple[Inert, ...] = ()  # why the target cannot act, if it cannot (scaler.inert)

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise ValueError("a decision never targets fewer than one replica")
        object.__setattr__(self, "proposals", _frozen(self.proposals))
        object.__setattr__(self, "signal_reasons", _frozen(self.signal_reasons))
        object.__setattr__(self, "inert", tuple(self.inert))

    @property
    def limited_by(self) -> ClampKind | None:
        """The last clamp that changed the target, if any."""
        changed = [c for c in self.clamps if c.before != c.after]
        return changed[-1].kind if changed else None

    def input_age(self, now_timestamp: float, watched_since: float) -> float:
        """Seconds the inputs have been incomplete at ``now_timestamp``.

            age = now - inputs_complete_at          (now - watched_since while they never were)

        *Example*: inputs last complete at 1000, asked at 1045: 45 s; never complete for a target
        registered at 1000: 45 s too, so a source down from the start also goes stale.
        """
        since = self.inputs_complete_at if self.inputs_complete_at is not None else watched_since
        return max(0.0, now_timestamp - since)

    def stale(self, now_timestamp: float, watched_since: float, max_staleness_s: float) -> bool:
        """The validity rule: a decision whose inputs are older than ``maxStalenessSeconds`` is not
        served (KEDA's fallback applies instead)."""
        return self.input_age(now_timestamp, watched_since) > max_staleness_s

    @property
    def gpu_held_back(self) -> int:
        """Replicas the GPU inventory clamp removed from the target and the HPA's tolerance did not put
        back (a step past the tolerance may ask some of them again, to wait Pending)."""
        held = sum(c.held_back for c in self.clamps if c.kind is ClampKind.GPU_INVENTORY)
        stepped = sum(c.after - c.before for c in self.clamps if c.kind is ClampKind.HPA_TOLERANCE)
        return max(0, held - max(0, stepped))

    def to_json(self) -> dict[str, Any]:
        """The decision as one JSON object: target, signals, clamps, notes and the inputs."""
        return {
            "time": self.now.isoformat(),
            "replicas": self.replicas,
            "binding": self.binding.value,
            "proposals": {s.value: n for s, n in self.proposals.items()},
            "signals": {s.value: why for s, why in self.signal_reasons.items()},
            "clamps": [
                {"kind": c.kind.value, "before": c.before, "after": c.after, "reason": c.reason}
                for c in self.clamps
            ],
            "notes": list(self.notes),
            "forecast": self.forecast.to_json(),
            "capacity": None if self.capacity is None else self.capacity.to_json(),
            "lead": None if self.lead is None else {"seconds": self.lead.seconds, "source": self.lead.source},
            "landing": None if self.landing is None else self.landing.to_json(),
            "inert": [i.to_json() for i in self.inert],
            "reason": self.reason,
            "inputs": self.observation.to_json(),
        }
