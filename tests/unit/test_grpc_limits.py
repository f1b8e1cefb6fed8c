"""Message limits are set on purpose: a server refuses a request over its receive limit with
RESOURCE_EXHAUSTED for that call alone, and the scheduler's limit follows its create limits."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from pedl import _grpc
from pedl_scheduler.main import parse_args, receive_limit


def test_a_request_over_the_receive_limit_fails_alone() -> None:
    async def scenario() -> tuple[grpc.StatusCode, str, int]:
        server, port = _grpc.aio_server([], [], "127.0.0.1:0", max_receive_bytes=2**20)
        await server.start()
        await _grpc.mark_serving(server)
        try:
            async with _grpc.aio_channel(f"127.0.0.1:{port}", token="") as ch:
                stub = health_pb2_grpc.HealthStub(ch)
                with pytest.raises(grpc.aio.AioRpcError) as big:
                    await stub.Check(health_pb2.HealthCheckRequest(service="x" * (2 * 2**20)))
                ok = await stub.Check(health_pb2.HealthCheckRequest(service=""))
            return big.value.code(), big.value.details() or "", ok.status
        finally:
            await server.stop(0)

    code, details, status = asyncio.run(scenario())
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in details
    assert status == health_pb2.HealthCheckResponse.SERVING


def test_the_scheduler_takes_a_create_at_its_limits_and_grows_with_them() -> None:
    default = receive_limit(parse_args([]))
    assert default >= 96 * 2**20 + 2**20  # a 96 MiB model definition with a 1 MiB config
    flags = ["--model-definition-limit-mb", "200", "--max-config-bytes", "5000000"]
    raised = receive_limit(parse_args(flags))
    assert raised >= 200 * 2**20 + 5_000_000
