"""What the decider reads of a target's configuration: a frozen spec, built once from the metadata.

The metadata (``scaler.config.TargetPolicy``: 34 keys, PromQL and selectors among them) is the
edge's; the decider sees only this, as Knative's decider sees only its spec. The edge builds it
(``TargetPolicy.spec``) and passes it to ``Engine``; nothing here knows about queries, presets or
label selectors.

*Example*: ``minReplicas: "2"``, ``maxReplicas: "16"``, ``router: llm-d`` read as
``DeciderSpec(min_replicas=2, max_replicas=16, flow_control=True, ...)``, the rest at their
defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from scaler.decider.units import PERCENT

# Which pool of a prefill/decode deployment a target scales (``scaler.roles`` reads its label):
# ``both`` a replica that does both, ``prefill`` or ``decode`` a pool sized on its own resource.
Role = Literal["prefill", "decode", "both"]


@dataclass(frozen=True, slots=True)
class Window:
    """One pre-warm window: at least ``replicas`` from cron ``start`` until cron ``end``, read in
    ``timezone`` (an IANA name; None reads UTC)."""

    start: str
    end: str
    replicas: int
    timezone: str | None = None


@dataclass(frozen=True, slots=True)
class DeciderSpec:
    """The target's configuration the decider reads (module docstring). The field names are the
    metadata keys in snake case (docs/metadata.md says what each means, and its default)."""

    min_replicas: int
    max_replicas: int
    ttft_objective_seconds: float
    ttft_objective_percentile: float
    itl_objective_seconds: float | None
    # The configured starting points of the capacity model (scaler.decider.capacity).
    prompt_tokens_per_second_per_replica: float | None
    generation_tokens_per_second_per_replica: float | None
    cold_start_seconds: float | None
    target_queue_per_replica: float
    role: Role
    # A router in front that gates dispatch on the pool's saturation (llm-d's flow control,
    # scaler.decider.flowcontrol): the servers' running count is then held below their slots.
    flow_control: bool
    windows: tuple[Window, ...]
    gpu_check: bool
    gpu_check_failure: Literal["open", "closed"]
    max_pending_replicas: int

    @property
    def quantile(self) -> float:
        """The objective's percentile as a quantile: 99.5 -> 0.995."""
        return self.ttft_objective_percentile / PERCENT

    @property
    def late_budget(self) -> float:
        """The share of first tokens the objective allows over ``ttft_objective_seconds``: 99.5 -> 0.005."""
        return 1.0 - self.quantile
