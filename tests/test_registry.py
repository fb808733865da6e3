"""The target registry: registration, the metadata parse cache, policy updates and idle expiry."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

import pytest

from scaler.config import MetadataError, TargetPolicy, parse_metadata
from scaler.model import Observation
from scaler.targets import registry as registry_module
from scaler.targets.registry import TargetKey, TargetRegistry, fingerprint

KEY = TargetKey("inference", "llama")
OTHER = TargetKey("inference", "mistral")
META = {"minReplicas": "2", "targetQueuePerReplica": "10"}
T0 = 1_000_000.0


class CountingParse:
    """Stands in for ``parse_metadata`` and counts how often the registry calls it."""

    def __init__(self) -> None:
        self.calls: list[dict[str, str]] = []

    def __call__(self, metadata: Mapping[str, str]) -> TargetPolicy:
        """Record the call and parse for real."""
        self.calls.append(dict(metadata))
        return parse_metadata(metadata)


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> CountingParse:
    """The registry's parse_metadata, replaced by a counting wrapper."""
    counter = CountingParse()
    monkeypatch.setattr(registry_module, "parse_metadata", counter)
    return counter


def _complete_observation(at: float) -> Observation:
    return Observation(
        now=datetime.fromtimestamp(at, tz=UTC),
        queue_waiting=0.0,
        requests_running=3.0,
        prompt_tokens_per_s=500.0,
        generation_tokens_per_s=200.0,
        current_replicas=2,
        ready_replicas=2,
        gpu_schedulable_replicas=4,
    )


def test_a_target_key_prints_as_namespace_slash_name() -> None:
    """A TargetKey reads as ``namespace/name`` in logs."""
    assert str(KEY) == "inference/llama"


def test_the_first_resolve_registers_the_target_once() -> None:
    """The first RPC creates the target; later ones with the same metadata return that same target."""
    reg = TargetRegistry()
    target, is_new = reg.resolve(KEY, META, T0)
    assert is_new
    assert len(reg) == 1
    assert reg.get(KEY) is target
    assert reg.targets() == [target]
    assert target.key == KEY
    assert target.policy.min_replicas == 2
    assert target.metadata == META
    assert target.registered_at == target.last_polled == T0
    assert target.latest is None

    again, is_new_again = reg.resolve(KEY, dict(META), T0 + 30)
    assert again is target
    assert not is_new_again
    assert len(reg) == 1
    assert target.registered_at == T0
    assert target.last_polled == T0 + 30


def test_the_registry_keeps_its_own_copy_of_the_metadata() -> None:
    """Mutating the caller's map after resolve changes neither the target nor its fast path."""
    reg = TargetRegistry()
    metadata = dict(META)
    target, _ = reg.resolve(KEY, metadata, T0)
    metadata["minReplicas"] = "7"
    assert target.metadata == META
    assert reg.polled(KEY, META, T0 + 1) is target


def test_the_same_metadata_map_is_parsed_once_for_every_target(parses: CountingParse) -> None:
    """Equal metadata maps, in any key order and for any target, share one parse and one policy."""
    reg = TargetRegistry()
    first, _ = reg.resolve(KEY, META, T0)
    reordered = dict(reversed(list(META.items())))
    second, _ = reg.resolve(OTHER, reordered, T0)
    assert len(parses.calls) == 1
    assert first is not second
    assert first.engine is not second.engine
    assert first.policy is second.policy
    assert first.fingerprint == second.fingerprint


def test_parse_returns_the_fingerprint_and_the_cached_policy(parses: CountingParse) -> None:
    """``parse`` answers a repeated map from its cache with the map's fingerprint."""
    reg = TargetRegistry()
    fp, policy = reg.parse(META)
    fp_again, policy_again = reg.parse(dict(META))
    assert fp == fp_again == fingerprint(META)
    assert policy_again is policy
    assert len(parses.calls) == 1


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"minReplicas": "2"}, {"minReplicas": "3"}),
        ({"minReplicas": "2"}, {"maxReplicas": "2"}),
        ({"ab": "c"}, {"a": "bc"}),
        ({"a": "b", "c": "d"}, {"a": "bcd"}),
        ({}, {"minReplicas": ""}),
    ],
    ids=["value", "key", "key-value-boundary", "entry-boundary", "empty-value"],
)
def test_different_metadata_maps_have_different_fingerprints(a: dict[str, str], b: dict[str, str]) -> None:
    """The fingerprint separates keys from values and entries from each other, so distinct maps differ."""
    assert fingerprint(a) != fingerprint(b)


def test_a_fingerprint_ignores_key_order() -> None:
    """The fingerprint depends on the map's content, not the order KEDA sent the keys in."""
    assert fingerprint({"a": "1", "b": "2"}) == fingerprint({"b": "2", "a": "1"})


