"""The quality benchmarks' set-ups still match the code they measure.

The benchmarks run for minutes and no test runs them whole; what breaks them when the code moves
is their set-up: the files they load and check against each other, and the ablations, which
replace a function or a parameter of the decider by name. An ablation that replaced a name the
code no longer has would change nothing and report its mechanism as worth nothing.
"""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks import decision_quality, pd_quality, router_quality
from benchmarks.harness import target_lines
from scaler.params import DeciderParams


def test_every_ablation_is_a_set_of_decider_switches() -> None:
    """Each mechanism is removed through ``DeciderParams`` (one code version, no patching): every
    ablation the benchmark names is a parameter ablation, and every switch has an ablation."""
    assert set(decision_quality.ABLATIONS) - {"none"} == set(decision_quality.ABLATION_PARAMS)
    switches = {f.name for f in dataclasses.fields(DeciderParams) if f.type in ("bool", bool)}
    ablated = {field for change in decision_quality.ABLATION_PARAMS.values() for field in change}
    assert switches <= ablated, f"switches no ablation turns off: {sorted(switches - ablated)}"


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
