"""The command line as a user runs it: real processes, real files, real signals."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from scaler.proto import externalscaler_pb2 as pb
from scaler.proto import externalscaler_pb2_grpc as pb_grpc
from tests.helpers import get_metrics, serve, wait_serving

pytestmark = pytest.mark.e2e  # every test runs `scaler` in a subprocess

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "scaler" / "examples" / "scaledobject.yaml"
SCALER = [sys.executable, "-m", "scaler"]


def free_port() -> int:
    """A loopback TCP port free at the time of asking."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``python -m scaler`` with ``args``, capturing its text output."""
    return subprocess.run([*SCALER, *args], capture_output=True, text=True, timeout=60, check=check)


def write_observations(path: Path, rows: list[dict[str, object]]) -> Path:
    """Write ``rows`` to ``path`` as JSON lines and return the path."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def row(now: str, waiting: float, prompt: float = 0, generation: float = 0) -> dict[str, object]:
    """An observation-log row at ``now``: ``waiting`` queued, ``prompt`` and ``generation`` tokens/s,
    2 replicas and GPUs for 4."""
    return {
        "now": now,
        "queue_waiting": waiting,
        "prompt_tokens_per_s": prompt,
        "generation_tokens_per_s": generation,
        "current_replicas": 2,
        "gpu_schedulable_replicas": 4,
    }


def test_dry_run_prints_one_line_per_observation(tmp_path: Path) -> None:
    """dry-run prints one line per observation, a backlog counting only at two refreshes in a row."""
    rows = [row("2026-12-01T03:00:00Z", 0), *(row(f"2026-12-01T03:00:{s}Z", 400) for s in (15, 30))]
    obs = write_observations(tmp_path / "obs.jsonl", rows)
    lines = run("dry-run", "--scaledobject", str(EXAMPLE), "--observations", str(obs)).stdout.splitlines()
    assert len(lines) == 4
    out, summary = lines[:3], lines[3]
    # the example's windows are written in Asia/Shanghai: its wall time stands beside UTC
    assert out[0].startswith("2026-12-01T03:00:00Z (11:00:00 Asia/Shanghai) target=6 prewarm")
    assert summary == (
        "summary: 3 decisions; binding prewarm 2, queue 1; clamps max 1, gpu_inventory 1;"
        " load signal off in 3"
    )
    assert "queue=0" in out[1]  # 400 waiting at one refresh only: not yet a backlog
    assert "target=6" in out[2]  # at two in a row: 400 / 10
    assert "queue=40*" in out[2]
    assert "gpu_inventory" in out[2]
    assert "max 40->16" in out[2]
    # each line says which capacities the load signal used and where they came from
    assert "capacity: 9,000 prompt tokens/s (configured)" in out[0]


def test_dry_run_json_output(tmp_path: Path) -> None:
    """dry-run --output json prints the decision, its proposals, clamps and capacity as JSON."""
    obs = write_observations(
        tmp_path / "obs.jsonl", [row("2026-12-05T03:00:00Z", 5, prompt=100, generation=20)]
    )
    out = run(
        "dry-run", "--scaledobject", str(EXAMPLE), "--observations", str(obs), "--output", "json"
    ).stdout
    decision = json.loads(out)
    assert decision["scaledobject"] == "inference/llama-3-8b"
    assert decision["replicas"] == 2
    assert decision["binding"] == "floor"
    assert set(decision["proposals"]) >= {"floor", "queue"}
    assert decision["clamps"] == []
    assert decision["capacity"] == {
        "prefill_tokens_per_s": 9000.0,
        "slots": None,
        "prefill_source": "configured",
        "slots_source": "unknown",
        "prefill_samples": 0,
        "slots_samples": 0,
        "decode_slowdown": None,
        "itl_slots": None,
        "itl_base_s": None,
        "itl_per_sequence_s": None,
        "prefill_method": "configured",
        "slots_method": "",
        "saturation": "unsettled",
        "pooled": None,
    }


def test_dry_run_reports_bad_metadata_and_bad_lines(tmp_path: Path) -> None:
    """Bad metadata or an observation without a timezone exits 2 and names the key or the line."""
    so = tmp_path / "so.yaml"
    so.write_text(EXAMPLE.read_text().replace('minReplicas: "2"', 'minReplicas: "0"'))
    obs = write_observations(tmp_path / "obs.jsonl", [{"now": "2026-12-01T03:00:00Z"}])
    failed = run("dry-run", "--scaledobject", str(so), "--observations", str(obs), check=False)
    assert failed.returncode == 2
    assert "minReplicas" in failed.stderr
    (tmp_path / "bad.jsonl").write_text('{"now": "2026-12-01T03:00:00"}\n')
    failed = run(
        "dry-run", "--scaledobject", str(EXAMPLE), "--observations", str(tmp_path / "bad.jsonl"), check=False
    )
    assert failed.returncode == 2
    assert "bad.jsonl:1" in failed.stderr
    assert "timezone" in failed.stderr


def test_offline_demo_replays_the_embedded_observations() -> None:
    """demo --offline prints its replay, with floor, prewarm and load binding and a GPU clamp."""
    *out, summary = run("demo", "--offline").stdout.splitlines()
    assert len(out) > 30
    assert summary.startswith(f"summary: {len(out)} decisions; binding ")
    bindings = {line.split("target=")[1].split()[1] for line in out}
    assert {"floor", "prewarm", "load"} <= bindings
    assert any("gpu_inventory" in line for line in out)


@pytest.mark.slow
def test_serve_answers_then_stops_gracefully_on_sigterm() -> None:
    """serve answers gRPC, then on SIGTERM ends its streams, logs its grace period and exits 0."""
    port = free_port()
    env = {**os.environ, "SCALER_LOG_FORMAT": "json"}
    proc = serve(port, "--metrics-port", "0", "--grace", "5", env=env)
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        wait_serving(proc, channel)
        stub = pb_grpc.ExternalScalerStub(channel)  # type: ignore[no-untyped-call]
        ref = pb.ScaledObjectRef(name="llama", namespace="inference", scalerMetadata={"minReplicas": "3"})
        assert get_metrics(stub, pb.GetMetricsRequest(scaledObjectRef=ref)).metricValues[0].metricValue == 3
        stream = stub.StreamIsActive(ref)
        assert next(stream).result is True
        proc.send_signal(signal.SIGTERM)
        with pytest.raises(StopIteration):
            next(stream)  # the stream ends cleanly when the server shuts down, not at the grace's end
        assert proc.wait(timeout=15) == 0
        assert proc.stderr is not None
        logs = [json.loads(line) for line in proc.stderr.read().splitlines() if line.startswith("{")]
        events = [entry["event"] for entry in logs]
        assert events[0] == "serving"
        assert next(entry for entry in logs if entry["event"] == "stopping")["grace_seconds"] == 5
        assert events[-1] == "stopped"
        decision = next(entry for entry in logs if entry["event"] == "decision")
        assert decision["namespace"] == "inference"
        assert decision["scaledobject"] == "llama"
        assert decision["replicas"] == 3
    finally:
        if proc.poll() is None:
            proc.kill()
