"""Files the CLI reads: ScaledObject manifests and observation logs."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scaler.errors import InputError
from scaler.inventory import ScaledObject, ScaledObjectError, scaledobject_from_json
from scaler.manifest import ManifestError, first_scaledobject
from scaler.model import HpaStatus, Inert, Observation

OBSERVATION_FIELDS = set(Observation.__dataclass_fields__) - {"now", "missing"}


class InputFileError(InputError):
    """An input file or entry that cannot be used; the message says why."""

    pass


def scaledobject_from_dict(doc: Mapping[str, Any], trigger_index: int | None = None) -> ScaledObject:
    """A manifest's ScaledObject, from its first external trigger (or the one at ``trigger_index``);
    InputFileError naming every field that breaks KEDA's rules."""
    try:
        scaledobject = scaledobject_from_json(doc, trigger_index, "default", "scaledobject", strict=True)
    except ScaledObjectError as exc:
        raise InputFileError(str(exc)) from None
    if scaledobject.trigger_index is None:
        raise NoScalerTriggerError([trigger.type for trigger in scaledobject.triggers])
    return scaledobject


class NoScalerTriggerError(InputFileError):
    """A ScaledObject with no trigger for this scaler: a plain KEDA one, ``scaler convert``'s input."""

    def __init__(self, types: list[str], path: str | Path | None = None) -> None:
        self.types = types
        said = "the ScaledObject has no trigger of type external (or external-push)"
        if types:
            command = f"scaler convert {path}" if path is not None else "scaler convert"
            said += (
                f"; its triggers ({', '.join(types)}) are plain KEDA ones: `{command}` rewrites it"
                " with this scaler's trigger (docs/convert.md)"
            )
        super().__init__(said)


def load_scaledobject(path: str | Path, trigger_index: int | None = None) -> ScaledObject:
    """The first ScaledObject in a (multi-document) YAML file, and its external trigger."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise InputFileError(f"cannot read {path}: {exc}") from None
    try:
        doc = first_scaledobject(text, str(path))
    except ManifestError as exc:
        raise InputFileError(str(exc)) from None
    try:
        return scaledobject_from_dict(doc, trigger_index)
    except NoScalerTriggerError as exc:
        raise InputFileError(f"{path}: {NoScalerTriggerError(exc.types, path)}") from None
    except InputFileError as exc:
        raise InputFileError(f"{path}: {exc}") from None


def parse_time(value: Any) -> datetime:
    """A timezone-aware time from ISO 8601 with a zone, or epoch seconds; InputFileError otherwise."""
    if isinstance(value, int | float):
        return datetime.fromtimestamp(float(value), tz=UTC)
    if isinstance(value, str):
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if parsed.tzinfo is None:
            raise InputFileError(f"time {value!r} has no timezone; add Z or an offset")
        return parsed
    raise InputFileError(f"time must be an ISO 8601 string or epoch seconds, got {value!r}")


def observation_from_dict(row: Mapping[str, Any]) -> Observation:
    """An Observation from one observation-log row; InputFileError on an unknown or bad field."""
    unknown = set(row) - OBSERVATION_FIELDS - {"now", "time", "missing"}
    if unknown:
        raise InputFileError(
            f"unknown fields {sorted(unknown)}; known: now, {', '.join(sorted(OBSERVATION_FIELDS))}"
        )
    when = row.get("now", row.get("time"))
    if when is None:
        raise InputFileError("each observation needs 'now' (ISO 8601 with a timezone, or epoch seconds)")
    values = {k: v for k, v in row.items() if k in OBSERVATION_FIELDS}
    try:
        if isinstance(values.get("hpa"), Mapping):
            values["hpa"] = HpaStatus.from_json(values["hpa"])
        if "inert" in values:
            values["inert"] = tuple(Inert.from_json(i) for i in values["inert"] or ())
        return Observation(now=parse_time(when), missing=row.get("missing") or {}, **values)
    except (TypeError, ValueError) as exc:
        raise InputFileError(str(exc)) from None


def read_observations(path: str | Path) -> Iterator[Observation]:
    """One JSON object per line; blank lines and lines starting with # are skipped."""
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                raise InputFileError(f"{path}:{number}: not JSON: {exc.msg}") from None
            if not isinstance(row, dict):
                raise InputFileError(f"{path}:{number}: expected a JSON object")
            try:
                yield observation_from_dict(row)
            except InputFileError as exc:
                raise InputFileError(f"{path}:{number}: {exc}") from None
