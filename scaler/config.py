"""The public contract: ScaledObject trigger metadata, parsed once, strictly.

KEDA sends every key of the trigger's ``metadata`` as strings. ``parse_metadata``
turns them into a frozen ``TargetPolicy`` or raises ``MetadataError`` listing every
bad key with its value and the rule it broke, which the gRPC layer maps to
``INVALID_ARGUMENT``.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from scaler.decider.engine import Engine
from scaler.decider.params import DEFAULT, DeciderParams
from scaler.decider.spec import DeciderSpec, Role, Window
from scaler.errors import InputError, rule_of
from scaler.inputs import Input
from scaler.matchers import LabelMatcher, MatchOp, SelectorError, parse_selector
from scaler.presets import CUSTOM_ENGINE, DEFAULT_ENGINE, NO_ROUTER, REGISTRY, Kind, choices, promql_problem
from scaler.roles import parse_role_label, role_matcher, role_problems

# Keys KEDA itself reads from the same trigger metadata; accepted and ignored here.
# Their values (addresses, certificate paths) are never logged.
KEDA_KEYS = frozenset(
    {"scalerAddress", "enableTLS", "unsafeSsl", "caCert", "tlsCertFile", "tlsClientCert", "tlsClientKey"}
)
FROM_ENV_SUFFIX = "FromEnv"
MAX_KEYS = 64
MAX_VALUE_LENGTH = 8192
MAX_WINDOWS = 16
MAX_REPLICAS_LIMIT = 10_000
MAX_COLD_START_SECONDS = 3600.0
MAX_QUERY_LENGTH = 2048
# The router whose endpoint picker gates dispatch on the pool's saturation (llm-d's flow control,
# scaler.decider.flowcontrol): the decider reads its servers' running count as held below their slots.
FLOW_CONTROL_ROUTER = "llm-d"


@dataclass(frozen=True, slots=True)
class FieldProblem:
    """One bad metadata key: the value given (None when absent) and the rule it broke."""

    key: str
    value: str | None
    rule: str

    def __str__(self) -> str:
        shown = "" if self.value is None else f"={_preview(self.value)}"
        return f"{self.key}{shown}: {self.rule}"


class MetadataError(InputError):
    """Invalid ScaledObject metadata; ``problems`` names every bad key."""

    def __init__(self, problems: list[FieldProblem]) -> None:
        self.problems = sorted(problems, key=lambda p: p.key)
        super().__init__("invalid scalerMetadata: " + "; ".join(str(p) for p in self.problems))

    @property
    def keys(self) -> list[str]:
        """The bad keys, sorted."""
        return [p.key for p in self.problems]


def _preview(value: str, limit: int = 80) -> str:
    text = value if len(value) <= limit else value[:limit] + f"...({len(value)} chars)"
    return json.dumps(text, ensure_ascii=True)


# The five cron fields, their ranges and the names croniter accepts (day 7 is Sunday too).
CRON_FIELDS: tuple[tuple[str, int, int, tuple[str, ...]], ...] = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")),
    ("day of week", 0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat")),
)
_CRON_RANGE = re.compile(r"^(?P<a>[^-/]+)(?:-(?P<b>[^-/]+))?(?:/(?P<step>.+))?$")


def _cron_value(text: str, low: int, names: tuple[str, ...]) -> int | None:
    if text.isdigit():
        return int(text)
    lowered = text.lower()
    return names.index(lowered) + low if lowered in names else None


def cron_field_problem(index: int, text: str) -> str | None:
    """Why one cron field is invalid, naming the field and its range, or None.

    *Example*: field 0 ``"61"`` -> ``minute "61" is out of range 0-59``; field 4 ``"1-8"``
    -> ``day of week "8" is out of range 0-7 (or sun-sat)``.
    """
    name, low, high, names = CRON_FIELDS[index]
    allowed = f"{low}-{high}" + (f" (or {names[0]}-{names[-1]})" if names else "")
    for part in text.split(","):
        match = _CRON_RANGE.match(part)
        if match is None:
            return f"{name} {part!r} is not a value, a range a-b, * or a step */n ({allowed})"
        step = match["step"]
        if step is not None and (not step.isdigit() or int(step) == 0):
            return f"{name} step {step!r} must be a whole number of 1 or more"
        bounds = [match["a"]] if match["b"] is None else [match["a"], match["b"]]
        if bounds == ["*"]:
            continue
        for bound in bounds:
            value = _cron_value(bound, low, names)
            if value is None or not low <= value <= high:
                return f'{name} "{bound}" is out of range {allowed}'
    return None


def _cron(value: str) -> str:
    fields = value.split()
    if len(fields) != 5:
        raise ValueError(
            f"must be a 5-field cron expression (minute hour day month weekday), got {len(fields)} fields"
        )
    if not croniter.is_valid(value):
        # croniter decides; the field check only says which field is wrong and its range.
        problems = (cron_field_problem(index, text) for index, text in enumerate(fields))
        problem = next((p for p in problems if p is not None), None)
        raise ValueError("is not a valid cron expression" + (f": {problem}" if problem else ""))
    return " ".join(fields)


def _strict_bool(value: Any) -> Any:
    """Only ``true`` or ``false`` (any case): ``yes``, ``1`` or ``on`` are refused, not guessed."""
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        raise ValueError('must be "true" or "false"')
    return value


def _timezone(value: str) -> str:
    problem = "must be an IANA timezone name such as Europe/Paris or UTC"
    if len(value) > 64 or not all(c.isalnum() or c in "/_-+" for c in value):
        raise ValueError(problem)
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(problem) from None
    return value


def _custom_query(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    if any(ord(c) < 32 and c not in "\t\n" for c in value):
        raise ValueError("must not contain control characters")
    refused = promql_problem(value)  # read with a real PromQL parser (scaler.presets.promql)
    if refused is not None:
        raise ValueError(str(refused))
    return value


Cron = Annotated[str, AfterValidator(_cron)]
StrictBool = Annotated[bool, BeforeValidator(_strict_bool)]
CustomQuery = Annotated[str, Field(max_length=MAX_QUERY_LENGTH), AfterValidator(_custom_query)]
TimeZone = Annotated[str, AfterValidator(_timezone)]


class PrewarmWindow(BaseModel):
    """One pre-warm window: at least ``replicas`` from ``start`` until ``end``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    start: Cron
    end: Cron
    replicas: int = Field(ge=1, le=MAX_REPLICAS_LIMIT)
    timezone: TimeZone | None = None


