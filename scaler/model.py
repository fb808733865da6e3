"""Typed values shared by every layer: what the engine observes and what it decides.

Everything here is a frozen dataclass: decisions are values that can be compared,
printed, logged and exported without knowing where they came from.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Literal, TypeVar


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
    HPA_TOLERANCE = "hpa_tolerance"  # a step the HPA's tolerance swallows, beyond the room to step past it


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


CapacitySource = Literal["configured", "measured", "unknown"]


@dataclass(frozen=True, slots=True)
class Capacity:
    """What one Ready replica holds, as the load signal used it, and where each figure came from
    (``scaler.capacity``): its prefill rate and its batch slots."""

    prefill_tokens_per_s: float | None  # prompt tokens/s one replica computes; None: unknown
    slots: float | None  # sequences one replica runs at once (max_num_seqs or what its KV cache holds)
    prefill_source: CapacitySource = "unknown"
    slots_source: CapacitySource = "unknown"
    prefill_samples: int = 0  # refreshes that measured the prefill rate
    slots_samples: int = 0  # refreshes that measured the slots
    # How much a replica's prefill slows its decoding: 0 when they do not compete, 1 when they
    # add as GPU time (scaler.capacity); None until the refreshes have shown it.
    decode_slowdown: float | None = None
    # The sequences per replica whose inter-token latency meets itlObjectiveSeconds (scaler.capacity);
    # None without the objective or until the refreshes have shown how the latency grows.
    itl_slots: float | None = None

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
        if self.decode_slowdown is not None:
            parts.append(f"prefill slows decoding by {self.decode_slowdown:.2f} of its busy share")
        if self.itl_slots is not None:
            parts.append(f"{self.itl_slots:,.0f} sequences within the ITL objective")
        return "per replica: " + ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """The capacity as a JSON object."""
        return {
            "prefill_tokens_per_s": self.prefill_tokens_per_s,
            "slots": self.slots,
            "prefill_source": self.prefill_source,
            "slots_source": self.slots_source,
            "prefill_samples": self.prefill_samples,
            "slots_samples": self.slots_samples,
            "decode_slowdown": self.decode_slowdown,
            "itl_slots": self.itl_slots,
        }


@dataclass(frozen=True, slots=True)
class Lead:
    """How far ahead a decision orders replicas (the cold start) and where that came from:
    ``configured``, ``measured p90 over N pods`` or ``default`` (scaler.coldstart)."""

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
    reason: str  # "landed", or why not (scaler.landing)
    since_s: float  # how long the gap has lasted
    explanation: str

    def to_json(self) -> dict[str, Any]:
        """The landing as a JSON object."""
        return {
            "landed": self.landed,
            "ready": self.ready,
            "target": self.target,
            "gap": self.gap,
            "reason": self.reason,
            "since_s": self.since_s,
            "explanation": self.explanation,
        }


K = TypeVar("K")
V = TypeVar("V")


def _frozen(mapping: Mapping[K, V] | None) -> Mapping[K, V]:
    return MappingProxyType(dict(mapping or {}))


class InputSource(StrEnum):
    """Where an observation input comes from."""

    PROMETHEUS = "prometheus"  # the engine's metrics, through the preset's (or custom) queries
    KUBERNETES = "kubernetes"  # the workload's pods, Deployment and HPA, through the API


@dataclass(frozen=True, slots=True)
class InputSpec:
    """One observation input, as every layer needs to know it.

    ``series``: the ``llm_scaler_input_*`` gauge that exports it (None: not exported as an
    input); ``help``: that gauge's help, which doubles as the input's description;
    ``custom_query``: the ``TargetPolicy`` field holding its PromQL under ``engine: custom``;
    ``count``: a whole number (validated ``>= 0``) rather than a finite float ``>= 0``;
    ``replica_state``: defaults to 0 and is exported only with the replica counts;
    ``doc``: what docs/metrics.md says after the help (generated from this table).
    """

    series: str | None
    help: str
    source: InputSource
    custom_query: str | None = None
    count: bool = False
    replica_state: bool = False
    doc: str = ""


def _input(
    series: str | None,
    help: str,
    source: InputSource,
    custom_query: str | None = None,
    count: bool = False,
    replica_state: bool = False,
    default: Any = None,
    doc: str = "",
) -> Any:
    """An Observation field that is an input: its row of the input table (``INPUTS``)."""
    spec = InputSpec(series, help, source, custom_query, count, replica_state, doc)
    return field(default=default, metadata={"input": spec})


_P, _K = InputSource.PROMETHEUS, InputSource.KUBERNETES


@dataclass(frozen=True, slots=True)
class Observation:
    """What is known about one target at one instant.

    ``None`` means unknown (the source had no data); it is never read as zero.
    ``missing`` says why a field is unknown, keyed by field name. Each input field carries
    its row of the input table (``INPUTS``): the series that exports it, its help, where it
    comes from, its custom query key and whether it is a count. Adding an input is adding a
    field here and reading it in its source (``sources/``); validation, the exported series,
    the custom queries, the observation file's fields and docs/metrics.md's input table
    (``./dev docs`` writes it) follow from the row.
    """

    now: datetime
    queue_waiting: float | None = _input(
        "llm_scaler_input_waiting_requests", "Requests waiting in the servers' queues.", _P, "queue_query"
    )
    requests_running: float | None = _input(
        "llm_scaler_input_running_requests", "Requests the servers are running.", _P, "running_query"
    )
    prompt_tokens_per_s: float | None = _input(
        "llm_scaler_input_prompt_tokens_per_second",
        "Prompt (prefill) tokens per second across the servers.",
        _P,
        "prompt_tokens_query",
    )
    generation_tokens_per_s: float | None = _input(
        "llm_scaler_input_generation_tokens_per_second",
        "Generated (decode) tokens per second across the servers.",
        _P,
        "generation_tokens_query",
    )
    current_replicas: int | None = _input(
        "llm_scaler_input_current_replicas",
        "Replicas of the workload (pods that exist).",
        _K,
        count=True,
        doc="Pending ones included.",
    )
    ready_replicas: int | None = _input(
        "llm_scaler_input_ready_replicas", "Replicas whose pods are Ready.", _K, count=True
    )
    gpu_schedulable_replicas: int | None = _input(
        "llm_scaler_input_gpu_schedulable_replicas",
        "More whole replicas the nodes' free GPUs can still hold.",
        _K,
        count=True,
    )
    pending_replicas: int = _input(
        "llm_scaler_input_pending_replicas",
        "Replicas whose pods are Pending (not bound).",
        _K,
        count=True,
        replica_state=True,
        default=0,
    )
    starting_replicas: int = _input(
        "llm_scaler_input_starting_replicas",
        "Replicas bound to a node but not Ready yet (capacity on its way).",
        _K,
        count=True,
        replica_state=True,
        default=0,
    )
    ttft_p95_seconds: float | None = _input(
        "llm_scaler_input_ttft_p95_seconds", "Time to first token, 95th percentile.", _P, "ttft_p95_query"
    )
    ttft_p99_seconds: float | None = _input(
        "llm_scaler_input_ttft_p99_seconds", "Time to first token, 99th percentile.", _P, "ttft_p99_query"
    )
    ttft_over_objective: float | None = _input(
        "llm_scaler_input_ttft_over_objective_ratio",
        "Share of the rate window's first tokens slower than ttftObjectiveSeconds, 0 to 1.",
        _P,
        doc="From the TTFT histogram's buckets (exact at the bucket bounds, log-linear between them;"
        " `scaler/histogram.py`). What the load model's bias is measured against. Absent for `engine: custom`"
        " (its queries give quantiles only).",
    )
    ttft_mean_seconds: float | None = _input(
        "llm_scaler_input_ttft_mean_seconds",
        "Mean time to first token over the rate window (the TTFT histogram's sum over its count).",
        _P,
        doc="What the prefill rate per replica is measured from (`scaler/capacity.py`). Absent for"
        " `engine: custom` and engines without a TTFT histogram.",
    )
    requests_per_s: float | None = _input(
        "llm_scaler_input_requests_per_second",
        "Requests per second whose first token came in the rate window (the TTFT histogram's count).",
        _P,
        doc="With the queue's growth, the requests offered to the fleet (`scaler/demand.py`).",
    )
    kv_cache_usage: float | None = _input(
        "llm_scaler_input_kv_cache_usage_ratio", "KV cache usage, 0 to 1.", _P, "kv_cache_query"
    )
    itl_mean_seconds: float | None = _input(
        "llm_scaler_input_itl_mean_seconds",
        "Mean inter-token latency over the rate window (the ITL histogram's sum over its count).",
        _P,
        doc="vLLM's `vllm:inter_token_latency_seconds` (the older `vllm:time_per_output_token_seconds` where"
        " only it exists), SGLang's `sglang:inter_token_latency_seconds`, Dynamo's"
        " `dynamo_frontend_inter_token_latency_seconds`. What the batch the ITL objective allows is learned"
        " from (`scaler/capacity.py`).",
    )
    itl_tail_seconds: float | None = _input(
        "llm_scaler_input_itl_tail_seconds",
        "Inter-token latency at the objective's percentile (ttftObjectivePercentile), from its histogram.",
        _P,
    )
    itl_over_objective: float | None = _input(
        "llm_scaler_input_itl_over_objective_ratio",
        "Share of the rate window's inter-token gaps slower than itlObjectiveSeconds, 0 to 1.",
        _P,
        doc="Absent without `itlObjectiveSeconds`.",
    )
    router_queue_waiting: float | None = _input(
        "llm_scaler_input_router_waiting_requests",
        "Requests waiting in the router's queue, not yet sent to a server (router metadata).",
        _P,
        doc="llm-d's flow-control queue (`llm_d_epp_flow_control_queue_size`, or the older"
        " `inference_extension_flow_control_queue_size` where only it exists) or Dynamo's KV router queue"
        " (`dynamo_frontend_router_queue_pending_requests`). Counted as waiting demand beside the servers'"
        " own queue. Absent with `router: none`.",
    )
    router_saturation: float | None = _input(
        "llm_scaler_input_router_saturation_ratio",
        "The router's pool saturation (llm-d flow control: 1 is where it stops dispatching).",
        _P,
        doc="`llm_d_epp_flow_control_pool_saturation`. Read only while"
        " `llm_d_epp_flow_control_stale_endpoints` is 0: stale endpoints read as saturated. At 1 or"
        " more every replica is full, which measures the batch slots (`scaler/capacity.py`).",
    )
    slots_per_replica: float | None = _input(
        "llm_scaler_input_slots_per_replica",
        "Sequences one replica runs at most (max_num_seqs), where the stack exports it.",
        _P,
        doc="Dynamo's `dynamo_frontend_model_max_num_seqs`; vLLM does not export it. The batch slots"
        " (`scaler/capacity.py`) are read from it, or from the KV cache where that says fewer.",
    )
    cold_start_seconds: float | None = _input(
        "llm_scaler_input_cold_start_seconds",
        "Measured cold start: p90 of the Deployment's recent pods' creation to Ready.",
        _K,
        doc="Over the 20 most recent pods that became Ready (`scaler/coldstart.py`). Absent until one pod"
        " is measured; needs Kubernetes.",
    )
    cold_start_pending_seconds: float | None = _input(
        "llm_scaler_input_cold_start_pending_seconds",
        "Measured time Pending: p90 of the recent pods' creation to scheduled (near 0 with the GPU check).",
        _K,
    )
    cold_start_samples: int = _input(
        "llm_scaler_input_cold_start_samples",
        "Recent pods the measured cold start rests on.",
        _K,
        count=True,
        default=0,
        doc="It replaces the default lead from 5.",
    )
    deployment_replicas: int | None = _input(
        None, "The Deployment's spec.replicas: what landed.", _K, count=True
    )
    hpa: HpaStatus | None = None  # the HPA KEDA created for the ScaledObject, when found
    hpa_read: bool = False  # the HPAs were read (a synced watch): hpa None then means there is none
    scaledobject_fallback: bool | None = None  # the ScaledObject's Fallback condition is True
    missing: Mapping[str, str] = field(default_factory=dict)

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

    @property
    def timestamp(self) -> float:
        """``now`` as Unix seconds."""
        return self.now.timestamp()

    def to_json(self) -> dict[str, Any]:
        """The fields that are set, as a JSON object (``now`` in ISO 8601)."""
        out: dict[str, Any] = {"now": self.now.isoformat()}
        for name in self.__dataclass_fields__:
            if name in ("now", "missing", "hpa"):
                continue
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.hpa is not None:
            out["hpa"] = self.hpa.to_json()
        if self.missing:
            out["missing"] = dict(self.missing)
        return out


# The input table: every Observation field that is an input, in field order, with its row.
INPUTS: Mapping[str, InputSpec] = MappingProxyType(
    {f.name: f.metadata["input"] for f in fields(Observation) if "input" in f.metadata}
)


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
    forecast: Mapping[str, float] = field(default_factory=dict)
    capacity: Capacity | None = None  # what one replica holds, as the load signal used it (scaler.capacity)
    lead: Lead | None = None  # the cold start it ordered ahead by (scaler.coldstart)
    landing: Landing | None = None  # whether the previous target landed (scaler.landing)
    # Unix seconds when every demand input was last present, as of this decision (None: never).
    inputs_complete_at: float | None = None

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise ValueError("a decision never targets fewer than one replica")
        object.__setattr__(self, "proposals", _frozen(self.proposals))
        object.__setattr__(self, "signal_reasons", _frozen(self.signal_reasons))
        object.__setattr__(self, "forecast", _frozen(self.forecast))

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
        """Replicas the GPU inventory clamp removed from the target."""
        return sum(c.held_back for c in self.clamps if c.kind is ClampKind.GPU_INVENTORY)

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
            "forecast": dict(self.forecast),
            "capacity": None if self.capacity is None else self.capacity.to_json(),
            "lead": None if self.lead is None else {"seconds": self.lead.seconds, "source": self.lead.source},
            "landing": None if self.landing is None else self.landing.to_json(),
            "reason": self.reason,
            "inputs": self.observation.to_json(),
        }
