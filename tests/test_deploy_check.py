"""docs/deploy.md's pre-apply check, as a user runs it from a laptop: ``scaler convert`` writes the
cluster's own Prometheus (``prometheusAddress`` from ``serverAddress``), and ``scaler dry-run
--scaledobject converted.yaml --prometheus URL --once`` reads the Prometheus given on the
command line, saying that it overrides the written one (issue 31.1)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scaler.sim.fleet import PodLoad, SimulatedFleet
from scaler.sim.prometheus import LocalPrometheus
from tests.conftest import require_prometheus
from tests.helpers import plain_scaledobject

pytestmark = pytest.mark.prometheus

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = (ROOT / "docs" / "deploy.md").read_text()
IN_CLUSTER = "http://prometheus-operated.monitoring:9090"  # unreachable from here, as from a laptop
PLAIN = plain_scaledobject(
    IN_CLUSTER,
    'sum(vllm:num_requests_waiting{model_name="meta-llama/Llama-3.1-8B-Instruct"})',
    threshold=10,
    min_replicas=1,
    max_replicas=16,
)


def scaler(*args: str) -> subprocess.CompletedProcess[str]:
    """``scaler ARGS`` in a subprocess, as the deploy guide runs it."""
    return subprocess.run(
        [sys.executable, "-m", "scaler", *args], capture_output=True, text=True, timeout=90, check=False
    )


def test_the_deploy_guide_quotes_the_check() -> None:
    """Deploy step 3 names the check this test runs."""
    step = DEPLOY.split("3. Apply the ScaledObject", 1)[1].split("\n4. ", 1)[0]
    assert "`scaler dry-run --scaledobject SO.yaml --prometheus URL --once`" in " ".join(step.split())


def test_dry_run_on_convert_s_output_reads_the_prometheus_given(
    fleet: SimulatedFleet, prometheus: LocalPrometheus, tmp_path: Path
) -> None:
    """convert, then dry-run --prometheus on its output: the flag wins over prometheusAddress, one
    stderr line says so, and the decision is made from the live queue."""
    require_prometheus()
    fleet.set_fleet_load(PodLoad(waiting=55, running=10))
    assert prometheus.wait_for("sum(vllm:num_requests_waiting) == 55")
    old, converted = tmp_path / "old.yaml", tmp_path / "converted.yaml"
    old.write_text(PLAIN)
    done = scaler("convert", str(old), "--out", str(converted))
    assert done.returncode == 0, done.stderr
    assert f"prometheusAddress: {IN_CLUSTER}" in converted.read_text()
    check = scaler(
        "dry-run",
        "--scaledobject",
        str(converted),
        "--prometheus",
        prometheus.url,
        "--once",
        "--rate-window",
        "5s",
    )
    assert check.returncode == 0, check.stderr
    said = [line for line in check.stderr.splitlines() if "wins over" in line]
    assert said == [
        f"scaler dry-run: --prometheus {prometheus.url} wins over the prometheusAddress {IN_CLUSTER}"
        " of inference/llama"
    ]
    lines = check.stdout.splitlines()
    assert "queue=6*" in lines[0]  # 55 waiting over 10 per replica: 6 replicas
    assert lines[-1].startswith("summary: 1 decisions; binding queue 1;")
