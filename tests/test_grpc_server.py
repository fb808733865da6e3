"""KEDA's ExternalScaler over a real loopback socket, with a client generated from the proto."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from scaler.outputs.grpc_server import METRIC_NAME, ServerOptions
from scaler.proto import externalscaler_pb2 as pb
from scaler.proto import externalscaler_pb2_grpc as pb_grpc
from tests.helpers import ScriptedSource, ServerThread, StepClock, ref

pytestmark = pytest.mark.e2e  # every test serves KEDA's API on a loopback socket


@pytest.fixture
def server() -> Iterator[ServerThread]:
    """An offline ServerThread with default options, for one test."""
    with ServerThread() as s:
        yield s


def test_get_metric_spec_is_one_spec_of_target_one(server: ServerThread) -> None:
    """GetMetricSpec answers one spec, named METRIC_NAME, with a target size of 1."""
    reply = server.stub().GetMetricSpec(ref(minReplicas="2"), timeout=5)
    specs = [(s.metricName, s.targetSize, s.targetSizeFloat) for s in reply.metricSpecs]
    assert specs == [(METRIC_NAME, 1, 1.0)]


def test_metric_name_is_stable_and_valid(server: ServerThread) -> None:
    """Every ScaledObject gets the same metric name, lower-case alphanumerics and dashes."""
    names = {
        server.stub().GetMetricSpec(ref(name=f"so-{i}"), timeout=5).metricSpecs[0].metricName
        for i in range(3)
    }
    assert names == {METRIC_NAME}
    assert METRIC_NAME.replace("-", "").isalnum()
    assert METRIC_NAME.islower()


def test_get_metrics_returns_the_decided_replicas(server: ServerThread) -> None:
    """GetMetrics answers one value, the decided replicas, as integer and float."""
    reply = server.stub().GetMetrics(
        pb.GetMetricsRequest(scaledObjectRef=ref(minReplicas="3"), metricName=METRIC_NAME), timeout=5
    )
    values = [(v.metricName, v.metricValue, v.metricValueFloat) for v in reply.metricValues]
    assert values == [(METRIC_NAME, 3, 3.0)]


def test_is_active_is_always_true(server: ServerThread) -> None:
    """IsActive answers true."""
    assert server.stub().IsActive(ref(), timeout=5).result is True


def test_stream_is_active_sends_true_and_stays_open(server: ServerThread) -> None:
    """StreamIsActive sends true once and then stays open."""
    stream = server.stub().StreamIsActive(ref())
    first = next(stream)
    assert first.result is True
    got_more = threading.Event()

    def read_more() -> None:
        try:
            next(stream)
            got_more.set()
        except grpc.RpcError:
            pass

    reader = threading.Thread(target=read_more, daemon=True)
    reader.start()
    reader.join(1.0)
    assert reader.is_alive(), "the stream closed instead of staying open"
    stream.cancel()


def test_open_streams_are_bounded_and_never_starve_unary_rpcs() -> None:
    """Each open StreamIsActive parks a thread but holds no RPC slot; past the limit, a clear refusal."""
    with ServerThread(options=ServerOptions(workers=2, max_streams=3)) as server:
        channel = server.channel()
        stub = pb_grpc.ExternalScalerStub(channel)  # type: ignore[no-untyped-call]
        streams = [stub.StreamIsActive(ref(name=f"push-{i}")) for i in range(3)]
        assert all(next(s).result is True for s in streams)
        # more open streams than RPC slots, and unary RPCs still answer at once
        for i in range(20):
            assert stub.IsActive(ref(name=f"poll-{i}"), timeout=2).result is True
            reply = stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref(name=f"poll-{i}")), timeout=2)
            assert reply.metricValues[0].metricValue == 1
        with pytest.raises(grpc.RpcError) as refused:
            next(stub.StreamIsActive(ref(name="push-3"), timeout=5))
        assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "3 StreamIsActive streams are open" in (refused.value.details() or "")
        streams[0].cancel()  # a client going away frees its place within a second
        deadline = time.monotonic() + 5
        while True:
            try:
                reply_stream = next(stub.StreamIsActive(ref(name="push-3"), timeout=5))
            except grpc.RpcError as exc:
                code = exc.code()
            else:
                assert reply_stream.result is True
                break
            assert code is grpc.StatusCode.RESOURCE_EXHAUSTED
            assert time.monotonic() < deadline, "a cancelled stream never gave its place back"
            time.sleep(0.2)
        channel.close()


def test_concurrent_first_calls_register_a_target_once() -> None:
    """A burst of first calls for new targets: each registered once, every call answered."""
    with ServerThread() as server:
        stub = server.stub()
        names = [f"so-{i % 10}" for i in range(200)]  # 20 concurrent first calls per target
        start = threading.Barrier(20)
        replies: list[int] = []
        errors: list[BaseException] = []

        def caller(chunk: list[str]) -> None:
            start.wait()
            for name in chunk:
                # Blind on purpose: any failure in a caller thread, whatever its type, is collected
                # here and asserted on the main thread below (BLE is not in the project's ruff set).
                try:
                    request = pb.GetMetricsRequest(scaledObjectRef=ref(name=name, minReplicas="4"))
                    replies.append(stub.GetMetrics(request, timeout=5).metricValues[0].metricValue)
                except BaseException as exc:  # noqa: BLE001, RUF100
                    errors.append(exc)

        threads = [threading.Thread(target=caller, args=(names[i::20],)) for i in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors
        assert replies == [4] * 200
        assert sorted(t.key.name for t in server.runtime.registry.targets()) == sorted(set(names))
        assert server.service.rpc_counts[("GetMetrics", "OK")] == 200


def test_a_busy_event_loop_delays_only_new_targets_and_never_fails_with_internal() -> None:
    """Registration happens on the event loop; polls of known targets never wait for it."""
    stuck, release = threading.Event(), threading.Event()

    def block() -> None:
        """Hold the event loop until the test releases it."""
        stuck.set()
        release.wait(30)

    with ServerThread(options=ServerOptions(register_timeout_s=0.3)) as server:
        stub = server.stub()
        known = pb.GetMetricsRequest(scaledObjectRef=ref(name="known", minReplicas="2"))
        fresh = pb.GetMetricsRequest(scaledObjectRef=ref(name="fresh", minReplicas="3"))
        assert stub.GetMetrics(known, timeout=5).metricValues[0].metricValue == 2
        try:
            server.loop.call_soon_threadsafe(block)
            assert stuck.wait(5), "the event loop never ran the blocking callback"
            # The loop is held until release is set below: a known target's poll that needed
            # the loop could not be answered now.
            assert stub.GetMetrics(known, timeout=5).metricValues[0].metricValue == 2
            with pytest.raises(grpc.RpcError) as caught:
                stub.GetMetrics(fresh, timeout=5)
            assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
            assert "event loop did not answer within 0.3 s" in (caught.value.details() or "")
        finally:
            release.set()
        assert stub.GetMetrics(fresh, timeout=5).metricValues[0].metricValue == 3
        assert ("GetMetrics", "INTERNAL") not in server.service.rpc_counts


def test_stream_metric_spec_is_unimplemented(server: ServerThread) -> None:
    """StreamMetricSpec answers UNIMPLEMENTED."""
    with pytest.raises(grpc.RpcError) as caught:
        next(server.stub().StreamMetricSpec(ref()))
    assert caught.value.code() is grpc.StatusCode.UNIMPLEMENTED


@pytest.mark.parametrize("method", ["IsActive", "GetMetricSpec", "GetMetrics", "StreamIsActive"])
def test_invalid_metadata_is_invalid_argument_naming_every_bad_key(server: ServerThread, method: str) -> None:
    """Every RPC answers bad metadata with INVALID_ARGUMENT naming each bad key and the ScaledObject."""
    bad = ref(minReplicas="0", targetUtilization="2")
    stub = server.stub()

    def call() -> object:
        if method == "GetMetrics":
            return stub.GetMetrics(
                pb.GetMetricsRequest(scaledObjectRef=bad, metricName=METRIC_NAME), timeout=5
            )
        if method == "StreamIsActive":
            return next(stub.StreamIsActive(bad, timeout=5))
        return getattr(stub, method)(bad, timeout=5)

    with pytest.raises(grpc.RpcError) as caught:
        call()
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    details = caught.value.details()
    assert details is not None
    assert "minReplicas" in details
    assert "targetUtilization" in details
    assert "inference/llama" in details


def test_a_queue_query_that_does_not_parse_is_invalid_argument_naming_where(server: ServerThread) -> None:
    """queueQuery with an unclosed parenthesis: INVALID_ARGUMENT naming the key and the position."""
    bad = ref(engine="custom", queueQuery="sum(rate(my_queue[1m])")
    with pytest.raises(grpc.RpcError) as caught:
        server.stub().GetMetricSpec(bad, timeout=5)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    details = caught.value.details() or ""
    assert 'queueQuery="sum(rate(my_queue[1m])": does not parse at character 4' in details


def test_missing_name_is_invalid_argument(server: ServerThread) -> None:
    """A ScaledObjectRef without a name is INVALID_ARGUMENT."""
    with pytest.raises(grpc.RpcError) as caught:
        server.stub().IsActive(pb.ScaledObjectRef(namespace="ns"), timeout=5)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT


def test_bad_metadata_does_not_disturb_other_targets(server: ServerThread) -> None:
    """A target refused for bad metadata leaves other targets answering."""
    stub = server.stub()
    with pytest.raises(grpc.RpcError):
        stub.GetMetricSpec(ref(name="broken", minReplicas="zero"), timeout=5)
    ok = stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref(name="fine", minReplicas="4")), timeout=5)
    assert ok.metricValues[0].metricValue == 4


def test_offline_server_says_it_decides_without_live_sources(server: ServerThread) -> None:
    """An offline server's decisions note that no live source is configured."""
    server.stub().GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref(minReplicas="2")), timeout=5)
    target = server.runtime.registry.targets()[0]
    assert target.latest is not None
    assert any("no live source configured" in note for note in target.latest.notes)


