"""The quality benchmarks' set-ups still match the code they measure.

The benchmarks run for minutes and no test runs them whole; what breaks them when the code moves
is their set-up: the files they load and check against each other, and the ablations, each a
decider stage removed or a constant moved. An ablation that changed nothing would report its
mechanism as worth nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from benchmarks import decision_quality, pd_quality, router_quality
from benchmarks.harness import target_lines
from scaler.config import parse_metadata
from scaler.decider.params import DEFAULT, DeciderParams
from scaler.decider.stages import ALL, Stages
from scaler.model import Capacity
from scaler.replay.fleet.cluster import ClusterConfig
from scaler.replay.keda import load_scaledobject_model

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("ablation", decision_quality.ABLATIONS, ids=lambda a: a.name)
def test_each_ablation_takes_out_one_stage_or_moves_a_constant_from_its_default(
    ablation: decision_quality.Ablation,
) -> None:
    """An ablation removes a stage the decider has, or sets constants it has to values they accept
    that are not their defaults (an ablation that changes nothing would report its mechanism as
    worth nothing)."""
    assert (ablation.stage is None) != (not ablation.params), "a stage or constants, one of them"
    engine = ablation.engine(parse_metadata({}).spec)
    if ablation.stage is not None:
        assert getattr(engine.stages, ablation.stage) is False
        assert getattr(ALL, ablation.stage) is True
    for field, value in ablation.params:
        assert getattr(engine.params, field) == value
        assert getattr(DEFAULT, field) != value, f"{ablation.name!r} sets {field} to its default"


def test_every_mechanism_is_named_once_and_every_stage_has_an_ablation() -> None:
    """Each mechanism is taken out through ``Ablation.engine`` (one code version, no patching): each
    is named once, and every stage of the decider is some ablation's."""
    names = [a.name for a in decision_quality.ABLATIONS]
    assert len(names) == len(set(names))
    assert "none" not in names
    decision_quality._ablate("none")  # the whole decider
    stages = {f.name for f in dataclasses.fields(Stages)}
    ablated = {a.stage for a in decision_quality.ABLATIONS}
    assert stages <= ablated, f"stages no ablation removes: {sorted(stages - ablated)}"
    assert not any(f.type in ("bool", bool) for f in dataclasses.fields(DeciderParams)), (
        "a switch among the production parameters: it belongs in scaler.decider.stages"
    )


def test_a_misspelled_stage_is_refused_naming_it() -> None:
    """``Stages.without`` names what it does not know rather than removing nothing."""
    with pytest.raises(ValueError, match="no decider stage named calibrashun"):
        ALL.without("calibrashun")


def test_the_serving_models_are_cluster_models_and_pooled_is_the_replays_default() -> None:
    """Every serving model builds a valid fleet, each differs from the others, and ``pooled`` is
    the cluster model's default serving (so its figures are those of the replay before issue 28)."""
    fleets = {
        name: decision_quality.fleet(decision_quality.Cell("azure", 1, "shared", name))
        for name in decision_quality.SERVING
    }
    serving = ("dispatch", "waiting", "phase_histograms", "pod_maxima")
    assert len({tuple(getattr(f, k) for k in serving) for f in fleets.values()}) == len(fleets)
    default = ClusterConfig.load(ROOT / "benchmarks" / "cluster-70b.yaml")
    assert all(getattr(fleets["pooled"], k) == getattr(default, k) for k in serving)
    assert fleets["random"].dispatch_seed == 1  # the cell's seed
    assert set(decision_quality.SERVING_RUN) <= set(decision_quality.SERVING)


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


FLEET = ClusterConfig.load(ROOT / "benchmarks" / "cluster-70b.yaml")  # 5,000 prompt tokens/s, 24 slots
TRUTH = (FLEET.prefill_tokens_per_s, float(FLEET.decode_slots), FLEET.decode_tokens_per_s)


