"""Fixtures for tests that need real components.

Prometheus is Debian's real server, started per test module on a free loopback port.
Under CI (``CI=true``) a missing binary fails the test; elsewhere it skips with the
install command. Only Docker-based tests may skip under CI.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from scaler.sim.fleet import SimulatedFleet
from scaler.sim.prometheus import LocalPrometheus, PrometheusNotInstalledError, find_binary

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


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