def test_prewarm_window_is_served_without_live_sources() -> None:
    """Offline, a pre-warm window raises the target ahead of its start and releases it after."""
    clock = StepClock(datetime(2026, 12, 1, 8, 58, tzinfo=UTC))
    with ServerThread(clock=clock) as server:
        md = {
            "minReplicas": "2",
            "prewarmStart": "0 9 * * *",
            "prewarmEnd": "0 10 * * *",
            "prewarmReplicas": "7",
            "coldStartSeconds": "300",
        }
        request = pb.GetMetricsRequest(scaledObjectRef=ref(**md))
        assert server.stub().GetMetrics(request, timeout=5).metricValues[0].metricValue == 7
        clock.advance(3 * 3600)
        server.refresh()
        assert server.stub().GetMetrics(request, timeout=5).metricValues[0].metricValue == 2


def test_refresh_updates_decisions_from_the_source() -> None:
    """Refreshes feed the source's values to decisions: a queue seen twice in a row scales up."""
    source = ScriptedSource()
    source.values = {"queue_waiting": 0.0, "current_replicas": 2, "gpu_schedulable_replicas": 10}
    clock = StepClock()
    with ServerThread(source=source, clock=clock) as server:
        request = pb.GetMetricsRequest(scaledObjectRef=ref(minReplicas="2", targetQueuePerReplica="10"))
        assert server.stub().GetMetrics(request, timeout=5).metricValues[0].metricValue == 2
        source.values["queue_waiting"] = 300.0
        clock.advance(15)
        server.refresh()  # one refresh with a queue: a spike until the next one shows it too
        assert server.stub().GetMetrics(request, timeout=5).metricValues[0].metricValue == 2
        clock.advance(15)
        server.refresh()
        assert server.stub().GetMetrics(request, timeout=5).metricValues[0].metricValue == 12  # 2 + 10 GPUs


