"""KEDA's ExternalScaler servicer: the wire mapping from the latest decision to responses.

``ExternalScalerService`` answers KEDA's RPCs from ``Target.latest`` and turns failures
into gRPC status codes; ``scaler_handlers`` is its method table. It reaches the runtime's
event loop through ``LoopBridge`` (scaler.outputs.loop_bridge); ``GrpcServer``
(scaler.outputs.grpc_server) serves it.

* GetMetricSpec: one MetricSpec, ``targetSize`` 1 (and ``targetSizeFloat`` 1.0), so the
  HPA's AverageValue arithmetic turns the metric value into the replica count itself.
* GetMetrics: one MetricValue whose value is the decided replica count; inputs older than
  the target's ``maxStalenessSeconds`` are ``UNAVAILABLE`` instead, so KEDA's fallback applies.
* IsActive / StreamIsActive: always true; the floor never reaches zero.
* StreamMetricSpec: UNIMPLEMENTED. The spec never changes, so there is nothing to push;
  KEDA falls back to polling GetMetricSpec silently.

RPCs never wait on Prometheus or Kubernetes: they read ``Target.latest``. Only the very
first call for a new target waits (up to ``first_decision_timeout_s``) for its first
decision; invalid metadata is ``INVALID_ARGUMENT`` naming every bad key; any other
failure is ``INTERNAL`` or ``UNAVAILABLE`` with a message, never ``UNKNOWN``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
from google.protobuf.message import DecodeError

from scaler.config import MetadataError
from scaler.hpa import METRIC_NAME
from scaler.model import Decision
from scaler.outputs.loop_bridge import LoopBridge, RpcError
from scaler.proto import externalscaler_pb2 as pb
from scaler.proto import externalscaler_pb2_grpc as pb_grpc
from scaler.targets.registry import Target, TargetKey
from scaler.targets.runtime import Runtime

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["ExternalScaler"].full_name
MAX_NAME_LENGTH = 253

T = TypeVar("T")
Context = grpc.ServicerContext


class Undecodable:
    """A request body protobuf could not parse (e.g. a string field with invalid UTF-8)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _safe(parse: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def deserialize(data: bytes) -> Any:
        try:
            return parse(data)
        except DecodeError as exc:
            return Undecodable(str(exc))

    return deserialize


@dataclass
class ServerOptions:
    """Limits of the gRPC service: first-decision wait, staleness check, worker and stream slots."""

    first_decision_timeout_s: float = 1.0
    enforce_staleness: bool = True
    # Unary RPCs that run Python at once. More threads only queue on the interpreter lock.
    workers: int = 4
    # StreamIsActive streams held open at once (each parks one thread; beyond: RESOURCE_EXHAUSTED).
    # KEDA opens them only for `external-push` triggers; `external` polls IsActive instead.
    max_streams: int = 16
    # How long an RPC for a new target (or changed metadata) waits for the event loop to
    # register it; beyond, UNAVAILABLE (KEDA retries) rather than a thread held forever.
    register_timeout_s: float = 10.0


class ExternalScalerService(LoopBridge, pb_grpc.ExternalScalerServicer):
    """The ExternalScaler RPCs, run on gRPC's thread pool; decisions come from the runtime's loop.

    Each unary RPC holds one of ``workers`` slots while it runs Python and gives it back
    while it waits (a new target's first decision, registering on the runtime's loop), so
    at most ``workers`` threads contend for the interpreter lock however many RPCs arrive
    together. The refresh loop and everything that changes the registry run on the
    runtime's event loop; RPC threads only read, and hand the rest to that loop.
    """

    def __init__(self, runtime: Runtime, options: ServerOptions | None = None, log: Any = None) -> None:
        self.runtime = runtime
        self.options = options or ServerOptions()
        self.log = log
        super().__init__(self.options.workers, self.options.max_streams)
        self.rpc_counts: dict[tuple[str, str], int] = {}
        self._counts_lock = threading.Lock()

    # ---- helpers ---------------------------------------------------------------------

    def _register(self, key: TargetKey, metadata: dict[str, str], now: float) -> Target:
        """On the loop: register or update the target (parsing its metadata once)."""
        target, new = self.runtime.registry.resolve(key, metadata, now)
        if new:
            self.runtime.on_new_target(target)
        return target

    def _target(self, ref: pb.ScaledObjectRef | Undecodable) -> Target:
        if isinstance(ref, Undecodable):
            raise RpcError(grpc.StatusCode.INVALID_ARGUMENT, f"undecodable request: {ref.reason}")
        problems = []
        if not ref.name or len(ref.name) > MAX_NAME_LENGTH:
            problems.append("name: must be a ScaledObject name (1-253 characters)")
        if not ref.namespace or len(ref.namespace) > MAX_NAME_LENGTH:
            problems.append("namespace: must be a namespace (1-253 characters)")
        if problems:
            raise RpcError(
                grpc.StatusCode.INVALID_ARGUMENT, "invalid ScaledObjectRef: " + "; ".join(problems)
            )
        key = TargetKey(ref.namespace, ref.name)
        metadata = dict(ref.scalerMetadata)
        now = self.runtime.now_timestamp()
        target = self.runtime.registry.polled(key, metadata, now)
        if target is not None:  # the common case: a known target polled again, read-only
            return target
        try:
            return self._on_loop(lambda: self._register(key, metadata, now), self.options.register_timeout_s)
        except MetadataError as exc:
            raise RpcError(grpc.StatusCode.INVALID_ARGUMENT, f"{key}: {exc}") from None

    def _decision(self, target: Target) -> Decision:
        decision = target.latest
        if decision is None:
            timeout = self.options.first_decision_timeout_s
            self._wait_on_loop(lambda: self.runtime.first_decision(target, timeout), timeout + 1.0)
            decision = target.latest
        if decision is None:
            raise RpcError(
                grpc.StatusCode.UNAVAILABLE,
                f"{target.key}: no decision yet (first refresh still running); KEDA will retry",
            )
        # The decision says whether it may still be served; this layer only translates.
        age = self.runtime.stale_for(target, decision) if self.options.enforce_staleness else None
        if age is not None:
            limit = target.policy.max_staleness_seconds
            raise RpcError(
                grpc.StatusCode.UNAVAILABLE,
                f"{target.key}: inputs stale for {age:.0f}s (> maxStalenessSeconds={limit:g});"
                " KEDA's fallback applies",
            )
        return decision

    def _run(self, method: str, context: Context, body: Callable[[], T]) -> T:
        try:
            with self._slots:
                result = body()
        except RpcError as exc:
            self._count(method, exc.code.name)
            context.abort(exc.code, exc.details)
            raise  # unreachable: abort raises
        except Exception as exc:
            self._count(method, "INTERNAL")
            if self.log is not None:
                self.log.error("rpc_failed", method=method, error=str(exc), error_type=type(exc).__name__)
            context.abort(grpc.StatusCode.INTERNAL, f"{method} failed: {type(exc).__name__}: {exc}")
            raise
        self._count(method, "OK")
        return result

    def _count(self, method: str, code: str) -> None:
        key = (method, code)
        with self._counts_lock:
            self.rpc_counts[key] = self.rpc_counts.get(key, 0) + 1

    # ---- RPCs -------------------------------------------------------------------------

    def IsActive(self, request: pb.ScaledObjectRef, context: Context) -> pb.IsActiveResponse:
        """Always true (registering the target if new): the floor never reaches zero."""

        def body() -> pb.IsActiveResponse:
            self._target(request)
            return pb.IsActiveResponse(result=True)

        return self._run("IsActive", context, body)

    def StreamIsActive(self, request: pb.ScaledObjectRef, context: Context) -> Iterator[pb.IsActiveResponse]:
        """One true, then the stream held open until shutdown or the client leaves (slots limited)."""

        def body() -> None:
            self._target(request)
            if not self._streams.acquire(blocking=False):
                raise RpcError(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"{self.options.max_streams} StreamIsActive streams are open; the answer is always"
                    " true, so an `external` trigger (polling IsActive) needs no stream",
                )

        self._run("StreamIsActive", context, body)
        try:
            yield pb.IsActiveResponse(result=True)
            # Keep the stream open until the server shuts down (KEDA then reconnects
            # elsewhere) or the client goes away; this thread holds no slot meanwhile.
            while not self.closing.wait(1.0):
                if not context.is_active():
                    return
        finally:
            self._streams.release()

    def GetMetricSpec(self, request: pb.ScaledObjectRef, context: Context) -> pb.GetMetricSpecResponse:
        """One metric spec with target 1, so the HPA's replica count is the metric value."""

        def body() -> pb.GetMetricSpecResponse:
            self._target(request)
            spec = pb.MetricSpec(metricName=METRIC_NAME, targetSize=1, targetSizeFloat=1.0)
            return pb.GetMetricSpecResponse(metricSpecs=[spec])

        return self._run("GetMetricSpec", context, body)

    def GetMetrics(self, request: pb.GetMetricsRequest, context: Context) -> pb.GetMetricsResponse:
        """The target's latest decided replicas as the metric value; UNAVAILABLE when inputs are stale."""

        def body() -> pb.GetMetricsResponse:
            if isinstance(request, Undecodable):
                raise RpcError(grpc.StatusCode.INVALID_ARGUMENT, f"undecodable request: {request.reason}")
            target = self._target(request.scaledObjectRef)
            decision = self._decision(target)
            value = pb.MetricValue(
                metricName=request.metricName or METRIC_NAME,
                metricValue=math.ceil(decision.replicas),
                metricValueFloat=float(decision.replicas),
            )
            return pb.GetMetricsResponse(metricValues=[value])

        return self._run("GetMetrics", context, body)

    def StreamMetricSpec(
        self, request: pb.ScaledObjectRef, context: Context
    ) -> Iterator[pb.GetMetricSpecResponse]:
        """Aborts with UNIMPLEMENTED: the metric spec never changes, so KEDA polls it instead."""
        self._count("StreamMetricSpec", "UNIMPLEMENTED")
        context.abort(
            grpc.StatusCode.UNIMPLEMENTED,
            "StreamMetricSpec is not implemented: this scaler's metric spec never changes (target 1)",
        )
        yield pb.GetMetricSpecResponse()  # pragma: no cover - abort raises


def scaler_handlers(service: ExternalScalerService) -> grpc.GenericRpcHandler:
    """The ExternalScaler method table, with deserializers that turn undecodable bodies into
    INVALID_ARGUMENT instead of grpc's INTERNAL "Exception deserializing request"."""
    ref = _safe(pb.ScaledObjectRef.FromString)
    unary = grpc.unary_unary_rpc_method_handler
    stream = grpc.unary_stream_rpc_method_handler
    return grpc.method_handlers_generic_handler(
        SERVICE_NAME,
        {
            "IsActive": unary(service.IsActive, ref, pb.IsActiveResponse.SerializeToString),
            "StreamIsActive": stream(service.StreamIsActive, ref, pb.IsActiveResponse.SerializeToString),
            "GetMetricSpec": unary(service.GetMetricSpec, ref, pb.GetMetricSpecResponse.SerializeToString),
            "GetMetrics": unary(
                service.GetMetrics,
                _safe(pb.GetMetricsRequest.FromString),
                pb.GetMetricsResponse.SerializeToString,
            ),
            "StreamMetricSpec": stream(
                service.StreamMetricSpec, ref, pb.GetMetricSpecResponse.SerializeToString
            ),
        },
    )
