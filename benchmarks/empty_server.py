"""An ExternalScaler that answers constants: the floor any gRPC Python server pays, for comparison."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio

from scaler.proto import externalscaler_pb2 as pb
from scaler.proto import externalscaler_pb2_grpc as pb_grpc


class Empty(pb_grpc.ExternalScalerServicer):
    async def IsActive(self, request: Any, context: Any) -> pb.IsActiveResponse:  # noqa: N802
        return pb.IsActiveResponse(result=True)

    async def StreamIsActive(self, request: Any, context: Any) -> AsyncIterator[pb.IsActiveResponse]:  # noqa: N802
        yield pb.IsActiveResponse(result=True)

    async def GetMetricSpec(self, request: Any, context: Any) -> pb.GetMetricSpecResponse:  # noqa: N802
        return pb.GetMetricSpecResponse(
            metricSpecs=[pb.MetricSpec(metricName="x", targetSize=1, targetSizeFloat=1)]
        )

    async def GetMetrics(self, request: Any, context: Any) -> pb.GetMetricsResponse:  # noqa: N802
        return pb.GetMetricsResponse(
            metricValues=[pb.MetricValue(metricName="x", metricValue=1, metricValueFloat=1)]
        )


async def main(port: int) -> None:
    server = grpc.aio.server()
    pb_grpc.add_ExternalScalerServicer_to_server(Empty(), server)
    health = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await health.set("", health_pb2.HealthCheckResponse.SERVING)
    await server.wait_for_termination()


if __name__ == "__main__":
    # The same loop as `scaler serve`, without importing the scaler (its memory is the floor's).
    try:
        import uvloop
    except ImportError:
        asyncio.run(main(int(sys.argv[1])))
    else:
        uvloop.run(main(int(sys.argv[1])))