def test_stale_inputs_turn_into_unavailable_then_recover() -> None:
    """A queue missing past maxStalenessSeconds is held, then UNAVAILABLE, then live again."""
    source = ScriptedSource()
    source.values = {"queue_waiting": 50.0, "current_replicas": 2, "gpu_schedulable_replicas": 10}
    clock = StepClock()
    with ServerThread(source=source, clock=clock) as server:
        request = pb.GetMetricsRequest(scaledObjectRef=ref(maxStalenessSeconds="60"))
        assert server.stub().GetMetrics(request, timeout=5).metricValues[0].metricValue == 5
        source.values = {"current_replicas": 2, "gpu_schedulable_replicas": 10}  # queue gone
        clock.advance(30)
        server.refresh()
        assert server.stub().GetMetrics(request, timeout=5).metricValues[0].metricValue == 5  # held
        clock.advance(60)
        server.refresh()
        with pytest.raises(grpc.RpcError) as caught:
            server.stub().GetMetrics(request, timeout=5)
        assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
        assert "maxStalenessSeconds" in (caught.value.details() or "")
        source.values["queue_waiting"] = 10.0
        clock.advance(30)  # 120 s in: past the warm-up that holds the 2 standing (signals/last_known.py)
        server.refresh()
        # live again: 10 waiting is one replica; without token capacities there is no forecast to hold on
        assert server.stub().GetMetrics(request, timeout=5).metricValues[0].metricValue == 1