def test_the_parse_cache_is_bounded_and_evicts_the_least_recently_used(
    parses: CountingParse, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past PARSE_CACHE_SIZE maps the one used longest ago is parsed again; a recent hit survives."""
    monkeypatch.setattr(registry_module, "PARSE_CACHE_SIZE", 2)
    reg = TargetRegistry()
    a, b, c = ({"minReplicas": str(n)} for n in (1, 2, 3))
    reg.parse(a)
    reg.parse(b)
    reg.parse(a)  # a hit: a becomes the most recently used
    reg.parse(c)  # evicts b
    assert len(parses.calls) == 3
    reg.parse(a)
    assert len(parses.calls) == 3
    reg.parse(b)
    assert parses.calls[-1] == b
    assert len(parses.calls) == 4


def test_changed_metadata_updates_the_policy_and_keeps_what_the_engine_learned() -> None:
    """New metadata for a known target swaps its policy on the same engine, learned state intact."""
    reg = TargetRegistry()
    target, _ = reg.resolve(KEY, META, T0)
    engine = target.engine
    assert engine.decide(_complete_observation(T0)).inputs_complete_at == T0

    changed = {**META, "minReplicas": "4"}
    updated, is_new = reg.resolve(KEY, changed, T0 + 20)
    assert updated is target
    assert not is_new
    assert len(reg) == 1
    assert updated.engine is engine
    assert updated.policy.min_replicas == 4
    assert updated.metadata == changed
    assert updated.fingerprint == fingerprint(changed)
    assert updated.last_polled == T0 + 20
    assert updated.registered_at == T0
    # The engine still knows when its inputs were last complete: learned state, kept.
    gap = engine.decide(Observation(now=datetime.fromtimestamp(T0 + 30, tz=UTC)))
    assert gap.inputs_complete_at == T0
    assert gap.input_age(T0 + 30, updated.registered_at) == 30.0
    assert reg.polled(KEY, changed, T0 + 40) is target
    assert reg.polled(KEY, META, T0 + 40) is None


def test_invalid_metadata_raises_naming_the_keys_and_registers_nothing() -> None:
    """A bad map raises MetadataError listing every bad key, and no target is created for it."""
    reg = TargetRegistry()
    bad = {"minReplicas": "0", "targetQueuePerReplica": "lots"}
    with pytest.raises(MetadataError) as caught:
        reg.resolve(KEY, bad, T0)
    assert caught.value.keys == ["minReplicas", "targetQueuePerReplica"]
    assert "minReplicas" in str(caught.value)
    assert len(reg) == 0
    assert reg.get(KEY) is None
    assert reg.polled(KEY, bad, T0) is None


def test_invalid_metadata_is_parsed_once_and_raises_every_time(parses: CountingParse) -> None:
    """The parse error is cached like a policy: the same bad map is rejected again without parsing."""
    reg = TargetRegistry()
    bad = {"minReplicas": "5", "maxReplicas": "2"}
    for _ in range(3):
        with pytest.raises(MetadataError, match="maxReplicas"):
            reg.resolve(KEY, bad, T0)
    assert len(parses.calls) == 1
    assert len(reg) == 0


def test_an_invalid_update_leaves_the_known_target_as_it_was() -> None:
    """Bad new metadata for a registered target raises and keeps its policy, metadata and poll time."""
    reg = TargetRegistry()
    target, _ = reg.resolve(KEY, META, T0)
    with pytest.raises(MetadataError) as caught:
        reg.resolve(KEY, {**META, "maxReplicas": "1"}, T0 + 60)
    assert caught.value.keys == ["maxReplicas"]
    assert reg.get(KEY) is target
    assert target.metadata == META
    assert target.policy.min_replicas == 2
    assert target.fingerprint == fingerprint(META)
    assert target.last_polled == T0


def test_polled_marks_only_a_known_target_with_the_same_metadata() -> None:
    """``polled`` returns and touches the target for its exact metadata; otherwise None, untouched."""
    reg = TargetRegistry()
    target, _ = reg.resolve(KEY, META, T0)
    assert reg.polled(OTHER, META, T0 + 5) is None
    assert reg.polled(KEY, {**META, "minReplicas": "3"}, T0 + 5) is None
    assert target.last_polled == T0
    assert reg.polled(KEY, dict(META), T0 + 5) is target
    assert target.last_polled == T0 + 5


def test_idle_targets_are_forgotten_after_the_idle_time() -> None:
    """A target not polled for more than ``idle_seconds`` is dropped; one polled within it stays."""
    reg = TargetRegistry(idle_seconds=60.0)
    reg.resolve(KEY, META, T0)
    reg.resolve(OTHER, META, T0 + 50)
    assert reg.forget_idle(T0 + 60) == []  # exactly the idle time: still kept
    assert len(reg) == 2
    assert reg.forget_idle(T0 + 100) == [KEY]
    assert reg.get(KEY) is None
    assert reg.get(OTHER) is not None
    assert reg.forget_idle(T0 + 111) == [OTHER]
    assert len(reg) == 0


def test_a_poll_postpones_forgetting() -> None:
    """Each poll restarts the idle time, and a forgotten target registers anew on its next RPC."""
    reg = TargetRegistry(idle_seconds=60.0)
    first, _ = reg.resolve(KEY, META, T0)
    reg.polled(KEY, META, T0 + 50)
    assert reg.forget_idle(T0 + 100) == []
    assert reg.forget_idle(T0 + 111) == [KEY]
    second, is_new = reg.resolve(KEY, META, T0 + 120)
    assert is_new
    assert second is not first
    assert second.registered_at == T0 + 120


def test_a_value_cannot_imitate_another_maps_separators() -> None:
    """Two different maps never share a fingerprint, even with control characters in a value."""
    assert fingerprint({"a": "b", "c": "d"}) != fingerprint({"a": "b\x01c\x00d"})
    assert fingerprint({"ab": "c"}) != fingerprint({"a": "bc"})
