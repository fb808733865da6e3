"""`pytest --fast` runs the unit tests only, and a test that starts a component must say it is e2e.

Each test runs pytest in a subprocess on a small test file of its own, with the project's
tests/conftest.py, and reads the outcome of every test from the report.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # runs pytest in a subprocess

CONFTEST = Path(__file__).resolve().parent / "conftest.py"
MODULE = """
import socket
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest


def bind() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))


def test_pure():
    assert sum([1, 2]) == 3


def test_binds():
    bind()


def test_spawns():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_serves_grpc():
    grpc.server(ThreadPoolExecutor(1))


def test_binds_in_a_thread_it_starts():
    thread = threading.Thread(target=bind)
    thread.start()
    thread.join()


def test_swallows_the_error():
    try:
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    except Exception:
        pass


@pytest.fixture
def listening():
    bind()


def test_starts_it_in_a_fixture(listening):
    pass


@pytest.mark.e2e
def test_marked():
    bind()
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_uses_an_e2e_fixture(fleet):
    bind()
"""
INI = """[pytest]
addopts = --strict-markers -p no:randomly -p no:cacheprovider
markers =
    e2e: starts a real component
    prometheus: needs Prometheus
    docker: needs Docker
    slow: slow
"""


def run(tmp_path: Path, *args: str) -> tuple[dict[str, str], str]:
    """Each test's outcome, and pytest's report, when pytest runs MODULE with the project's conftest."""
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text(INI)
    (tmp_path / "test_module.py").write_text(MODULE)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "--no-cov", "-p", "no:timeout", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    found = re.findall(r"^(PASSED|FAILED|ERROR) test_module\.py::(\w+)", result.stdout, re.MULTILINE)
    assert found, result.stdout + result.stderr
    return {name: outcome for outcome, name in found}, result.stdout


def test_an_unmarked_test_that_starts_a_component_fails_saying_to_mark_it(tmp_path: Path) -> None:
    """Unmarked tests that bind, spawn, serve gRPC (in a thread or a fixture too) fail; marked ones pass."""
    outcomes, output = run(tmp_path)
    assert outcomes == {
        "test_pure": "PASSED",
        "test_binds": "FAILED",
        "test_spawns": "FAILED",
        "test_serves_grpc": "FAILED",
        "test_binds_in_a_thread_it_starts": "FAILED",
        "test_swallows_the_error": "FAILED",
        "test_starts_it_in_a_fixture": "ERROR",
        "test_marked": "PASSED",
        "test_uses_an_e2e_fixture": "PASSED",
    }
    assert "test_module.py::test_binds binds a socket but is not marked e2e" in output
    assert "test_module.py::test_spawns starts a subprocess but is not marked e2e" in output
    assert "test_module.py::test_serves_grpc creates a gRPC server but is not marked e2e" in output


def test_fast_leaves_out_the_e2e_tests(tmp_path: Path) -> None:
    """--fast deselects the marked tests and those using an e2e fixture, and runs the rest."""
    outcomes, output = run(tmp_path, "--fast")
    assert set(outcomes) == {
        "test_pure",
        "test_binds",
        "test_spawns",
        "test_serves_grpc",
        "test_binds_in_a_thread_it_starts",
        "test_swallows_the_error",
        "test_starts_it_in_a_fixture",
    }
    assert "2 deselected" in output
