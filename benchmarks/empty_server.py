"""An ExternalScaler that answers constants: the floor any gRPC Python server pays, for comparison.

The same kind of server as `scaler serve` (gRPC's threaded server, four workers), so the
difference between the two is the scaler's own work.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from scaler.proto import externalscaler_pb2 as pb
from scaler.proto import externalscaler_pb2_grpc as pb_grpc


class Empty(pb_grpc.ExternalScalerServicer):
    def IsActive(self, request: Any, context: Any) -> pb.IsActiveResponse:  # noqa: N802
        return pb.IsActiveResponse(result=True)

    def StreamIsActive(self, request: Any, context: Any) -> Iterator[pb.IsActiveResponse]:  # noqa: N802
        yield pb.IsActiveResponse(result=True)

    def GetMetricSpec(self, request: Any, context: Any) -> pb.GetMetricSpecResponse:  # noqa: N802
        return pb.GetMetricSpecResponse(
            metricSpecs=[pb.MetricSpec(metricName="x", targetSize=1, targetSizeFloat=1)]
        )

    def GetMetrics(self, request: Any, context: Any) -> pb.GetMetricsResponse:  # noqa: N802
        return pb.GetMetricsResponse(
            metricValues=[pb.MetricValue(metricName="x", metricValue=1, metricValueFloat=1)]
        )


def main(port: int) -> None:
    sys.setswitchinterval(0.001)  # as `scaler serve` does
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_ExternalScalerServicer_to_server(Empty(), server)  # type: ignore[no-untyped-call]
    checker = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(checker, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    checker.set("", health_pb2.HealthCheckResponse.SERVING)
    server.wait_for_termination()


if __name__ == "__main__":
    main(int(sys.argv[1]))
