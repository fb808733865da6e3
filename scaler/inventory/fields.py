"""Typed reads of the untyped JSON the Kubernetes API returns. Pure.

Every reader answers a safe empty value for a field that is absent or of the wrong type,
so a malformed object decodes to defaults instead of raising: ``_obj(None) == {}``,
``_str(3) == ""``, ``_labels({"app": "vllm", "n": 1}) == {"app": "vllm"}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any


def _freeze(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


def _obj(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _items(value: Any) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, Mapping)]


def _str(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) else default


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(v for v in value if isinstance(v, str))


def _labels(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in _obj(value).items() if isinstance(v, str)}


def _timestamp(value: Any) -> float | None:
    """An RFC 3339 time as the API writes it (``2026-12-01T08:00:00Z``), in Unix seconds."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.timestamp() if parsed.tzinfo is not None else None
