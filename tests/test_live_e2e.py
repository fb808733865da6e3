"""End to end: a real Prometheus scrapes a simulated vLLM fleet; KEDA's client asks the server over gRPC."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scaler.cli import main
from scaler.model import Signal
from scaler.proto import externalscaler_pb2 as pb
from scaler.sim.fleet import PodLoad, SimulatedFleet
from scaler.sim.prometheus import LocalPrometheus
from scaler.sources.history import History
from scaler.sources.live import LiveSource
from scaler.sources.prometheus import PrometheusReader
from tests.conftest import require_prometheus
from tests.helpers import ServerThread, get_metrics, ref

pytestmark = pytest.mark.prometheus

MODEL = 'model_name="meta-llama/Llama-3.1-8B-Instruct"'
REFRESH_S = 1.0


@pytest.fixture
def live_server(prometheus: LocalPrometheus) -> Iterator[ServerThread]:
    """A ServerThread reading the local Prometheus live, refreshing every second."""
    reader = PrometheusReader(prometheus.url, rate_window="5s")
    source = LiveSource(reader, history=History(reader, history_seconds=60))
    with ServerThread(source=source, refresh_interval_s=REFRESH_S) as server:
        yield server


def metric(server: ServerThread, **metadata: str) -> int:
    """The metric value GetMetrics answers for a ScaledObject with ``metadata`` (its first call
    asked again until the first decision is there, as KEDA asks)."""
    reply = get_metrics(server.stub(), pb.GetMetricsRequest(scaledObjectRef=ref(**metadata)))
    return int(reply.metricValues[0].metricValue)


def refreshed(server: ServerThread, count: int) -> None:
    """Wait until the server has made ``count`` more refreshes: on a loaded machine a refresh takes
    longer than its interval, and a sleep of ``count`` intervals sees fewer."""
    until = server.runtime.refreshes + count
    while server.runtime.refreshes < until:
        time.sleep(0.05)


def test_300_waiting_raise_the_target_within_two_refreshes(
    fleet: SimulatedFleet, prometheus: LocalPrometheus, live_server: ServerThread
) -> None:
    """300 waiting requests raise the queue-bound target to 30 within two refreshes, failing open on GPUs."""
    md = {"labelSelector": MODEL, "minReplicas": "2", "maxReplicas": "40", "targetQueuePerReplica": "10"}
    assert metric(live_server, **md) == 2  # registers the target; idle fleet
    fleet.set_fleet_load(PodLoad(waiting=300, running=40))
    assert prometheus.wait_for("sum(vllm:num_requests_waiting) == 300")
    seen_at = live_server.runtime.refreshes  # counted in refreshes, not seconds: a loaded machine is slower
    while metric(live_server, **md) <= 2:
        time.sleep(0.05)
    # A refresh already reading when the queue appeared may miss it; the next one sees it.
    assert live_server.runtime.refreshes - seen_at <= 2, "target did not rise within two refreshes"
    assert metric(live_server, **md) == 30
    decision = live_server.runtime.registry.targets()[0].latest
    assert decision is not None
    assert decision.binding.value == "queue"
    assert any("GPU check not applied" in note for note in decision.notes)  # no Kubernetes here: fail open


def test_idle_after_load_holds_the_planned_demand_for_one_cold_start(
    fleet: SimulatedFleet, prometheus: LocalPrometheus, live_server: ServerThread
) -> None:
    """Right after the load ends the target stays where the load put it: a replica released now
    would be back only after one cold start, so the demand planned within the last one is held."""
    md = {"labelSelector": MODEL, "minReplicas": "2", "maxReplicas": "40", "coldStartSeconds": "60"}
    metric(live_server, **md)
    busy_load = PodLoad(
        prompt_tokens_per_s=30000,
        generation_tokens_per_s=6000,
        requests_per_s=20,
        running=300,
        kv_cache_usage=1.0,
        ttft_seconds=0.3,
    )
    fleet.set_fleet_load(busy_load)
    assert prometheus.wait_for("sum(rate(vllm:prompt_tokens_total[5s])) > 28000", timeout_s=30)
    while metric(live_server, **md) <= 2:
        time.sleep(0.1)
    refreshed(live_server, 3)  # a few refreshes at the busy level
    busy = metric(live_server, **md)
    before = live_server.runtime.registry.targets()[0].latest
    assert before is not None
    assert busy > 2, before.reason
    fleet.set_fleet_load(PodLoad())
    assert prometheus.wait_for("sum(rate(vllm:prompt_tokens_total[5s])) == 0", timeout_s=30)
    refreshed(live_server, 2)  # refreshes that read the idle fleet (waited for, not slept through)
    decision = live_server.runtime.registry.targets()[0].latest
    assert decision is not None
    assert decision.observation.prompt_tokens_per_s == 0
    assert decision.replicas >= busy - 1, (before.reason, decision.reason)  # idle now, but held
    assert "held for one cold start" in decision.signal_reasons[Signal.LOAD]


def test_live_dry_run_prints_decisions_once(
    fleet: SimulatedFleet, prometheus: LocalPrometheus, tmp_path: Path
) -> None:
    """dry-run --once against Prometheus prints one decision line, bound by the live queue."""
    require_prometheus()
    fleet.set_fleet_load(PodLoad(waiting=55, running=10))
    assert prometheus.wait_for("sum(vllm:num_requests_waiting) == 55")
    so = tmp_path / "so.yaml"
    so.write_text(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: m, namespace: ns}\n"
        "spec:\n  scaleTargetRef: {name: d}\n  triggers:\n  - type: external\n    metadata:\n"
        f"      scalerAddress: x:9090\n      labelSelector: '{MODEL}'\n      minReplicas: '1'\n"
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "scaler",
            "dry-run",
            "--scaledobject",
            str(so),
            "--prometheus",
            prometheus.url,
            "--once",
            "--rate-window",
            "5s",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.splitlines()
    assert len(out) == 2
    assert "target=6 queue [" in out[0]
    assert out[1].startswith("summary: 1 decisions; binding queue 1;")
    assert "queue=6*" in out[0]


def test_live_dry_run_reads_the_trigger_s_prometheus_address_without_the_flag(
    fleet: SimulatedFleet, prometheus: LocalPrometheus, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """dry-run with neither --observations nor --prometheus reads the trigger's prometheusAddress, said."""
    fleet.set_fleet_load(PodLoad(waiting=55, running=10))
    assert prometheus.wait_for("sum(vllm:num_requests_waiting) == 55")
    so = tmp_path / "so.yaml"
    so.write_text(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: m, namespace: ns}\n"
        "spec:\n  scaleTargetRef: {name: d}\n  triggers:\n  - type: external\n    metadata:\n"
        f"      scalerAddress: x:9090\n      labelSelector: '{MODEL}'\n      minReplicas: '1'\n"
        f"      prometheusAddress: {prometheus.url}\n"
    )
    assert main(["dry-run", "--scaledobject", str(so), "--once", "--rate-window", "5s"]) == 0
    out, err = capsys.readouterr()
    assert f"scaler dry-run: live, from the trigger's prometheusAddress {prometheus.url}" in err.splitlines()
    assert "queue=6*" in out.splitlines()[0]


