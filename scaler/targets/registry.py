"""Targets the server decides for, and the refresh that keeps their decisions current.

A target is one ScaledObject (namespace, name). It is registered on its first RPC,
its metadata parsed once per distinct metadata map, and forgotten after it has not
been polled for ``idle_seconds``. ``refresh`` gathers observations for every target
in one batch from the configured source, runs each engine, and hands the decisions
to the sinks (metrics, logs, printers). RPCs only read ``Target.latest``.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple, Protocol

from scaler.config import MetadataError, TargetPolicy, parse_metadata
from scaler.decider.engine import Engine
from scaler.decider.params import DEFAULT, DeciderParams
from scaler.model import Decision, Observation

PARSE_CACHE_SIZE = 4096


class TargetKey(NamedTuple):
    """A ScaledObject's identity: namespace and name."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class Target:
    """One registered ScaledObject: its policy (the metadata parsed), its engine, poll times and
    latest decision."""

    key: TargetKey
    fingerprint: str
    policy: TargetPolicy
    engine: Engine
    registered_at: float
    last_polled: float
    latest: Decision | None = None
    metadata: dict[str, str] = field(default_factory=dict)


class ObservationSource(Protocol):
    """Where observations come from: one batched call per refresh for every target."""

    async def observe(self, targets: Sequence[Target], now: datetime) -> Mapping[TargetKey, Observation]:
        """One observation per target at ``now``, read in one batch."""

    async def warm(self, targets: Sequence[Target], now: datetime, step_s: float | None = None) -> None:
        """Feed new targets' engines with history up to ``now``, every ``step_s`` (batched)."""

    def expects_data(self, target: Target) -> bool:
        """True when the target has a configured data source, so absent data is a fault."""


DecisionSink = Callable[[Target, Decision], None]


def fingerprint(metadata: Mapping[str, str]) -> str:
    """A digest of the map, equal for equal maps only: each key and value is length-prefixed,
    so no value can imitate a separator (``{"a": "b", "c": "d"}`` never equals ``{"a": "b\\x01c\\x00d"}``)."""
    digest = hashlib.blake2b(digest_size=16)
    for key in sorted(metadata):
        for text in (key, metadata[key]):
            raw = text.encode("utf-8", "surrogatepass")
            digest.update(len(raw).to_bytes(8, "big"))
            digest.update(raw)
    return digest.hexdigest()


class TargetRegistry:
    """The registered targets by key, and a bounded cache of parsed metadata. ``params``: the
    decider's constants every target's engine decides with (its ``rate_window_s`` the source's
    PromQL rate window, ``scaler.service.app.decider_params``)."""

    def __init__(self, idle_seconds: float = 3600.0, params: DeciderParams = DEFAULT) -> None:
        self.idle_seconds = idle_seconds
        self.params = params
        self._targets: dict[TargetKey, Target] = {}
        self._parsed: OrderedDict[str, TargetPolicy | MetadataError] = OrderedDict()

    def __len__(self) -> int:
        return len(self._targets)

    def get(self, key: TargetKey) -> Target | None:
        """The target registered under ``key``, or None."""
        return self._targets.get(key)

    def targets(self) -> list[Target]:
        """Every registered target, in registration order."""
        return list(self._targets.values())

    def parse(self, metadata: Mapping[str, str]) -> tuple[str, TargetPolicy]:
        """Parse metadata once per distinct map; raises MetadataError (also cached)."""
        fp = fingerprint(metadata)
        cached = self._parsed.get(fp)
        if cached is None:
            try:
                cached = parse_metadata(metadata)
            except MetadataError as exc:
                cached = exc
            self._parsed[fp] = cached
            if len(self._parsed) > PARSE_CACHE_SIZE:
                self._parsed.popitem(last=False)
        else:
            self._parsed.move_to_end(fp)
        if isinstance(cached, MetadataError):
            raise cached
        return fp, cached

    def polled(self, key: TargetKey, metadata: Mapping[str, str], now: float) -> Target | None:
        """The known target for these exact metadata, marked as polled; None if it needs ``resolve``.

        Safe from any thread: it reads the table and sets one attribute, nothing else.
        """
        target = self._targets.get(key)
        if target is None or target.metadata != metadata:
            return None
        target.last_polled = now
        return target

    def resolve(self, key: TargetKey, metadata: Mapping[str, str], now: float) -> tuple[Target, bool]:
        """The target for an RPC, registering or updating it. Returns (target, is_new)."""
        target = self._targets.get(key)
        if target is not None and target.metadata == metadata:  # the common case: a known target polled again
            target.last_polled = now
            return target, False
        fp, policy = self.parse(metadata)
        if target is None:
            target = Target(
                key,
                fp,
                policy,
                Engine(policy.spec, self.params),
                registered_at=now,
                last_polled=now,
                metadata=dict(metadata),
            )
            self._targets[key] = target
            return target, True
        target.last_polled = now
        if target.fingerprint != fp:
            target.engine.update_spec(policy.spec)
            target.policy = policy
            target.fingerprint = fp
        target.metadata = dict(metadata)
        return target, False

    def forget_idle(self, now: float) -> list[TargetKey]:
        """Drop the targets not polled for ``idle_seconds`` before ``now``; returns their keys."""
        gone = [k for k, t in self._targets.items() if now - t.last_polled > self.idle_seconds]
        for key in gone:
            del self._targets[key]
        return gone