def _cell(trace: str, rows: dict[str, tuple[float, float, float | None]]) -> dict[str, Any]:
    """A benchmark cell as run_cells returns it: per policy (attainment, x the clairvoyant, the
    prefill rate its decisions used 15 minutes in; None: unknown), slots right, TTFT p99 1 s."""
    figures = []
    for policy, (attainment, ratio, prefill) in rows.items():
        row: dict[str, Any] = {
            "policy": policy,
            "within_objective": attainment,
            "vs_clairvoyant": ratio,
            "vs_clairvoyant_equal_attainment": ratio,
            "ttft_p99_s": 1.0,
            "scale_events": 4,
        }
        if policy.startswith("scaler, "):
            used = Capacity(prefill, 24.0, "measured" if prefill else "unknown", "measured")
            row["estimates"] = {"after_15_min": decision_quality.estimate(used, TRUTH)}
        figures.append(row)
    return {
        "trace": trace,
        "seed": 0,
        "physics": "shared",
        "serving": "random",
        "objective_s": 2.0,
        "figures": figures,
    }


def test_the_targets_are_issue_28s_each_beside_its_figure() -> None:
    """Azure at 1.08x the clairvoyant's frontier meets issue 35's 1.10x; an estimate off by 20% or
    unknown misses the 15%; a condition 1.2 points under configured right misses, one 0.5 under meets;
    the decider is held against the reference policy in the cell."""
    cell = _cell(
        "azure",
        {
            "scaler, right": (0.997, 1.08, 5000.0),
            "scaler, 2x too high": (0.985, 1.08, 6000.0),
            "scaler, half too low": (0.992, 1.09, 4800.0),
            "scaler, not configured": (0.996, 1.06, None),
            "reference": (0.995, 1.10, None),
            "clairvoyant": (0.999, 1.0, None),
        },
    )
    checks = {text: ok for ok, text in decision_quality.verdicts([cell])}
    where = "azure seed 0 shared random"
    assert checks[
        f"{where}, capacities right: 99.70% within 2 s at 1.08x at equal attainment"
        " (target >= 99.50% at <= 1.10x)"
    ]
    assert checks[
        f"{where}, capacities right: 99.70% at 1.08x at equal attainment; the reference policy 99.50%"
        " at 1.10x (target: at or below the reference policy's x)"
    ]
    assert not checks[
        f"{where}, capacities 2x too high: prefill rate 15 min in 6,000 tokens/s (measured),"
        " 1.20x the replay's 5,000 (target within 15%)"
    ]
    assert not checks[
        f"{where}, capacities not configured: prefill rate 15 min in unknown, the replay's 5,000 tokens/s"
        " (target within 15%)"
    ]
    assert not checks[
        f"{where}, 2x too high vs right: -1.20 points, +0.00x (target within 1 point and 0.05x)"
    ]
    assert checks[f"{where}, half too low vs right: -0.50 points, +0.01x (target within 1 point and 0.05x)"]
    # per condition: attainment, two estimates, scale changes; three conditions against right; the reference
    assert len(checks) == 4 * 4 + 3 + 1


def test_a_step_cell_on_another_profile_replays_its_replica_and_its_rate() -> None:
    """``--profile llama-3-70b-4xh100 --rate 8``: the cell's fleet is that replica (its profile, its
    four GPUs), its truths are that replica's saturation run (Llama 3 70B computes prompts about 3.5
    times as fast on H100s as on A100s), its trace is the default's at 8 times the rate, and its name
    says both; the fluid physics ignores the profile."""
    h100 = decision_quality.Cell("azure", 0, "step", "v1", profile="llama-3-70b-4xh100", rate=8.0)
    a100 = decision_quality.Cell("azure", 0, "step", "v1")
    assert decision_quality.fleet(h100).profile == "llama-3-70b-4xh100"
    assert decision_quality.fleet(a100).profile == decision_quality.STEP_PROFILE != h100.profile
    fast = decision_quality.truths("azure", 0, "step", h100.profile)
    slow = decision_quality.truths("azure", 0, "step")
    assert 3.0 < fast[0] / slow[0] < 4.0
    assert len(decision_quality.cell_trace(h100).arrivals) == 8 * len(
        decision_quality.cell_trace(a100).arrivals
    )
    assert h100.describe() == "azure x8 seed 0 step llama-3-70b-4xh100 v1"
    assert a100.describe() == "azure seed 0 step v1"
    fluid = decision_quality.Cell("azure", 0, "shared", "v1", profile="llama-3-70b-4xh100")
    assert decision_quality.fleet(fluid).physics == "shared"
    assert decision_quality.truths("azure", 0, "shared", fluid.profile) == decision_quality.truths(
        "azure", 0, "shared"
    )


