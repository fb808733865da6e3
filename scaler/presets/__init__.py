"""The preset registry: each engine's and router's queries, the one place an engine is named.

A *preset* says which PromQL gives each input the signals need, for one inference engine
(metadata ``engine:``) or one router in front of the servers (``router:``), and the facts
about its servers the rest of the scaler needs: the image its pods run (``scaler doctor``
tells inference workloads by it), the label that names the model, the older metric names
the upstream removed. Everything that knows an engine reads it here: the metadata's
choices (``scaler.config``), ``scaler convert``'s queue metrics (``queue_read``),
``scaler doctor``'s image patterns and removed names, and the simulated exporters
(``scaler.sim``), which serve each preset's families. Adding an engine is one preset
passed to ``register`` (docs/engines.md, "Adding an engine").

The modules: ``registry`` (families, presets, the registry), ``engines`` and ``routers``
(the built-in presets, each metric name with its upstream file), ``queries`` (what a user's
query reads: a preset's queue, a removed name).
"""

from __future__ import annotations

from scaler.presets import engines, routers
from scaler.presets.promql import PromQLError, metric_names, one_selector
from scaler.presets.promql import problem as promql_problem
from scaler.presets.queries import (
    GPU_UTILISATION,
    QueueRead,
    RouterQueue,
    holds_for,
    queue_read,
    removed_in,
    router_queue_queries,
)
from scaler.presets.registry import (
    CUSTOM_ENGINE,
    DEFAULT_ENGINE,
    FIELDS,
    NO_ROUTER,
    PRESETS,
    QUEUE_FIELD,
    REGISTRY,
    ROUTERS,
    Combine,
    Family,
    Kind,
    Preset,
    PresetError,
    Registry,
    Removal,
    Select,
    Selector,
    choices,
    preset_for,
    register,
    registered,
    unregister,
)

__all__ = [
    "CUSTOM_ENGINE",
    "DEFAULT_ENGINE",
    "FIELDS",
    "GPU_UTILISATION",
    "NO_ROUTER",
    "PRESETS",
    "QUEUE_FIELD",
    "REGISTRY",
    "ROUTERS",
    "Combine",
    "Family",
    "Kind",
    "Preset",
    "PresetError",
    "PromQLError",
    "QueueRead",
    "Registry",
    "Removal",
    "RouterQueue",
    "Select",
    "Selector",
    "choices",
    "engines",
    "holds_for",
    "metric_names",
    "one_selector",
    "preset_for",
    "promql_problem",
    "queue_read",
    "register",
    "registered",
    "removed_in",
    "router_queue_queries",
    "routers",
    "unregister",
]
