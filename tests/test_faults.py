"""Faults in the data path: fast RPCs, held targets, UNAVAILABLE when stale, recovery without a restart."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import grpc
import pytest

from scaler.config import parse_metadata
from scaler.proto import externalscaler_pb2 as pb
from scaler.proto import externalscaler_pb2_grpc as pb_grpc
from scaler.sim.fleet import PodLoad, SimulatedFleet
from scaler.sim.prometheus import LocalPrometheus
from scaler.sources.live import LiveSource
from scaler.sources.probe import SeriesProbe
from scaler.sources.prometheus import PrometheusReader, TargetQuery
from tests.fake_prometheus import Answer, FakePrometheus, query_of, vector
from tests.helpers import ServerThread, eventually, get_metrics, ref

pytestmark = pytest.mark.e2e  # every test serves gRPC and answers as Prometheus over HTTP


class FaultScript:
    """Answers the query API with a queue depth, or fails the way the test says."""

    def __init__(self) -> None:
        self.mode = "ok"  # ok | slow | error | garbage | empty | nan
        self.waiting = 120.0
        self.release = threading.Event()  # a slow answer waits for it (or 3 s)
        self.lock = threading.Lock()
        self.stuck = 0  # slow answers still waiting

    def __call__(self, path: str) -> Answer:
        """Answer one request: the queue depth for the waiting-queue query (not the waiting reasons',
        nor the stuck-engine signature's), no series otherwise."""
        query = query_of(path)
        if self.mode == "slow":
            with self.lock:
                self.stuck += 1
            self.release.wait(3)
            with self.lock:
                self.stuck -= 1
        if self.mode == "error":
            return 500, b"boom"
        if self.mode == "garbage":
            return 200, b"<html>not prometheus</html>"
        if self.mode == "empty" or "bucket" in query or "vllm:num_requests_waiting)" not in query:
            return 200, vector()
        return 200, vector("NaN" if self.mode == "nan" else str(self.waiting), labels={"model_name": "m"})


@pytest.fixture
def scripted() -> Iterator[FakePrometheus[FaultScript]]:
    """A fake Prometheus answering from a FaultScript the test switches between modes."""
    fake = FakePrometheus(FaultScript())
    yield fake
    fake.close()


def answer(stub: pb_grpc.ExternalScalerStub, request: pb.GetMetricsRequest) -> int | grpc.StatusCode:
    """One GetMetrics call: the metric value, or the gRPC status code it failed with."""
    try:
        value: int = stub.GetMetrics(request, timeout=5).metricValues[0].metricValue
    except grpc.RpcError as exc:
        return exc.code()
    return value


def test_prometheus_faults_hold_the_target_then_unavailable_then_recover(
    scripted: FakePrometheus[FaultScript],
) -> None:
    """Slow or broken Prometheus answers hold the target fast, go UNAVAILABLE when stale, then heal."""
    source = LiveSource(PrometheusReader(scripted.url, timeout_s=1.0))
    # The five faults last 2.5 s; stale after 5 s, so a refresh slowed by a loaded machine (the last
    # complete inputs are those of the refresh before the first fault) does not end the hold early.
    request = pb.GetMetricsRequest(
        scaledObjectRef=ref(minReplicas="2", targetQueuePerReplica="10", maxStalenessSeconds="5")
    )
    with ServerThread(source=source, refresh_interval_s=0.25) as server:
        stub = server.stub()  # one pooled connection, as KEDA keeps
        get_metrics(stub, request)  # registered, its first decision made
        while answer(stub, request) != 12:  # 120 waiting at 10 per replica, once a refresh read them
            time.sleep(0.05)
        # A query stuck in a slow Prometheus: RPCs answer while it hangs, so they never wait on it
        # (shown by the query still hanging when they return, not by how long they took).
        scripted.respond.mode = "slow"
        eventually(lambda: scripted.respond.stuck, bool, timeout=30)
        for _ in range(5):
            assert answer(stub, request) == 12  # held: missing data never lowers the target
            assert scripted.respond.stuck, "the query was answered before the RPC: it proves nothing"
        scripted.respond.release.set()
        for mode in ("error", "garbage", "empty", "nan"):
            scripted.respond.mode = mode
            until = time.monotonic() + 0.5
            while time.monotonic() < until:
                value = answer(stub, request)
                assert value == 12, (mode, value)
                time.sleep(0.02)
        while answer(stub, request) != grpc.StatusCode.UNAVAILABLE:  # after maxStalenessSeconds
            time.sleep(0.1)  # (pytest-timeout bounds a hold that never ends)
        scripted.respond.mode = "ok"
        scripted.respond.waiting = 50.0
        healed_at = server.runtime.refreshes
        while answer(stub, request) != 5:  # a live decision again: 50 waiting at 10 per replica
            time.sleep(0.05)
        # Counted in refreshes, not seconds: one in flight when it healed, then the one that reads it.
        assert server.runtime.refreshes - healed_at <= 2, "did not recover within two refreshes"
        decision = server.runtime.registry.targets()[0].latest
        assert decision is not None
        assert not [note for note in decision.notes if "inputs missing" in note]


def test_a_prometheus_that_failed_the_reads_is_not_probed_for_inert_reasons(
    scripted: FakePrometheus[FaultScript],
) -> None:
    """A refresh whose reads got HTTP 500 sends the series probe nothing: the reads' errors say why
    every input is unknown, and a slow Prometheus would hold the refresh for each query again."""
    reader = PrometheusReader(scripted.url, timeout_s=1.0)
    target = TargetQuery("t", parse_metadata({"minReplicas": "2"}), scripted.url)
    probe = SeriesProbe(reader)
    at = datetime(2026, 12, 1, tzinfo=UTC)
    reader.read([target], at)
    before = reader.queries
    probe.layouts([target], at)
    assert reader.queries > before  # answered: the probe asked
    scripted.respond.mode = "error"
    later = datetime(2026, 12, 1, 0, 0, 15, tzinfo=UTC)
    got = reader.read([target], later)["t"]
    assert "500" in got.missing["queue_waiting"]
    before = reader.queries
    assert probe.layouts([target], later) == {}
    assert reader.queries == before


def test_prometheus_down_from_the_start_ends_in_unavailable() -> None:
    """With Prometheus never reachable, GetMetrics answers minReplicas, then UNAVAILABLE once stale."""
    source = LiveSource(PrometheusReader("http://127.0.0.1:9", timeout_s=0.5))
    request = pb.GetMetricsRequest(scaledObjectRef=ref(minReplicas="3", maxStalenessSeconds="1"))
    with ServerThread(source=source, refresh_interval_s=0.25) as server:
        stub = server.stub()
        assert get_metrics(stub, request).metricValues[0].metricValue == 3
        while answer(stub, request) != grpc.StatusCode.UNAVAILABLE:  # once maxStalenessSeconds passed
            assert answer(stub, request) in (3, grpc.StatusCode.UNAVAILABLE)  # the floor until then
            time.sleep(0.1)


@pytest.mark.prometheus
def test_two_scaler_replicas_answer_alike(fleet: SimulatedFleet, prometheus: LocalPrometheus) -> None:
    """Two scaler replicas on the same grid give KEDA equal decisions for the same grid times."""
    fleet.set_fleet_load(
        PodLoad(waiting=70, running=20, prompt_tokens_per_s=20000, generation_tokens_per_s=4000)
    )
    assert prometheus.wait_for("sum(rate(vllm:prompt_tokens_total[5s])) > 19000", timeout_s=30)
    md = {
        "minReplicas": "2",
        "targetQueuePerReplica": "10",
        "promptTokensPerSecondPerReplica": "9000",
        "generationTokensPerSecondPerReplica": "1800",
    }
    request = pb.GetMetricsRequest(scaledObjectRef=ref(**md))
    seen: set[datetime] = set()
    servers = [
        ServerThread(
            source=LiveSource(PrometheusReader(prometheus.url, rate_window="5s")),
            refresh_interval_s=1.0,
            grid=True,
            # Query each grid time 2 s after it (four scrapes): a scrape that started just
            # before it (its samples carry the start time) has landed by then even on a busy
            # machine, so both replicas read the same samples. Production settles 2 s too.
            settle_s=2.0,
        )
        for _ in range(2)
    ]
    with servers[0] as a:
        get_metrics(a.stub(), request)
        time.sleep(3)  # the second replica starts later and warms from history
        with servers[1] as b:
            get_metrics(b.stub(), request)
            compared = 0
            started = a.runtime.refreshes  # a bound in refreshes, not seconds: a loaded machine is slower
            while compared < 3 and a.runtime.refreshes - started < 20:
                da = a.runtime.registry.targets()[0].latest
                db = b.runtime.registry.targets()[0].latest
                if da is not None and db is not None and da.now == db.now and da.now not in seen:
                    seen.add(da.now)
                    # What KEDA sees is equal. The forecasts agree closely; on a loaded machine a
                    # scrape can land after one replica's instant query and before the other's
                    # (see Runtime.tick on settle_s), which moves one 5 s rate by a few percent.
                    seen_by = (da.signal_reasons, db.signal_reasons)
                    assert (da.replicas, dict(da.proposals)) == (db.replicas, dict(db.proposals)), seen_by
                    for key, value in da.forecast.to_json().items():
                        assert getattr(db.forecast, key) == pytest.approx(value, rel=0.1), key
                    compared += 1
                time.sleep(0.05)
    assert compared == 3, "the replicas never decided for the same grid time"
