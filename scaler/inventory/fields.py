"""Typed reads of the untyped JSON the Kubernetes API returns. Pure.

Every reader answers a safe empty value for a field that is absent or of the wrong type,
so a malformed object decodes to defaults instead of raising: ``_obj(None) == {}``,
``_str(3) == ""``, ``_labels({"app": "vllm", "n": 1}) == {"app": "vllm"}``.
"""

from __future__ import annotations

from collections.abc import Mapping
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