class TargetPolicy(BaseModel):
    """Everything one ScaledObject trigger configures. Field aliases are the metadata keys; each
    field's docstring is its description, which docs/metadata.md prints (``./dev docs``)."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        str_strip_whitespace=True,
        allow_inf_nan=False,
        use_attribute_docstrings=True,
    )

    engine: str = DEFAULT_ENGINE
    """Which server's series to read: an engine preset of the registry (docs/engines.md), or `custom`
    for queries of your own. `vllm` reads the `vllm:` metric family, `dynamo` Dynamo's frontend."""
    router: str = NO_ROUTER
    """A router in front of the servers whose queue holds requests before any server has them. With
    `llm-d`, the endpoint picker's flow-control queue counts as waiting demand and its TTFT is the
    one checked against the objective."""
    inference_pool: str | None = Field(None, alias="inferencePool", min_length=1, max_length=253)
    """With `router: llm-d` only, and then required: the InferencePool whose flow-control queue and
    saturation to read (its `inference_pool` label), e.g. `llama-pool`."""
    label_selector: str = Field("", alias="labelSelector")
    """PromQL label matchers that pick this workload's series, comma separated (`name="v"`, `!=`,
    `=~`, `!~`; at most 16), parsed and never pasted into a query; empty, every series of the engine.
    Regexes are RE2, as Prometheus' (anchored, `.` matches a newline; no backreferences or
    lookarounds: refused), and each selector's regex work is bounded per refresh (docs/engines.md).
    *Example*: `model_name="meta-llama/Llama-3.1-8B-Instruct", namespace="inference"`."""
    role: Role = "both"
    """Which pool of a prefill/decode deployment the Deployment is (scaler.roles): `both` a replica
    that does both; `prefill` or `decode` a pool sized on its own resource from its own series,
    picked by the role label (not with `engine: dynamo`; with `tgi` or `triton` only beside a
    `roleSelector`)."""
    role_selector: str | None = Field(None, alias="roleSelector", min_length=1, max_length=317)
    """With `role: prefill` or `decode` only, not with `engine: custom`: the label that tells the
    pools' series apart, a series label or a pod label key as Prometheus' Kubernetes discovery
    writes it (`llm-d.ai/role` is `llm_d_ai_role`), and not one the `labelSelector` matches on.
    Unset: the engine's (`llm-d.ai/role` for vLLM, `engine_type` for SGLang)."""
    prometheus_address: str | None = Field(None, alias="prometheusAddress")
    """The Prometheus to read, e.g. `http://prometheus-operated.monitoring:9090`. Unset: `scaler
    serve --prometheus`. The `--prometheus` of dry-run, replay, convert and doctor wins over it."""
    target_queue_per_replica: float = Field(10.0, alias="targetQueuePerReplica", gt=0, le=1e6)
    """Requests waiting per replica, what the queue signal counts a backlog in while no capacity is
    known: at `10`, 400 waiting ask for 40 replicas."""
    prompt_tokens_per_second_per_replica: float | None = Field(
        None, alias="promptTokensPerSecondPerReplica", gt=0, le=1e9
    )
    """Prompt tokens per second one replica prefills (`9000`): where the measurement starts, used as
    it is until one is made. Unset: measured (docs/decider.md)."""
    generation_tokens_per_second_per_replica: float | None = Field(
        None, alias="generationTokensPerSecondPerReplica", gt=0, le=1e9
    )
    """Tokens per second one replica decodes with its batch full (`1800`): over what one sequence
    decodes now, where the batch slots start (a batch with room decodes faster, so the largest
    reading of a settled fleet stands, until the KV cache's use is read). Unset: the slots are
    measured from the KV cache."""
    target_utilization: float = Field(0.8, alias="targetUtilization", gt=0, le=1)
    """Accepted so that older ScaledObjects still parse, and no longer used: the headroom follows
    from the TTFT objective (`scaler dry-run` warns)."""
    cold_start_seconds: float | None = Field(None, alias="coldStartSeconds", gt=0, le=MAX_COLD_START_SECONDS)
    """Seconds from ordering a replica to its serving (image pull, weight load, warm-up): the lead of
    every look-ahead. Unset or `auto`: measured from the Deployment's pods, 180 until 5 are; a
    number overrides the measurement."""
    min_replicas: int = Field(1, alias="minReplicas", ge=1, le=MAX_REPLICAS_LIMIT)
    """The floor, never zero (0 is refused: this scaler never scales to zero); keep it equal to the
    ScaledObject's `minReplicaCount`."""
    max_replicas: int = Field(100, alias="maxReplicas", ge=1, le=MAX_REPLICAS_LIMIT)
    """The most replicas asked for, at least `minReplicas`; keep it equal to `maxReplicaCount`."""
    prewarm_start: Cron | None = Field(None, alias="prewarmStart")
    """When a pre-warm window opens, in `timezone` (`0 9 * * 1-5`: weekdays at 09:00); it pre-warms
    one cold start earlier. Needs `prewarmEnd` and `prewarmReplicas`."""
    prewarm_end: Cron | None = Field(None, alias="prewarmEnd")
    """When the window closes (`0 12 * * 1-5`), a schedule other than its start."""
    prewarm_replicas: int | None = Field(None, alias="prewarmReplicas", ge=1, le=MAX_REPLICAS_LIMIT)
    """The replicas held while the window is open, at most `maxReplicas`."""
    prewarm_windows: tuple[PrewarmWindow, ...] = Field((), alias="prewarmWindows")
    """More windows, a JSON list of up to 16 `{"start", "end", "replicas", "timezone"?}` (each zone
    defaults to `timezone`); where several are open the largest wins."""
    timezone: TimeZone = "UTC"
    """The zone the pre-warm schedules are read in, a name the tz database knows: `Asia/Shanghai`."""
    gpu_check: StrictBool = Field(True, alias="gpuCheck")
    """Whether the GPU inventory clamps the target; only `true` or `false` (`yes`, `1`, `on` are
    refused, not guessed)."""
    gpu_check_failure: Literal["open", "closed"] = Field("open", alias="gpuCheckFailure")
    """While the GPU inventory is unknown: `open` lets the target through, `closed` holds scale-ups
    at the current replicas."""
    gpus_per_replica: int | None = Field(None, alias="gpusPerReplica", ge=1, le=64)
    """GPUs one replica holds (`2` for tensor parallelism 2). Unset: read from the Deployment."""
    max_pending_replicas: int = Field(0, alias="maxPendingReplicas", ge=0, le=MAX_REPLICAS_LIMIT)
    """Replicas the GPU check lets wait Pending beyond the free GPUs, at most `maxReplicas`: `2`
    lets a node autoscaler see two Pending pods. Besides these, a scale-up the HPA's tolerance would
    swallow is asked as the smallest step that lands even where the free GPUs fit only part of it:
    the rest waits Pending ([decider.md](decider.md#what-sizes-the-fleet))."""
    max_staleness_seconds: float = Field(300.0, alias="maxStalenessSeconds", gt=0, le=86400)
    """Seconds without live inputs after which `GetMetrics` answers `UNAVAILABLE`, so that the
    ScaledObject's `fallback` takes over."""
    ttft_objective_seconds: float = Field(2.0, alias="ttftObjectiveSeconds", gt=0, le=600)
    """The time to first token, in seconds, the load signal sizes for and alerts and reports compare
    against."""
    ttft_objective_percentile: float = Field(99.5, alias="ttftObjectivePercentile", ge=50, lt=100)
    """The share of first tokens, in percent, that must come within `ttftObjectiveSeconds`; the rest
    is the load signal's budget of late ones (`99`: 1%)."""
    itl_objective_seconds: float | None = Field(None, alias="itlObjectiveSeconds", gt=0, le=60)
    """The gap between two tokens of a sequence (`0.05`): a replica runs no more sequences than keep
    its inter-token latency at `ttftObjectivePercentile` within it. Unset: not used."""
    queue_query: CustomQuery | None = Field(None, alias="queueQuery")
    """With `engine: custom` only, and then required: the requests waiting, a PromQL expression summed
    over its result, e.g. `sum(my_server_queue{model="llama"})`."""
    running_query: CustomQuery | None = Field(None, alias="runningQuery")
    """With `engine: custom` only: the requests running."""
    prompt_tokens_query: CustomQuery | None = Field(None, alias="promptTokensQuery")
    """With `engine: custom` only: prompt tokens per second, e.g.
    `sum(rate(my_server_prompt_tokens_total[1m]))`."""
    generation_tokens_query: CustomQuery | None = Field(None, alias="generationTokensQuery")
    """With `engine: custom` only: generated tokens per second."""
    kv_cache_query: CustomQuery | None = Field(None, alias="kvCacheQuery")
    """With `engine: custom` only: the KV cache's usage, 0 to 1, the mean over replicas."""
    ttft_p95_query: CustomQuery | None = Field(None, alias="ttftP95Query")
    """With `engine: custom` only: the TTFT's 95th percentile, in seconds."""
    ttft_p99_query: CustomQuery | None = Field(None, alias="ttftP99Query")
    """With `engine: custom` only: the TTFT's 99th percentile, in seconds."""

    @field_validator("prewarm_windows", mode="before")
    @classmethod
    def _windows_from_json(cls, value: Any) -> Any:
        if isinstance(value, str):
            if not value.strip():
                return ()
            try:
                parsed = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(
                    f"must be a JSON list of windows: {exc.msg} at character {exc.pos}"
                ) from None
            if not isinstance(parsed, list):
                raise ValueError(
                    "must be a JSON list such as"
                    ' [{"start": "0 9 * * 1-5", "end": "0 12 * * 1-5", "replicas": 8}]'
                )
            if len(parsed) > MAX_WINDOWS:
                raise ValueError(f"at most {MAX_WINDOWS} windows")
            return parsed
        return value

    @field_validator("engine", "router")
    @classmethod
    def _preset(cls, value: str, info: ValidationInfo) -> str:
        kind = Kind(str(info.field_name))
        names = choices(kind)
        if value not in names:
            raise ValueError(f"must be one of {', '.join(names[:-1])} or {names[-1]}")
        return value

    @field_validator("cold_start_seconds", mode="before")
    @classmethod
    def _auto_cold_start(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() == "auto":
            return None
        return value

    @field_validator("label_selector")
    @classmethod
    def _selector(cls, value: str) -> str:
        try:
            parse_selector(value)
        except SelectorError as exc:
            raise ValueError(
                f'must be PromQL label matchers like model_name="llama", ns=~"prod-.*": {exc}'
            ) from None
        return value

    @field_validator("role_selector")
    @classmethod
    def _role_selector(cls, value: str | None) -> str | None:
        if value is not None:
            parse_role_label(value)
        return value

    @field_validator("prometheus_address")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        if not value.startswith(("http://", "https://")) or any(c.isspace() for c in value):
            raise ValueError("must be an http:// or https:// URL")
        return value.rstrip("/")

    # ---- derived views -------------------------------------------------------------

    # Derived once per policy (the model is frozen): read on every refresh of every target.
    @cached_property
    def matchers(self) -> tuple[LabelMatcher, ...]:
        """The ``labelSelector`` parsed into PromQL label matchers."""
        return parse_selector(self.label_selector)

    @cached_property
    def windows(self) -> tuple[PrewarmWindow, ...]:
        """Every pre-warm window, the single-window keys first, each with its timezone set."""
        out: list[PrewarmWindow] = []
        if self.prewarm_start and self.prewarm_end and self.prewarm_replicas:
            out.append(
                PrewarmWindow(
                    start=self.prewarm_start,
                    end=self.prewarm_end,
                    replicas=self.prewarm_replicas,
                    timezone=self.timezone,
                )
            )
        for window in self.prewarm_windows:
            out.append(window if window.timezone else window.model_copy(update={"timezone": self.timezone}))
        return tuple(out)

    @cached_property
    def spec(self) -> DeciderSpec:
        """What the decider reads of this policy (``scaler.decider.spec``), built once."""
        return DeciderSpec(
            min_replicas=self.min_replicas,
            max_replicas=self.max_replicas,
            ttft_objective_seconds=self.ttft_objective_seconds,
            ttft_objective_percentile=self.ttft_objective_percentile,
            itl_objective_seconds=self.itl_objective_seconds,
            prompt_tokens_per_second_per_replica=self.prompt_tokens_per_second_per_replica,
            generation_tokens_per_second_per_replica=self.generation_tokens_per_second_per_replica,
            cold_start_seconds=self.cold_start_seconds,
            target_queue_per_replica=self.target_queue_per_replica,
            role=self.role,
            flow_control=self.router == FLOW_CONTROL_ROUTER,
            windows=tuple(Window(w.start, w.end, w.replicas, w.timezone) for w in self.windows),
            gpu_check=self.gpu_check,
            gpu_check_failure=self.gpu_check_failure,
            max_pending_replicas=self.max_pending_replicas,
        )

    @property
    def token_capacity_known(self) -> bool:
        """Whether a prompt or generation token capacity per replica is configured."""
        return (
            self.prompt_tokens_per_second_per_replica is not None
            or self.generation_tokens_per_second_per_replica is not None
        )

    def cross_field_problems(self, raw: Mapping[str, str]) -> list[FieldProblem]:
        """Problems between keys: bounds, pre-warm windows, custom-engine queries, maxPendingReplicas."""
        problems: list[FieldProblem] = []

        def add(key: str, rule: str) -> None:
            problems.append(FieldProblem(key, raw.get(key), rule))

        if self.max_replicas < self.min_replicas:
            add("maxReplicas", f"must be >= minReplicas ({self.min_replicas})")
        single = {
            "prewarmStart": self.prewarm_start,
            "prewarmEnd": self.prewarm_end,
            "prewarmReplicas": self.prewarm_replicas,
        }
        given = [k for k, v in single.items() if v is not None]
        if given and len(given) != 3:
            for key in sorted(set(single) - set(given)):
                add(key, f"required when {', '.join(given)} is set (a window needs start, end and replicas)")
        for index, window in enumerate(self.windows):
            key = "prewarmReplicas" if (index == 0 and self.prewarm_start) else "prewarmWindows"
            if window.start == window.end:
                add(key, f"window {index}: start and end are the same schedule, so it never opens")
            if window.replicas > self.max_replicas:
                add(
                    key,
                    f"window {index}: replicas {window.replicas} exceed maxReplicas ({self.max_replicas})",
                )
        custom_given = [k for k in CUSTOM_QUERY_KEYS if k in raw]
        if self.engine == CUSTOM_ENGINE and "queueQuery" not in raw:
            add("queueQuery", f"required with engine: {CUSTOM_ENGINE} (the queue depth query)")
        if self.engine != CUSTOM_ENGINE:
            for key in custom_given:
                add(key, f"only used with engine: {CUSTOM_ENGINE} (engine is {self.engine})")
        if self.max_pending_replicas > self.max_replicas:
            add("maxPendingReplicas", f"must be <= maxReplicas ({self.max_replicas})")
        pooled = [name for name, router in REGISTRY.routers.items() if router.pool_label is not None]
        if self.router in pooled and self.inference_pool is None:
            add(
                "inferencePool",
                f"required with router: {self.router} (the InferencePool whose queue to read)",
            )
        if self.router not in pooled and self.inference_pool is not None:
            add("inferencePool", f"only used with router: {' or '.join(pooled)} (router is {self.router})")
        preset = REGISTRY.engines.get(self.engine)
        role = role_problems(
            self.role,
            self.role_selector,
            self.engine,
            default=preset.role_label if preset else None,
            custom=preset is None,
            frontend=preset is not None and not preset.per_pod,
            matchers=self.matchers,
        )
        return problems + [FieldProblem(key, raw.get(key), rule) for key, rule in role]

    @cached_property
    def series_matchers(self) -> tuple[LabelMatcher, ...]:
        """The matchers of the servers' own series: the ``labelSelector``'s and the role's (by the
        ``roleSelector``, else the engine preset's role label; scaler.roles)."""
        preset = REGISTRY.engines.get(self.engine)
        text = self.role_selector or (preset.role_label if preset else None)
        label = parse_role_label(text) if text and preset else None
        return (*self.matchers, *role_matcher(self.role, label))

    @cached_property
    def router_matchers(self) -> tuple[LabelMatcher, ...]:
        """The router pool's matcher (``inference_pool="<inferencePool>"``), built, never parsed."""
        router = REGISTRY.routers.get(self.router)
        if self.inference_pool is None or router is None or router.pool_label is None:
            return ()
        return (LabelMatcher(router.pool_label, MatchOp.EQ, self.inference_pool),)


# Metadata key -> field name, for every documented key.
ALIASES: dict[str, str] = {(info.alias or name): name for name, info in TargetPolicy.model_fields.items()}
# engine: custom's query keys: the metadata key of each TargetPolicy field the input table names.
CUSTOM_QUERY_KEYS = tuple(
    TargetPolicy.model_fields[i.spec.custom_query].alias or i.spec.custom_query
    for i in Input
    if i.spec.custom_query
)

_RULE_HINTS = {
    "minReplicas": "this scaler never scales to zero; use 1 or more",
    "targetUtilization": "a fraction of one replica's capacity, in (0, 1]; no longer used",
    "ttftObjectivePercentile": "the share of first tokens, in percent, that must meet ttftObjectiveSeconds",
}


def _problem_from_pydantic(error: Mapping[str, Any], raw: Mapping[str, str]) -> FieldProblem:
    loc = error.get("loc", ())
    key = str(loc[0]) if loc else "metadata"
    message = rule_of(error)
    if len(loc) > 1:
        message = f"at {'.'.join(str(p) for p in loc[1:])}: {message}"
    if error.get("type") == "extra_forbidden":
        message = "unknown key (see docs/metadata.md)"
        guess = did_you_mean(key)
        if guess:
            message = f'unknown key; did you mean "{guess}"? (see docs/metadata.md)'

    hint = _RULE_HINTS.get(key)
    if hint and error.get("type") != "extra_forbidden":
        message = f"{message} ({hint})"
    return FieldProblem(key, raw.get(key), message)


def did_you_mean(key: str) -> str | None:
    """The documented key a misspelled one most resembles (case and one slip forgiven), or None.

    *Example*: ``targetQueuePerReplca`` -> ``targetQueuePerReplica``; ``gpucheck`` -> ``gpuCheck``.
    """
    known = {k.lower(): k for k in [*ALIASES, *KEDA_KEYS]}
    found = difflib.get_close_matches(key.lower(), list(known), n=1, cutoff=0.8)
    return known[found[0]] if found else None


def normalize_metadata(metadata: Mapping[str, str]) -> tuple[dict[str, str], list[FieldProblem]]:
    """Drop KEDA's own keys, fold ``<key>FromEnv`` into ``<key>``, check sizes."""
    problems: list[FieldProblem] = []
    out: dict[str, str] = {}
    if len(metadata) > MAX_KEYS:
        return {}, [FieldProblem("metadata", None, f"has {len(metadata)} keys; at most {MAX_KEYS}")]
    for key, value in metadata.items():
        if not isinstance(key, str) or not isinstance(value, str):
            problems.append(FieldProblem(str(key), None, "keys and values must be strings"))
            continue
        if len(value) > MAX_VALUE_LENGTH:
            problems.append(FieldProblem(key, value, f"longer than {MAX_VALUE_LENGTH} characters"))
            continue
        if key in KEDA_KEYS:
            continue
        name = key
        if key.endswith(FROM_ENV_SUFFIX) and key[: -len(FROM_ENV_SUFFIX)] in ALIASES:
            name = key[: -len(FROM_ENV_SUFFIX)]
        if name in out:
            problems.append(FieldProblem(key, value, f"given twice, as {name} and {name}{FROM_ENV_SUFFIX}"))
            continue
        out[name] = value
    return out, problems


def parse_metadata(metadata: Mapping[str, str]) -> TargetPolicy:
    """Parse ScaledObject trigger metadata into a TargetPolicy, or raise MetadataError."""
    raw, problems = normalize_metadata(metadata)
    if problems:
        raise MetadataError(problems)
    try:
        policy = TargetPolicy.model_validate(raw)
    except ValidationError as exc:
        raise MetadataError([_problem_from_pydantic(e, raw) for e in exc.errors()]) from None
    problems = policy.cross_field_problems(raw)
    if problems:
        raise MetadataError(problems)
    return policy


def engine_for(metadata: Mapping[str, str], params: DeciderParams = DEFAULT) -> Engine:
    """The decider for ScaledObject trigger metadata: ``Engine(parse_metadata(metadata).spec)``;
    raises MetadataError naming every bad key."""
    return Engine(parse_metadata(metadata).spec, params)