def test_a_looser_objective_is_the_one_the_scaler_and_the_grading_hold(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--objective 2``: the cell's objective is its trace's times two (Azure 4 s, long prompts 16 s),
    the scaler's ScaledObject holds it (``ttftObjectiveSeconds``), and its name says so. A factor
    of 0 or less is a usage error naming it, before anything is replayed."""
    loose = decision_quality.Cell("longprompt", 0, "step", "v1", objective_x=2.0)
    assert loose.objective_s == 2 * decision_quality.objective("longprompt") == 16.0
    assert decision_quality.Cell("azure", 0, "step", "v1", objective_x=2.0).objective_s == 4.0
    assert decision_quality.Cell("azure", 0, "step", "v1").objective_s == 2.0
    so = load_scaledobject_model(decision_quality.HERE / "scaledobject-70b.yaml")
    external = decision_quality.with_truth(so, loose, 1.0).external
    assert external is not None
    assert external.metadata["ttftObjectiveSeconds"] == "16"
    assert loose.describe() == "longprompt objective x2 seed 0 step v1"
    for flag, bad in (("--objective", "0"), ("--rate", "-1")):
        monkeypatch.setattr("sys.argv", ["decision_quality.py", "--quick", flag, bad])
        with pytest.raises(SystemExit):
            decision_quality.main()
        assert f"{flag} takes a factor above 0, not {bad}" in capsys.readouterr().err


def test_hours_cut_a_cell_s_trace_and_a_bad_pair_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    """``--hours bursty=1`` replays the bursty trace's first hour (its default is 6); a pair naming
    no trace, or hours beyond the trace's, is a usage error naming it."""
    cut = decision_quality.cell_trace(decision_quality.Cell("bursty", 0, "separate", "v1", hours=1.0))
    whole = decision_quality.cell_trace(decision_quality.Cell("bursty", 0, "separate", "v1"))
    assert 0 < len(cut.arrivals) < len(whole.arrivals)
    assert max(cut.arrivals) < 3600.0 < max(whole.arrivals)
    parser = argparse.ArgumentParser(prog="decision_quality.py")
    assert decision_quality._hours(parser, ["bursty=1", "servegen=6"]) == {"bursty": 1.0, "servegen": 6.0}
    for bad in ("bursty=7", "nosuch=1", "servegen=x"):
        with pytest.raises(SystemExit):
            decision_quality._hours(parser, [bad])
        assert f"--hours {bad}: want TRACE=H" in capsys.readouterr().err


def test_the_constant_fleet_is_the_smallest_within_reach_of_the_clairvoyant() -> None:
    """``constant_fleet`` stops at the first constant fleet within 2 points of the clairvoyant: that
    one is, and the one a replica smaller is not; its figures are the fleet's replayed alone."""
    from benchmarks import constant_fleet

    cell = decision_quality.Cell("bursty", 0, "separate", "v1", hours=0.5)
    found = constant_fleet.constant_cell(cell)
    chosen = found["constant"]
    assert chosen["within_objective"] >= found["clairvoyant"] - constant_fleet.WITHIN
    assert chosen["replicas"] > 2, "a cell the smallest fleet meets shows nothing"
    trace = decision_quality.cell_trace(cell)
    objective_s = decision_quality.objective("bursty")
    cfg, _, _, _ = decision_quality.reference(trace, decision_quality.fleet(cell), objective_s)
    attainment, hours = constant_fleet.held(trace, cfg, chosen["replicas"], objective_s)
    assert (attainment, hours) == (chosen["within_objective"], chosen["gpu_hours"])
    smaller, _ = constant_fleet.held(trace, cfg, chosen["replicas"] - 1, objective_s)
    assert smaller < found["clairvoyant"] - constant_fleet.WITHIN
