"""scaler timeline against a real Prometheus holding two hours of the scaler's series.

The history is written as OpenMetrics and loaded with ``promtool tsdb create-blocks-from
openmetrics``, at fixed dates (retention long enough to keep them). Backfilled samples carry
no staleness markers, so the info-style series (binding signal, clamps) are written for every
label value, 1 where active and 0 elsewhere; the scraped exporter drops inactive ones and
Prometheus marks them stale, which the command reads the same way (a value of 1 counts).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import matplotlib.image
import pytest

from scaler.cli import main
from scaler.sim.prometheus import LocalPrometheus
from tests.conftest import require_prometheus

pytestmark = pytest.mark.prometheus

START = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
END = START + timedelta(hours=2)
STEP = 15
SIGNALS = ("floor", "tokens", "queue", "hold")


def phase(minute: float) -> tuple[str, int, bool]:
    """(binding signal, target, gpu clamp active) at a minute of the two hours."""
    if minute < 40:
        return "floor", 2, False
    if minute < 80:
        return "tokens", 2 + int((minute - 40) / 5), False
    if minute < 100:
        return "queue", 8 if minute < 90 else 12, minute < 90
    return "hold", 6, False


def scale_at(minute: float) -> float:
    """The capacity scale at a minute of the two hours: 0.5 from minute 50 to 70 (the model's fleet
    late), 1.6 from minute 100 (its tail long), else 1."""
    return 0.5 if 50 <= minute < 70 else 1.6 if minute >= 100 else 1.0


def history() -> str:
    """Two hours of both ScaledObjects' series as OpenMetrics, every 15 s, following ``phase``."""
    so = {
        "llama": 'namespace="inference",scaledobject="llama"',
        "mistral": 'namespace="inference",scaledobject="mistral"',
    }
    gauges = [
        "llm_scaler_desired_replicas",
        "llm_scaler_landed_replicas",
        "llm_scaler_input_ready_replicas",
        "llm_scaler_busy_replicas",
        "llm_scaler_forecast_busy_replicas",
        "llm_scaler_min_replicas",
        "llm_scaler_max_replicas",
        "llm_scaler_input_ttft_p95_seconds",
        "llm_scaler_input_ttft_p99_seconds",
        "llm_scaler_ttft_objective_seconds",
        "llm_scaler_binding_signal_info",
        "llm_scaler_clamp_active",
        "llm_scaler_capacity_scale_ratio",
        "kube_deployment_spec_replicas",
    ]
    lines = [f"# TYPE {g} gauge" for g in gauges]
    by_metric: dict[str, list[str]] = {g: [] for g in gauges}
    t0 = int(START.timestamp())
    for i in range(0, 2 * 3600 + 1, STEP):
        t = t0 + i
        signal, target, clamped = phase(i / 60)
        _, landed, _ = phase(max(0, i - 30) / 60)
        _, ready, _ = phase(max(0, i - 180) / 60)
        p99 = 3.0 if clamped else 1.0
        for name, labels in so.items():
            values = {
                "llm_scaler_desired_replicas": target,
                "llm_scaler_input_ready_replicas": ready,
                "llm_scaler_busy_replicas": target * 0.7,
                "llm_scaler_forecast_busy_replicas": target * 0.8,
                "llm_scaler_min_replicas": 2,
                "llm_scaler_max_replicas": 16,
                "llm_scaler_input_ttft_p95_seconds": 0.5,
                "llm_scaler_input_ttft_p99_seconds": p99,
                "llm_scaler_ttft_objective_seconds": 2,
                "llm_scaler_capacity_scale_ratio": scale_at(i / 60),
            }
            if name == "llama":  # the scaler has a Kubernetes source; mistral's comes from kube-state-metrics
                values["llm_scaler_landed_replicas"] = landed
            for metric, value in values.items():
                by_metric[metric].append(f"{metric}{{{labels}}} {value} {t}")
            for s in SIGNALS:
                by_metric["llm_scaler_binding_signal_info"].append(
                    f'llm_scaler_binding_signal_info{{{labels},signal="{s}"}} {int(s == signal)} {t}'
                )
            by_metric["llm_scaler_clamp_active"].append(
                f'llm_scaler_clamp_active{{{labels},kind="gpu_inventory"}} {int(clamped)} {t}'
            )
        by_metric["kube_deployment_spec_replicas"].append(
            f'kube_deployment_spec_replicas{{namespace="inference",deployment="vllm-mistral"}} {landed} {t}'
        )
    for metric in gauges:  # OpenMetrics wants each family's samples together
        lines.extend(by_metric[metric])
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def prometheus() -> Iterator[LocalPrometheus]:
    """A local Prometheus holding ``history()``, for the whole module."""
    require_prometheus()
    prom = LocalPrometheus(retention="100y")
    try:
        prom.import_openmetrics(history())
        prom.start()
        yield prom
    finally:
        prom.close()


