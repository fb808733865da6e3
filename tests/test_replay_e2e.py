"""A short end-to-end replay: three policies, determinism, and the CLI's files."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from scaler.cli import main
from scaler.replay.compare import Comparison, compare
from scaler.replay.fleet.cluster import ClusterConfig
from scaler.replay.keda import load_scaledobject_model
from scaler.replay.policies import KedaPolicy
from scaler.replay.replay import run
from scaler.replay.report import all_figures
from scaler.replay.trace import Trace, load_requests, load_trace

ROOT = Path(__file__).resolve().parent.parent
AZURE = ROOT / "benchmarks" / "traces" / "azure2023_conv.csv"
SERVEGEN = ROOT / "benchmarks" / "traces" / "servegen_language_m-large_rate_10min.csv"
START = datetime.fromisoformat("2026-12-07T00:00:00+08:00")
CLUSTER = ClusterConfig.load(ROOT / "benchmarks" / "cluster-70b.yaml").with_overrides(gpus_free=16)


@pytest.fixture(scope="module")
def slice_15min() -> Trace:
    """The first 15 minutes of the Azure 2023 conversation trace."""
    return load_requests(AZURE).window(0, 900)


def _compare(trace: Trace) -> Comparison:
    scaler_so = load_scaledobject_model(ROOT / "benchmarks" / "scaledobject-70b.yaml")
    baseline = load_scaledobject_model(ROOT / "benchmarks" / "baseline-published.yaml")
    return compare(trace, CLUSTER, START, [("this scaler", scaler_so), ("keda", baseline)], 2.0, (2, 16))


def test_three_policies_on_a_slice(slice_15min: Trace) -> None:
    """All three policies serve every request with consistent figures; clairvoyant meets the goal."""
    comparison = _compare(slice_15min)
    rows = {f.policy: f for f in all_figures(comparison.results, 2.0)}
    assert set(rows) == {"this scaler", "keda", "clairvoyant"}
    for f in rows.values():
        assert f.requests == len(slice_15min)
        assert 0.0 <= f.within_objective <= 1.0
        assert f.ttft_p50_s <= f.ttft_p95_s <= f.ttft_p99_s
        assert f.gpu_hours > 0
        assert f.peak_replicas <= CLUSTER.max_replicas_on_gpus or f.pending_pod_minutes > 0
    assert rows["clairvoyant"].vs_clairvoyant == pytest.approx(1.0)
    assert comparison.search.goal_met
    assert rows["clairvoyant"].within_objective >= 0.995
    # At least the floor (2 replicas of 2 GPUs) for 15 minutes.
    assert rows["this scaler"].gpu_hours >= 2 * 2 * 0.25


def test_the_scaler_is_driven_through_its_engine(slice_15min: Trace) -> None:
    """The replayed scaler decides once per 15 s refresh through its engine, with real inputs."""
    so = load_scaledobject_model(ROOT / "benchmarks" / "scaledobject-70b.yaml")
    policy = KedaPolicy("this scaler", so)
    run(slice_15min, CLUSTER, policy, START, initial_ready=4)
    # One decision per 15 s refresh, from a rate window into the 10-minute warm-up (every series a
    # full minute, scaler.replay.fleet.series) through the 15 minutes.
    assert policy.decisions == pytest.approx((600 - 60 + 900) / 15, abs=1)
    assert policy.latest is not None
    obs = policy.latest.observation
    assert obs.prompt_tokens_per_s is not None
    assert obs.prompt_tokens_per_s > 0
    assert obs.current_replicas is not None
    assert obs.gpu_schedulable_replicas is not None


def test_deterministic_for_a_seed() -> None:
    """The same seed gives the same expanded trace and the same figures, wall time aside."""
    trace_a = load_trace(SERVEGEN, AZURE, seed=3, rate_scale=0.02).window(0, 1800)
    trace_b = load_trace(SERVEGEN, AZURE, seed=3, rate_scale=0.02).window(0, 1800)
    assert np.array_equal(trace_a.arrivals, trace_b.arrivals)
    first = [dataclasses.replace(f, wall_seconds=0) for f in all_figures(_compare(trace_a).results, 2.0)]
    second = [dataclasses.replace(f, wall_seconds=0) for f in all_figures(_compare(trace_b).results, 2.0)]
    assert first == second


def test_cli_prints_the_table_and_writes_the_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The replay CLI prints the comparison table, with the requests' mean sizes, and writes summary.json
    and replay.png."""
    short = tmp_path / "short.csv"
    lines = AZURE.read_text().splitlines()
    short.write_text("\n".join(lines[:3000]) + "\n")
    out = tmp_path / "out"
    code = main(
        [
            "replay",
            "--trace",
            str(short),
            "--scaledobject",
            str(ROOT / "scaler/examples/scaledobject.yaml"),
            "--out",
            str(out),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    for name in ("this scaler", "keda baseline", "clairvoyant", "static at peak", "GPU-h", "<= 2s"):
        assert name in printed
    summary = json.loads((out / "summary.json").read_text())
    assert [p["policy"] for p in summary["policies"]] == [
        "this scaler",
        "keda baseline",
        "clairvoyant",
        "static at peak",
    ]
    assert summary["policies"][0]["requests"] == 2999
    rows = np.loadtxt(short, delimiter=",", skiprows=1)
    prompt, completion = rows[:, 1].mean(), rows[:, 2].mean()
    assert (
        f"tokens per request: {prompt:,.0f} prompt, {completion:,.0f} completion (means over 2,999" in printed
    )
    assert summary["trace"]["prompt_tokens_mean"] == pytest.approx(prompt)
    assert summary["trace"]["output_tokens_mean"] == pytest.approx(completion)
    png = (out / "replay.png").read_bytes()
    assert png.startswith(b"\x89PNG")
    assert len(png) > 20_000


def test_cli_reports_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A rates-only trace with no request sizes makes the CLI exit 2 with a message on stderr."""
    code = main(
        [
            "replay",
            "--trace",
            str(SERVEGEN),
            "--scaledobject",
            str(ROOT / "scaler/examples/scaledobject.yaml"),
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 2
    assert "holds rates only" in capsys.readouterr().err


def test_clairvoyant_need_in_separate_physics_is_the_tighter_resource() -> None:
    """Separate physics: a bucket's need is the larger of prefill time and batch-slot time over slots."""
    from scaler.replay.compare import busy_per_bucket
    from scaler.replay.trace import Trace

    cfg = ClusterConfig(prefill_tokens_per_s=1000, decode_slots=4, decode_tokens_per_s_per_seq=10)
    trace = Trace(np.array([0.0, 1.0]), np.array([3000, 3000]), np.array([101, 101]), "t")
    shared = busy_per_bucket(trace, cfg.with_overrides(physics="shared"), 60.0)
    separate = busy_per_bucket(trace, cfg.with_overrides(physics="separate"), 60.0)
    assert shared[0] == pytest.approx((2 * 3.0 + 2 * 101 / 40) / 60)  # prefill s + decode at a full batch
    assert separate[0] == pytest.approx(max(2 * 3.0, 2 * (3.0 + 10.0) / 4) / 60)  # slots bind: 6.5 s


def test_the_replayed_scaler_measures_the_cold_start_of_the_pods_it_started() -> None:
    """A 420 s cluster: once 5 started pods are Ready the engine's lead is their p90, not 180 s."""
    from scaler.replay.fleet.cluster import Cluster

    slow = CLUSTER.with_overrides(cold_start_s=420.0, gpus_free=64)
    cluster = Cluster(slow, initial_ready=2)
    cluster.scale_to(8, 0.0)  # six new pods, bound at once (free GPUs), Ready at 420 s
    cluster.advance(419.0)
    assert len(cluster.ready_times) == 0
    cluster.advance(421.0)
    cold_starts = []
    for p in cluster.ready_times:
        assert p.ready_at is not None
        assert p.created_at is not None
        cold_starts.append(p.ready_at - p.created_at)
    assert cold_starts == [420.0] * 6
    from scaler.decider.coldstart import measure
    from scaler.inputs import Input
    from scaler.readings import Readings
    from scaler.replay.keda import PodSeries
    from scaler.replay.policies import TickInputs

    view = cluster.view(421.0)
    cold = measure(cluster.ready_times)
    policy = KedaPolicy("this scaler", load_scaledobject_model(ROOT / "benchmarks" / "scaledobject-70b.yaml"))
    policy.tick(
        TickInputs.seen(
            now_s=421.0,
            now=START,
            spec_replicas=8,
            status_replicas=view.replicas,
            pods=PodSeries([0] * 8, [0] * 8, 0.1, 8, slow.gpus_per_replica, slow.decode_slots),
            readings=Readings(
                {
                    Input.QUEUE_WAITING: 0.0,
                    Input.REQUESTS_RUNNING: 0.0,
                    Input.PROMPT_TOKENS_PER_S: 1000.0,
                    Input.GENERATION_TOKENS_PER_S: 100.0,
                    Input.CURRENT_REPLICAS: view.replicas,
                    Input.READY_REPLICAS: view.ready,
                    Input.PENDING_REPLICAS: view.pending,
                    Input.STARTING_REPLICAS: view.starting,
                    Input.GPU_SCHEDULABLE_REPLICAS: view.gpus_free // slow.gpus_per_replica,
                    Input.COLD_START_SECONDS: cold.lead_p90_s or 0.0,
                    Input.COLD_START_SAMPLES: cold.samples,
                }
            ),
        )
    )
    assert policy.latest is not None
    assert policy.latest.lead is not None
    assert (policy.latest.lead.seconds, policy.latest.lead.source) == (420.0, "measured p90 over 6 pods")


@pytest.mark.e2e  # starts two processes
def test_policies_in_parallel_give_the_same_figures(slice_15min: Trace) -> None:
    """Replayed in two processes, the policies' figures are those of one after the other."""
    scaler_so = load_scaledobject_model(ROOT / "benchmarks" / "scaledobject-70b.yaml")
    baseline = load_scaledobject_model(ROOT / "benchmarks" / "baseline-published.yaml")
    named = [("this scaler", scaler_so), ("keda", baseline)]

    def rows(workers: int) -> list[object]:
        comparison = compare(slice_15min, CLUSTER, START, named, 2.0, (2, 16), workers=workers)
        return [dataclasses.replace(f, wall_seconds=0) for f in all_figures(comparison.results, 2.0)]

    assert rows(2) == rows(1)


def test_the_closed_loop_feeds_the_measured_cold_start(slice_15min: Trace) -> None:
    """Through run(), the engine sees the cold start of the pods the replay started, as they turn Ready."""
    fast = CLUSTER.with_overrides(cold_start_s=60.0, gpus_free=64)
    policy = KedaPolicy("this scaler", load_scaledobject_model(ROOT / "benchmarks" / "scaledobject-70b.yaml"))
    run(slice_15min.window(0, 600), fast, policy, START, initial_ready=1)
    assert policy.latest is not None
    obs = policy.latest.observation
    assert obs.cold_start_samples is not None
    assert obs.cold_start_samples >= 1
    assert obs.cold_start_seconds == pytest.approx(60.0)


def test_replay_png_keeps_its_legends_off_the_data_and_the_demand_in_sight(slice_15min: Trace) -> None:
    """replay.png: each legend above its panel, the demand's outline above every policy's line, and
    the floor named on an axis of its own where no line covers its label."""
    import matplotlib.pyplot as plt

    from scaler.replay.report import PlotContext, replay_figure

    comparison = _compare(slice_15min)
    context = PlotContext(start=START, floor=2)
    fig = replay_figure(slice_15min, CLUSTER, comparison.runs, 2.0, "t", context)
    try:
        fig.canvas.draw()
        top, bottom, *twins = fig.axes
        for panel in (top, bottom):
            legend = panel.get_legend()
            assert legend is not None
            assert legend.get_window_extent().y0 >= panel.get_window_extent().y1 - 1  # above, not over
        demand = [line for line in top.get_lines() if line.get_color() == "0.45"]
        policies = [line for line in top.get_lines() if line.get_label().endswith(("Ready", "<= 2s)"))]
        assert demand
        assert policies
        assert demand[0].get_zorder() > max(line.get_zorder() for line in policies)
        labels = [t.get_text() for twin in twins for t in twin.get_yticklabels()]
        assert "floor (minReplicas) 2" in labels
    finally:
        plt.close(fig)