@pytest.mark.slow
def test_demo_prints_live_decisions_within_a_minute() -> None:
    """The demo prints decisions from live inputs, with load and queue proposals."""
    require_prometheus()
    proc = subprocess.Popen(
        [sys.executable, "-m", "scaler", "demo", "--duration", "30", "--interval", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    decisions = [line for line in out.splitlines() if not line.startswith("#")]
    assert decisions, out
    live = [line for line in decisions if "inputs missing" not in line]
    assert live, "no decision from live inputs"
    assert any("load=" in line and "queue=" in line for line in live)


def test_no_gpu_that_fits_holds_the_target_at_current_replicas(
    fleet: SimulatedFleet, prometheus: LocalPrometheus
) -> None:
    """Prometheus says 300 waiting; the Kubernetes double says every GPU is taken."""
    from kubernetes import client

    from scaler.sources.kubernetes import KubernetesInventory
    from tests import k8s_double as k8s

    with k8s.KubeDouble() as double:
        double.apply(k8s.node("gpu-a", 4))
        double.apply(k8s.node("gpu-b", 1))  # one GPU left there, but a replica needs two
        double.apply(k8s.deployment("vllm-llama", "inference", replicas=2, gpus=2))
        for i in range(2):
            double.apply(
                k8s.pod(
                    f"vllm-llama-{i}",
                    "inference",
                    labels={"app": "vllm-llama"},
                    node="gpu-a",
                    gpus=2,
                    ready=True,
                )
            )
        double.apply(k8s.scaledobject("llama", "inference", target="vllm-llama"))
        inventory = KubernetesInventory(client.ApiClient(client.Configuration(host=double.url)))
        inventory.start()
        try:
            assert inventory.wait_synced(10), inventory.problem()
            source = LiveSource(PrometheusReader(prometheus.url, rate_window="5s"), inventory)
            fleet.set_fleet_load(PodLoad(waiting=300, running=40))
            assert prometheus.wait_for("sum(vllm:num_requests_waiting) == 300")
            with ServerThread(source=source, refresh_interval_s=REFRESH_S) as server:
                md = {"labelSelector": MODEL, "minReplicas": "1", "maxReplicas": "40"}
                request = pb.GetMetricsRequest(scaledObjectRef=ref(name="llama", namespace="inference", **md))
                while True:  # the first decisions may come before the inventory's view: a few refreshes
                    value = get_metrics(server.stub(), request).metricValues[0].metricValue
                    decision = server.runtime.registry.targets()[0].latest
                    if decision is not None and decision.proposals.get(Signal.QUEUE) == 30:
                        break
                    assert server.runtime.refreshes < 10, decision.reason if decision is not None else None
                    time.sleep(0.1)
                assert value == 2  # the current replicas: nothing more fits
                assert decision.limited_by is not None
                assert decision.limited_by.value == "gpu_inventory"
                assert "GPU inventory fits 2" in decision.reason
                # a node with room arrives: the scale-up the inventory held goes through, as far as it fits
                double.apply(k8s.node("gpu-c", 8))
                applied = server.runtime.refreshes  # counted in refreshes: the watch, then one reads it
                while server.stub().GetMetrics(request, timeout=5).metricValues[0].metricValue != 6:
                    latest = server.runtime.registry.targets()[0].latest
                    assert server.runtime.refreshes - applied < 10, latest.reason if latest else latest
                    time.sleep(0.1)
        finally:
            inventory.stop()


def test_share_over_each_objective_comes_from_the_histogram(
    fleet: SimulatedFleet, prometheus: LocalPrometheus, live_server: ServerThread
) -> None:
    """Two ScaledObjects on one fleet, one query: each gets the share over its own TTFT objective."""
    fleet.set_fleet_load(PodLoad(requests_per_s=20, ttft_seconds=3.0, prompt_tokens_per_s=1000))
    assert prometheus.wait_for("sum(rate(vllm:time_to_first_token_seconds_count[5s])) > 10")
    strict = {"labelSelector": MODEL, "ttftObjectiveSeconds": "2"}
    loose = {"labelSelector": MODEL, "ttftObjectiveSeconds": "10"}
    for name, md in (("strict", strict), ("loose", loose)):
        request = pb.GetMetricsRequest(scaledObjectRef=ref(name, **md))
        get_metrics(live_server.stub(), request)

    def shares() -> dict[float, float | None]:
        return {
            t.policy.ttft_objective_seconds: t.latest.observation.ttft_over_objective
            for t in live_server.runtime.registry.targets()
            if t.latest is not None
        }

    deadline = time.monotonic() + 10
    while any(v is None for v in shares().values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    got = shares()
    assert got[2.0] == pytest.approx(1.0)  # every first token took 3 s: all over 2 s
    assert got[10.0] == pytest.approx(0.0)  # and none over 10 s
