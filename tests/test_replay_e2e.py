"""A short end-to-end replay: three policies, determinism, and the CLI's files."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from scaler.cli import main
from scaler.replay.cluster import ClusterConfig
from scaler.replay.compare import compare
from scaler.replay.keda import load_scaledobject_model
from scaler.replay.policies import KedaPolicy
from scaler.replay.replay import run
from scaler.replay.report import all_figures
from scaler.replay.trace import load_requests, load_trace

ROOT = Path(__file__).resolve().parent.parent
AZURE = ROOT / "benchmarks" / "traces" / "azure2023_conv.csv"
SERVEGEN = ROOT / "benchmarks" / "traces" / "servegen_language_m-large_rate_10min.csv"
START = datetime.fromisoformat("2026-12-07T00:00:00+08:00")
CLUSTER = ClusterConfig.load(ROOT / "benchmarks" / "cluster-70b.yaml").with_overrides(gpus_free=16)


@pytest.fixture(scope="module")
def slice_15min():  # type: ignore[no-untyped-def]
    return load_requests(AZURE).window(0, 900)


def _compare(trace):  # type: ignore[no-untyped-def]
    scaler_so = load_scaledobject_model(ROOT / "benchmarks" / "scaledobject-70b.yaml")
    baseline = load_scaledobject_model(ROOT / "benchmarks" / "baseline-published.yaml")
    return compare(trace, CLUSTER, START, [("this scaler", scaler_so), ("keda", baseline)], 2.0, (2, 16))


def test_three_policies_on_a_slice(slice_15min) -> None:  # type: ignore[no-untyped-def]
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


def test_the_scaler_is_driven_through_its_engine(slice_15min) -> None:  # type: ignore[no-untyped-def]
    so = load_scaledobject_model(ROOT / "benchmarks" / "scaledobject-70b.yaml")
    policy = KedaPolicy("this scaler", so)
    run(slice_15min, CLUSTER, policy, START, initial_ready=4)
    # One decision per 15 s refresh, over the 10-minute warm-up and the 15 minutes.
    assert policy.decisions == pytest.approx((600 + 900) / 15, abs=2)
    assert policy.latest is not None
    obs = policy.latest.observation
    assert obs.prompt_tokens_per_s is not None and obs.prompt_tokens_per_s > 0
    assert obs.current_replicas is not None and obs.gpu_schedulable_replicas is not None


def test_deterministic_for_a_seed() -> None:
    trace_a = load_trace(SERVEGEN, AZURE, seed=3, rate_scale=0.02).window(0, 1800)
    trace_b = load_trace(SERVEGEN, AZURE, seed=3, rate_scale=0.02).window(0, 1800)
    assert np.array_equal(trace_a.arrivals, trace_b.arrivals)
    first = [dataclasses.replace(f, wall_seconds=0) for f in all_figures(_compare(trace_a).results, 2.0)]
    second = [dataclasses.replace(f, wall_seconds=0) for f in all_figures(_compare(trace_b).results, 2.0)]
    assert first == second


def test_cli_prints_the_table_and_writes_the_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
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
    for name in ("this scaler", "keda baseline", "clairvoyant", "GPU-h", "<= 2s"):
        assert name in printed
    summary = json.loads((out / "summary.json").read_text())
    assert [p["policy"] for p in summary["policies"]] == ["this scaler", "keda baseline", "clairvoyant"]
    assert summary["policies"][0]["requests"] == 2999
    png = (out / "replay.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 20_000


def test_cli_reports_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
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
