"""Readiness probes for services `cluster up` starts: gRPC health and the scheduler's agent list."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from pedl import _grpc
from pedl.v1 import scheduler_pb2, scheduler_pb2_grpc


def is_serving(address: str, timeout: float = 2.0) -> bool:
    with _grpc.channel(address) as ch:
        try:
            reply = health_pb2_grpc.HealthStub(ch).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=timeout
            )
        except grpc.RpcError:
            return False
    return reply.status == health_pb2.HealthCheckResponse.SERVING


def registered_agents(master: str, timeout: float = 2.0, token: str | None = None) -> set[str]:
    with _grpc.channel(master, token=token) as ch:
        try:
            reply = scheduler_pb2_grpc.SchedulerServiceStub(ch).ListAgents(
                scheduler_pb2.ListAgentsRequest(), timeout=timeout
            )
        except grpc.RpcError:
            return set()
    return {a.id for a in reply.agents}