def test_health_and_reflection(server: ServerThread) -> None:
    """Health checks answer SERVING and reflection lists the scaler and health services."""
    channel = server.channel()
    health = health_pb2_grpc.HealthStub(channel)
    for service in ("", "externalscaler.ExternalScaler"):
        status = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status
        assert status == health_pb2.HealthCheckResponse.SERVING
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    replies = stub.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5
    )
    names = {s.name for reply in replies for s in reply.list_services_response.service}
    assert "externalscaler.ExternalScaler" in names
    assert "grpc.health.v1.Health" in names


def test_metadata_is_parsed_once_per_distinct_map(server: ServerThread) -> None:
    """Metadata is parsed once per distinct map, however often it is sent."""
    stub = server.stub()
    for _ in range(5):
        stub.GetMetricSpec(ref(minReplicas="2"), timeout=5)
    assert len(server.runtime.registry._parsed) == 1
    stub.GetMetricSpec(ref(minReplicas="3"), timeout=5)
    assert len(server.runtime.registry._parsed) == 2


def test_changed_metadata_applies_to_the_next_decision() -> None:
    """Changed metadata for a ScaledObject takes effect at the next refresh."""
    clock = StepClock()
    with ServerThread(clock=clock) as server:
        stub = server.stub()
        assert (
            stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref(minReplicas="2")))
            .metricValues[0]
            .metricValue
            == 2
        )
        stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref(minReplicas="5")))
        clock.advance(15)
        server.refresh()
        assert (
            stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref(minReplicas="5")))
            .metricValues[0]
            .metricValue
            == 5
        )


def test_idle_targets_are_forgotten() -> None:
    """A target nobody asks about for two hours is dropped from the registry."""
    clock = StepClock()
    with ServerThread(clock=clock) as server:
        server.stub().IsActive(ref(name="old"), timeout=5)
        clock.advance(7200)
        server.refresh()
        assert len(server.runtime.registry) == 0


# Two clocks years apart: the decision follows the injected clock, not the host's.
@pytest.mark.parametrize("start", [datetime(2030, 1, 1, tzinfo=UTC), datetime(2041, 6, 1, tzinfo=UTC)])
def test_now_is_not_read_by_the_engine(start: datetime) -> None:
    """A decision's time is the injected clock's, not the host's."""
    clock = StepClock(start)
    with ServerThread(clock=clock) as server:
        server.stub().GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref()), timeout=5)
        decision = server.runtime.registry.targets()[0].latest
        assert decision is not None
        assert decision.now == clock.now
