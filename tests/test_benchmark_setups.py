"""The quality benchmarks' set-ups still match the code they measure.

The benchmarks run for minutes and no test runs them whole; what breaks them when the code moves
is their set-up: the files they load and check against each other, and the ablations, which
replace a function or a parameter of the decider by name. An ablation that replaced a name the
code no longer has would change nothing and report its mechanism as worth nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks import decision_quality, pd_quality, router_quality
from benchmarks.harness import target_lines
from scaler import demand, engine, forecast
from scaler.params import DeciderParams
from scaler.signals import load, table

# Everything an ablation may replace: the classes and modules ``decision_quality._ablate`` patches.
PATCHED = (
    demand.DemandReader,
    engine.Engine,
    forecast.Forecaster,
    load,
    load.Resource,
    table,
)


def _names(owner: Any) -> dict[str, Any]:
    return dict(vars(owner))


@pytest.fixture
def restored() -> Iterator[None]:
    """Whatever an ablation replaces is put back after the test."""
    before = [(owner, _names(owner)) for owner in PATCHED]
    yield
    for owner, names in before:
        for name in set(_names(owner)) - set(names):
            delattr(owner, name)
        for name, value in names.items():
            if _names(owner).get(name) is not value:
                setattr(owner, name, value)


@pytest.mark.parametrize(
    "ablation",
    [a for a in decision_quality.ABLATIONS if a not in ("none", *decision_quality.ABLATION_PARAMS)],
)
@pytest.mark.usefixtures("restored")
def test_each_ablation_replaces_something_the_decider_has(ablation: str) -> None:
    """Removing a mechanism replaces at least one name, and only names that were there."""
    before = [_names(owner) for owner in PATCHED]
    decision_quality._ablate(ablation)
    changed = [
        (owner, name)
        for owner, names in zip(PATCHED, before, strict=True)
        for name, value in _names(owner).items()
        if names.get(name, value) is not value or name not in names
    ]
    assert changed, f"ablation {ablation!r} replaced nothing"
    added = [
        f"{getattr(owner, '__name__', owner)}.{name}"
        for owner, name in changed
        if name not in before[PATCHED.index(owner)]
    ]
    assert not added, f"ablation {ablation!r} set names the code does not have: {added}"


@pytest.mark.parametrize("ablation", list(decision_quality.ABLATION_PARAMS))
def test_each_parameter_ablation_names_decider_parameters(ablation: str) -> None:
    """A parameter ablation sets fields the decider's parameters have, to values they accept."""
    params = DeciderParams(**decision_quality.ABLATION_PARAMS[ablation])
    for field, value in decision_quality.ABLATION_PARAMS[ablation].items():
        assert getattr(params, field) == value
        assert getattr(DeciderParams(), field) != value, f"{ablation!r} sets {field} to its default"


def test_unknown_ablation_is_refused() -> None:
    """A misspelled ablation fails rather than running the decider whole under its name."""
    with pytest.raises(ValueError, match="unknown ablation"):
        decision_quality._ablate("no such mechanism")


def test_router_row_fleet_and_scaledobjects_load_and_differ_only_by_the_router() -> None:
    """The router row's files load, and its own check of them (the two differ by the router) holds."""
    fleet, routed, engine_only = router_quality.fleet_and_scaledobjects()
    assert fleet.router == "llm-d"
    assert routed.external is not None
    assert engine_only.external is not None
    assert routed.external.metadata["router"] == "llm-d"
    assert "router" not in engine_only.external.metadata
    assert dataclasses.replace(routed.scaledobject, name=engine_only.name) != engine_only.scaledobject


def test_pd_row_fleet_loads_as_two_separate_pools() -> None:
    """The P/D row's fleet: two pools of cluster-70b's replica, each as large as maxReplicas allows."""
    config, so = pd_quality.fleet()
    assert so.external is not None
    assert config.cluster.physics == "separate"
    assert config.prefill_gpus == config.decode_gpus == so.max_replicas * config.cluster.gpus_per_replica


def test_targets_are_counted_and_each_missed_one_says_so() -> None:
    """The targets' heading counts those met; a missed one is printed MISSED beside its figure."""
    checks = [(True, "a: 99.7% (target >= 99.5%)"), (False, "b: 1.13x (target <= 1.10x)")]
    lines = target_lines("Targets", checks)
    assert lines == [
        "## Targets (1 of 2 met)",
        "  [met] a: 99.7% (target >= 99.5%)",
        "  [MISSED] b: 1.13x (target <= 1.10x)",
    ]
