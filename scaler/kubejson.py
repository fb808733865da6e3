"""Typed reads of the untyped JSON the Kubernetes API returns. Pure.

Every reader answers a safe empty value for a field that is absent or of the wrong type,
so a malformed object decodes to defaults instead of raising: ``as_mapping(None) == {}``,
``as_str(3) == ""``, ``as_labels({"app": "vllm", "n": 1}) == {"app": "vllm"}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any


def frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A read-only copy of ``mapping`` (None: empty)."""
    return MappingProxyType(dict(mapping or {}))


def as_mapping(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a mapping, else ``{}``."""
    return value if isinstance(value, Mapping) else {}


def as_items(value: Any) -> list[Mapping[str, Any]]:
    """The mappings in ``value`` if it is a list, else ``[]``."""
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, Mapping)]


def as_str(value: Any, default: str = "") -> str:
    """``value`` if it is a string, else ``default``."""
    return value if isinstance(value, str) else default


def as_strings(value: Any) -> tuple[str, ...]:
    """The strings in ``value`` if it is a list, else ``()``."""
    if not isinstance(value, list):
        return ()
    return tuple(v for v in value if isinstance(v, str))


def as_labels(value: Any) -> dict[str, str]:
    """The string-valued entries of ``value`` if it is a mapping (labels, annotations)."""
    return {str(k): str(v) for k, v in as_mapping(value).items() if isinstance(v, str)}


def as_timestamp(value: Any) -> float | None:
    """An RFC 3339 time as the API writes it (``2026-12-01T08:00:00Z``), in Unix seconds."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.timestamp() if parsed.tzinfo is not None else None
