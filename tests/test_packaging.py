"""The wheel: built with `python -m build`, installed into a fresh venv without the replay's
extra, it serves KEDA's API; `scaler --version` names the version; the image's pins are current.

The fresh venv installs the runtime dependencies from the package index pinned by
constraints.txt (pip's cache makes a second run quick); nothing of this checkout's .venv.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import urllib.request
import venv
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

import scaler
from scaler.sim.prometheus import free_port
from tests.helpers import wait_serving

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from this checkout, once for the module."""
    out = tmp_path_factory.mktemp("dist")
    # --no-isolation: build with this venv's setuptools instead of downloading one.
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=240,
    )
    (built,) = out.glob("llm_gpu_scaler-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin folder of a fresh venv with the wheel and its pinned runtime dependencies."""
    env = tmp_path_factory.mktemp("venv") / "venv"
    venv.EnvBuilder(with_pip=True).create(env)
    pip = [str(env / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "-c", str(ROOT / "constraints.txt"), str(wheel)], check=True, timeout=600)
    return env / "bin"


def test_the_wheel_installs_without_the_replay_extra_and_serves(installed: Path) -> None:
    """The bare wheel lacks the replay extras, names its version, and serves health and /metrics."""
    python = str(installed / "python")
    for module in ("numpy", "matplotlib", "tqdm", "ruamel.yaml"):
        probe = subprocess.run(
            [python, "-c", f"import {module}"], check=False, capture_output=True, timeout=60
        )
        assert probe.returncode != 0, f"{module} is installed without the [replay] or [convert] extra"
    version = subprocess.run(
        [str(installed / "scaler"), "--version"], check=False, capture_output=True, text=True, timeout=60
    )
    assert version.stdout.strip() == f"scaler {scaler.__version__}"
    example = str(ROOT / "scaler" / "examples" / "scaledobject.yaml")
    trace = str(ROOT / "benchmarks" / "traces" / "azure2023_conv.csv")
    replay = subprocess.run(
        [str(installed / "scaler"), "replay", "--trace", trace, "--scaledobject", example],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert replay.returncode == 2
    assert "pip install 'llm-gpu-scaler[replay]'" in replay.stderr
    convert = subprocess.run(
        [str(installed / "scaler"), "convert", str(ROOT / "benchmarks" / "baseline-published.yaml")],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (convert.returncode, convert.stderr.splitlines()) == (
        2,
        [
            "scaler convert: error: convert needs its extra:"
            " pip install 'llm-gpu-scaler[convert]' (ruamel.yaml)"
        ],
    )

    grpc_port, metrics_port = free_port(), free_port()
    command = [str(installed / "scaler"), "serve", "--host", "127.0.0.1", "--port", str(grpc_port)]
    command += ["--metrics-port", str(metrics_port)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            wait_serving(proc, channel)
            health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
            assert health.status == health_pb2.HealthCheckResponse.SERVING
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as reply:
            assert "llm_scaler_" in reply.read().decode()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err


def test_constraints_pin_exactly_the_runtime_dependencies() -> None:
    """constraints.txt (what the image installs) names every runtime dependency and no extra."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = {
        re.split(r"==", line)[0].lower().replace("_", "-")
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    }
    direct = {re.split(r"[<>=!\[; ]", d)[0].lower().replace("_", "-") for d in project["dependencies"]}
    assert direct <= pins, f"not pinned: {sorted(direct - pins)} (run ./dev constraints)"
    for extra in ("replay", "convert"):
        names = {re.split(r"[<>=!\[; ]", d)[0].lower() for d in project["optional-dependencies"][extra]}
        assert not names & pins, f"the {extra} extra stays out of the server image"


def test_the_build_asks_for_the_setuptools_that_reads_the_license_string() -> None:
    """license = "Apache-2.0" (an SPDX string) needs setuptools 77; the build asks for it."""
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["license"] == "Apache-2.0"
    assert meta["build-system"]["requires"] == ["setuptools>=77"]
    assert "ruamel.yaml>=0.18" in meta["project"]["optional-dependencies"]["convert"]
    assert not any(d.startswith("ruamel") for d in meta["project"]["dependencies"])
