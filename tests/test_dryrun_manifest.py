"""What the dry-run says besides decisions: KEDA's view of the manifest, local time, a summary."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.config import engine_for
from scaler.decider.engine import Observation
from scaler.inventory import scaledobject_from_json
from scaler.outputs.dryrun import Summary, format_line, manifest_warnings

EXAMPLE = Path(__file__).resolve().parents[1] / "scaler" / "examples" / "scaledobject.yaml"


def _spec(**changes: Any) -> dict[str, Any]:
    spec: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())["spec"]
    spec.update(changes)
    return spec


def _warnings(spec: dict[str, Any], trigger_index: int, low: int, high: int) -> list[str]:
    """The dry-run's warnings for a ScaledObject of ``spec``, read through the one model."""
    so = scaledobject_from_json({"kind": "ScaledObject", "spec": spec}, trigger_index, strict=True)
    assert so.trigger_index == trigger_index
    return manifest_warnings(so, low, high)


def test_the_example_draws_no_warning() -> None:
    """The example ScaledObject is one KEDA accepts and reads as the scaler does."""
    assert _warnings(_spec(), 0, 2, 16) == []


def test_unquoted_metadata_values_are_named_with_the_quoted_form() -> None:
    """A YAML number or bool in the metadata is named with the string KEDA's CRD wants."""
    spec = _spec()
    spec["triggers"][0]["metadata"].update({"minReplicas": 2, "gpuCheck": True, "maxPendingReplicas": 0})
    warnings = _warnings(spec, 0, 2, 16)
    assert len(warnings) == 3
    assert any("triggers[0].metadata.minReplicas: 2 is not a string" in w for w in warnings)
    assert any('write gpuCheck: "true"' in w for w in warnings)
    assert any('write maxPendingReplicas: "0"' in w for w in warnings)


def test_target_utilization_is_named_as_no_longer_used() -> None:
    """targetUtilization is accepted (old manifests keep working) and the warning says to delete it."""
    spec = _spec()
    spec["triggers"][0]["metadata"]["targetUtilization"] = "0.75"
    warnings = _warnings(spec, 0, 2, 16)
    assert len(warnings) == 1
    assert "targetUtilization is no longer used" in warnings[0]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"minReplicaCount": 1}, "spec.minReplicaCount 1 differs from metadata minReplicas 2"),
        ({"maxReplicaCount": 30}, "spec.maxReplicaCount 30 differs from metadata maxReplicas 16"),
        (
            {"minReplicaCount": None},
            "spec.minReplicaCount 0 (not set: KEDA's default 0) differs from metadata minReplicas 2",
        ),
    ],
    ids=["min-differs", "max-differs", "min-unset"],
)
def test_replica_counts_that_disagree_with_the_metadata_are_named(
    changes: dict[str, Any], expected: str
) -> None:
    """minReplicaCount/maxReplicaCount (KEDA's defaults when unset) must equal the metadata's bounds."""
    warnings = _warnings(_spec(**changes), 0, 2, 16)
    assert len(warnings) == 1
    assert expected in warnings[0]


def test_a_second_trigger_is_named_with_what_it_costs() -> None:
    """Another trigger beside this one is reported: the HPA's max defeats the GPU check."""
    spec = _spec()
    spec["triggers"].insert(0, {"type": "cpu", "metadata": {"value": "60"}})
    warnings = _warnings(spec, 1, 2, 16)
    assert warnings == [
        "2 triggers (also cpu): the HPA takes the largest of its triggers' metrics, so while another"
        " trigger asks for more, the GPU check cannot hold a scale-up"
    ]


def _decision(metadata: dict[str, str], **inputs: Any) -> Any:
    engine = engine_for({"minReplicas": "2", "maxReplicas": "16", **metadata})
    return engine.decide(Observation(now=datetime(2026, 12, 7, 1, 0, tzinfo=UTC), **inputs))


def test_the_line_shows_local_time_beside_utc_in_the_scaledobjects_zone() -> None:
    """With a timezone other than UTC each line carries the wall time the windows are written in."""
    decision = _decision({"timezone": "Asia/Shanghai"}, queue_waiting=0)
    assert format_line(decision, None, "Asia/Shanghai").startswith(
        "2026-12-07T01:00:00Z (09:00:00 Asia/Shanghai) target="
    )
    assert format_line(decision).startswith("2026-12-07T01:00:00Z target=")


def test_the_line_says_why_the_load_signal_is_off() -> None:
    """Without demand, capacity or a required input the line says the load signal is off, and why."""
    nothing = format_line(_decision({}, queue_waiting=0))
    assert "| load off: no demand measured yet" in nothing
    unknown = format_line(_decision({}, queue_waiting=0, prompt_tokens_per_s=9000.0, requests_running=20.0))
    assert "| load off: prefill: capacity unknown" in unknown
    assert "slots: capacity unknown" in unknown
    missing = format_line(_decision({"promptTokensPerSecondPerReplica": "9000"}, queue_waiting=0))
    assert "| load off: inputs missing: prompt_tokens_per_s: no data" in missing
    on = format_line(
        _decision({"promptTokensPerSecondPerReplica": "9000"}, queue_waiting=0, prompt_tokens_per_s=9000.0)
    )
    assert "load off" not in on


def test_the_summary_counts_bindings_and_clamps() -> None:
    """The closing line counts decisions per binding signal and the clamps that changed a target."""
    summary = Summary()
    summary.add(_decision({}, queue_waiting=0))
    summary.add(_decision({"maxReplicas": "4"}, queue_waiting=400))
    summary.add(_decision({"maxReplicas": "4"}, queue_waiting=400))
    assert summary.line() == (
        "summary: 3 decisions; binding queue 2, floor 1; clamps max 2; load signal off in 3"
    )


def _observations(path: Path, rows: int) -> Path:
    lines = [
        json.dumps({"now": 1_796_000_000 + 15 * i, "queue_waiting": i % 50, "current_replicas": 2})
        for i in range(rows)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _dry_run(*args: str) -> list[str]:
    return [sys.executable, "-m", "scaler", "dry-run", "--scaledobject", str(EXAMPLE), *args]


@pytest.mark.e2e
def test_dry_run_ends_with_the_summary_line(tmp_path: Path) -> None:
    """Text output ends with the summary; JSON output keeps stdout JSON lines and puts it on stderr."""
    obs = str(_observations(tmp_path / "obs.jsonl", 5))
    text = subprocess.run(_dry_run("--observations", obs), capture_output=True, text=True, check=True)
    lines = text.stdout.splitlines()
    assert len(lines) == 6
    assert lines[-1].startswith("summary: 5 decisions; binding ")
    as_json = subprocess.run(
        _dry_run("--observations", obs, "--output", "json"), capture_output=True, text=True, check=True
    )
    assert [json.loads(line)["replicas"] >= 1 for line in as_json.stdout.splitlines()] == [True] * 5
    assert as_json.stderr.strip().startswith("summary: 5 decisions")


@pytest.mark.e2e
def test_piping_into_head_exits_quietly(tmp_path: Path) -> None:
    """A reader that leaves early (| head) ends the dry-run with status 0 and nothing on stderr."""
    obs = str(_observations(tmp_path / "obs.jsonl", 3000))  # far more than a pipe buffer holds
    proc = subprocess.Popen(
        _dry_run("--observations", obs), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    assert proc.wait(timeout=60) == 0
    assert first.startswith("20")
    assert proc.stderr.read() == ""