def timeline(
    prometheus: LocalPrometheus, tmp_path: Path, name: str, *extra: str, command: str = "timeline"
) -> int:
    """Run ``scaler timeline`` on one inference ScaledObject over the two hours; its exit code."""
    return main(
        [
            command,
            "--name",
            f"inference/{name}",
            "--prometheus",
            prometheus.url,
            "--until",
            END.isoformat(),
            "--since",
            "2h",
            "--step",
            "15s",
            "--out",
            str(tmp_path / f"{name}.png"),
            *extra,
        ]
    )


def expected_steps() -> list[tuple[str, int, bool]]:
    """``phase`` at each 15 s step of the two hours."""
    return [phase(i / 60) for i in range(0, 2 * 3600 + 1, STEP)]


def test_the_decision_history_is_summed_up_and_drawn(
    prometheus: LocalPrometheus, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The timeline summarises steps, binding shares, clamps, TTFT misses and landed series, and draws."""
    assert timeline(prometheus, tmp_path, "llama", "--timezone", "Asia/Shanghai") == 0
    lines = capsys.readouterr().out.splitlines()
    steps = expected_steps()
    assert lines[0] == (
        f"inference/llama: a target at {len(steps)} steps of 15s, from 2026-11-30T08:00:00+00:00 to"
        " 2026-11-30T10:00:00+00:00 (2 h of the 2 h asked, 2026-11-30T08:00:00+00:00 to"
        " 2026-11-30T10:00:00+00:00); target 2 to 12"
    )
    shares = {s: sum(1 for p in steps if p[0] == s) / len(steps) for s in SIGNALS}
    ordered = sorted(shares.items(), key=lambda kv: -kv[1])
    assert lines[1] == "binding: " + ", ".join(f"{s} {100 * p:.1f}%" for s, p in ordered)
    assert lines[2] == f"clamps active: gpu_inventory {sum(p[2] for p in steps)} steps"
    assert (
        lines[3]
        == f"TTFT p99 above the objective: {100 * sum(p[2] for p in steps) / len(steps):.1f}% of steps"
    )
    minutes = [i / 60 for i in range(0, 2 * 3600 + 1, STEP)]
    below = sum(scale_at(m) < 1 for m in minutes) / len(steps)
    above = sum(scale_at(m) > 1 for m in minutes) / len(steps)
    assert lines[4].startswith(f"capacity scale: below 1 at {100 * below:.1f}% of steps, down to 0.5x")
    assert f"; above 1 at {100 * above:.1f}% of steps, up to 1.6x" in lines[4]
    assert lines[5] == "landed: llm_scaler_landed_replicas"
    image = matplotlib.image.imread(tmp_path / "llama.png")
    assert image.shape[:2] == (round(8.5 * 110), 13 * 110)
    assert image.std() > 0.05  # not a blank canvas


def test_kube_state_metrics_stand_in_for_what_landed(
    prometheus: LocalPrometheus, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without a landed series the timeline says so; with --deployment kube-state-metrics stands in."""
    assert timeline(prometheus, tmp_path, "mistral") == 0
    assert "landed: no series" in capsys.readouterr().out
    assert timeline(prometheus, tmp_path, "mistral", "--deployment", "vllm-mistral") == 0
    assert "landed: kube_deployment_spec_replicas (kube-state-metrics)" in capsys.readouterr().out


def test_the_old_name_still_draws_and_says_it_is_going(
    prometheus: LocalPrometheus, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``scaler trace``, the command's old name, still draws the timeline, with one deprecation line."""
    assert timeline(prometheus, tmp_path, "llama", command="trace") == 0
    err = capsys.readouterr().err
    assert "scaler: deprecated: `scaler trace` is now `scaler timeline`" in err
    assert (tmp_path / "llama.png").exists()


@pytest.mark.parametrize(
    ("name", "extra", "message"),
    [
        ("gemma", (), "no llm_scaler_desired_replicas for inference/gemma"),
        ("llama", ("--timezone", "Mars/Olympus"), "is not an IANA zone"),
    ],
    ids=["unknown-scaledobject", "unknown-timezone"],
)
def test_nothing_to_draw_says_why(
    prometheus: LocalPrometheus,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    extra: tuple[str, ...],
    message: str,
) -> None:
    """An unknown ScaledObject or zone exits 2, says why on stderr and writes no picture."""
    assert timeline(prometheus, tmp_path, name, *extra) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / f"{name}.png").exists()


def test_a_span_with_decisions_in_part_of_it_says_how_much(
    prometheus: LocalPrometheus, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ten minutes asked where the scaler decided for four: the summary says 4 min of the 10 asked."""
    until = (START + timedelta(minutes=4)).isoformat()
    code = main(
        [
            *("timeline", "--name", "inference/llama", "--prometheus", prometheus.url),
            *("--since", "10m", "--until", until, "--step", "15s", "--out", str(tmp_path / "t.png")),
        ]
    )
    assert code == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("inference/llama: a target at 17 steps of 15s, from 2026-11-30T08:00:00+00:00 to")
    assert "(4 min of the 10 min asked, 2026-11-30T07:54:00+00:00 to 2026-11-30T08:04:00+00:00)" in first
