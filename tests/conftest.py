"""Fixtures for tests that need real components, and the split of unit from end-to-end tests.

Prometheus is Debian's real server, started per test module on a free loopback port.
Under CI (``CI=true``) a missing binary fails the test; elsewhere it skips with the
install command. Only Docker-based tests may skip under CI.

A test that starts a real component (Prometheus, a subprocess, Docker, a gRPC or HTTP
server on a socket) is marked ``e2e``: by hand (``@pytest.mark.e2e`` or a module's
``pytestmark``), or here when it uses a fixture of ``E2E_FIXTURES`` or carries the
``prometheus`` or ``docker`` marker. ``pytest --fast`` (``./dev test --fast``) runs the
others only. The marking is checked, not trusted: a test without the marker that starts a
subprocess, binds a socket or creates a gRPC server, in its setup or its body, fails and
says to mark it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable, Generator, Iterator
from typing import Any

import grpc
import pytest

# urllib3 probes for IPv6 by binding a socket the first time it is imported (HAS_IPV6): imported
# here, at collection, so that a unit test whose code first imports it is not taken for one that
# starts a component (it failed when run alone, and could under a random order).
import urllib3  # noqa: F401

from scaler.sim.fleet import SimulatedFleet
from scaler.sim.prometheus import LocalPrometheus, PrometheusNotInstalledError, find_binary

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require_kubectl() -> str:
    """kubectl's path; skip the test (or fail it under CI) when kubectl is not installed."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        message = "kubectl is not installed (its built-in kustomize renders manifests/; 1.27 or newer)"
        if IN_CI:
            pytest.fail(f"CI=true and {message}")
        pytest.skip(f"{message} (under CI=true this fails instead)")
    return kubectl


def require_prometheus() -> None:
    """Skip the test (or fail it under CI) when the Prometheus binaries are not installed."""
    try:
        find_binary("prometheus")
        find_binary("promtool")
    except PrometheusNotInstalledError as exc:
        if IN_CI:
            pytest.fail(f"CI=true and Prometheus is missing: {exc}")
        pytest.skip(f"{exc} (under CI=true this fails instead)")


@pytest.fixture
def fleet() -> Iterator[SimulatedFleet]:
    """A started simulated fleet of two vLLM pods, stopped after the test."""
    sim = SimulatedFleet()
    sim.set_pods(["vllm-0", "vllm-1"])
    sim.start()
    yield sim
    sim.stop()


@pytest.fixture
def prometheus(fleet: SimulatedFleet) -> Iterator[LocalPrometheus]:
    """A real Prometheus scraping the simulated fleet every 0.5 s."""
    require_prometheus()
    prom = LocalPrometheus(scrape_interval_s=0.5)
    try:
        prom.start([fleet.address])
        yield prom
    finally:
        prom.close()


# ---- unit tests apart from end-to-end ones -------------------------------------------------

# The fixtures that start a real component; every test that uses one (directly or through
# another fixture) is end-to-end.
E2E_FIXTURES = frozenset(
    {
        "fleet",  # the simulated vLLM fleet's HTTP server (conftest)
        "prometheus",  # Debian's Prometheus (conftest, test_timeline)
        "stack",  # Prometheus scraping a fleet (test_prometheus_source)
        "stand",  # Prometheus, a fleet and the scaler serving (test_dashboard)
        "scripted",  # a scripted Prometheus API over HTTP (test_faults)
        "double",  # the Kubernetes API double over HTTP (test_kubernetes)
        "server",  # the scaler's gRPC server (test_grpc_server)
        "plain_server",  # the scaler's gRPC server (test_security)
        "live_server",  # the scaler's gRPC server reading Prometheus (test_live_e2e)
        "wheel",  # `python -m build` in a subprocess (test_packaging)
        "installed",  # a venv with the wheel installed, by subprocess (test_packaging)
        "kubeconfig",  # a k3s container (test_k3s)
        "cluster",  # the k3s cluster's client (test_k3s)
    }
)
E2E_MARKERS = ("prometheus", "docker")
# Per test: the threads alive when its setup began (whose calls the guard lets through: they
# belong to components of earlier tests), and what it started without the marker.
_PREEXISTING_THREADS = pytest.StashKey[frozenset[int]]()
_VIOLATIONS = pytest.StashKey[list[str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--fast``: the unit tests only."""
    parser.addoption(
        "--fast",
        action="store_true",
        help="run the unit tests only: leave out the e2e ones (Prometheus, subprocesses, Docker, servers)",
    )


def is_e2e(item: pytest.Item) -> bool:
    """Whether ``item`` starts a real component: marked e2e, by one of E2E_MARKERS or by a fixture."""
    return item.get_closest_marker("e2e") is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests that use a real component's fixture or marker e2e; under --fast, leave them out."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & E2E_FIXTURES or any(item.get_closest_marker(m) for m in E2E_MARKERS):
            item.add_marker(pytest.mark.e2e)
    if config.getoption("--fast"):
        deselected = [item for item in items if is_e2e(item)]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = [item for item in items if not is_e2e(item)]


class StartsAComponentError(RuntimeError):
    """A test that is not marked e2e started a real component."""


def _guarded(item: pytest.Item, what: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """``original``, failing when called by the test's own thread or by a thread it started."""

    def guarded(*args: Any, **kwargs: Any) -> Any:
        by_the_test = threading.current_thread() is threading.main_thread()
        if by_the_test or threading.get_ident() not in item.stash[_PREEXISTING_THREADS]:
            message = (
                f"{item.nodeid} {what} but is not marked e2e: add @pytest.mark.e2e (or use a"
                " fixture of E2E_FIXTURES in tests/conftest.py) so that --fast leaves it out"
            )
            item.stash.setdefault(_VIOLATIONS, []).append(message)
            raise StartsAComponentError(message)
        return original(*args, **kwargs)

    return guarded


def _unit_guard(item: pytest.Item) -> pytest.MonkeyPatch:
    """Patch what starts a component (subprocesses, bound sockets, gRPC servers) to fail for ``item``."""
    patch = pytest.MonkeyPatch()
    patch.setattr(
        subprocess.Popen, "__init__", _guarded(item, "starts a subprocess", subprocess.Popen.__init__)
    )
    patch.setattr(socket.socket, "bind", _guarded(item, "binds a socket", socket.socket.bind))
    patch.setattr(grpc, "server", _guarded(item, "creates a gRPC server", grpc.server))
    return patch


def _run_guarded(item: pytest.Item) -> Generator[None, None, None]:
    """Run one phase of a test not marked e2e with the guard on, and fail it on a violation."""
    if is_e2e(item):
        yield
        return
    patch = _unit_guard(item)
    try:
        yield
    finally:
        patch.undo()
        # Also when the test caught the error: starting the component is what it may not do.
        violations = item.stash.get(_VIOLATIONS, [])
        if violations:
            pytest.fail(violations[0], pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    """Set up a test; one not marked e2e may start no component, in its fixtures either."""
    item.stash[_PREEXISTING_THREADS] = frozenset(t.ident for t in threading.enumerate() if t.ident)
    return (yield from _run_guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """Run a test; one not marked e2e may start no component."""
    return (yield from _run_guarded(item))
