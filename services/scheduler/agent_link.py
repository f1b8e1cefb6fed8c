"""AgentLinkService: each agent's one bidirectional stream, relayed to the ExperimentManager."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import structlog

from pedl.v1 import agent_pb2, agent_pb2_grpc
from pedl_scheduler.cluster import CLOSE_STREAM, AgentHandle, Cluster
from pedl_scheduler.experiments import ExperimentManager

log = structlog.get_logger(component="agent_link")


class AgentLink(agent_pb2_grpc.AgentLinkServiceServicer):
    def __init__(
        self, manager: ExperimentManager, cluster: Cluster, cluster_id: str, heartbeat_interval: float
    ) -> None:
        self.manager = manager
        self.cluster = cluster
        self.cluster_id = cluster_id
        self.heartbeat_interval = heartbeat_interval

    async def Connect(self, request_iterator, context) -> AsyncIterator[agent_pb2.ConnectResponse]:  # noqa: N802
        try:
            first = await request_iterator.__anext__()
        except StopAsyncIteration:
            return
        if first.WhichOneof("message") != "register":
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "the first message must be register")
        agent = self.cluster.connect(first.register)
        log.info("agent connected", agent_id=agent.id, slots=len(agent.slots))
        yield agent_pb2.ConnectResponse(
            registered=agent_pb2.AgentRegistered(
                cluster_id=self.cluster_id, heartbeat_interval_seconds=self.heartbeat_interval
            )
        )
        self.manager.on_agent_registered(agent, list(first.register.running_trials))
        reader = asyncio.create_task(self._read(agent, request_iterator))
        try:
            while True:
                message = await agent.outbox.get()
                if message is CLOSE_STREAM:
                    break
                yield message
        finally:
            reader.cancel()
            if self.cluster.disconnect(agent):
                log.warning("agent disconnected", agent_id=agent.id)
                self.manager.on_agent_disconnected(agent.id)

    async def _read(self, agent: AgentHandle, request_iterator) -> None:
        try:
            async for message in request_iterator:
                self.cluster.heartbeat(agent)
                kind = message.WhichOneof("message")
                if kind == "workload_completed":
                    self.manager.on_workload_completed(agent, message.workload_completed.result)
                elif kind == "trial_logs":
                    self.manager.on_trial_logs(agent, message.trial_logs)
                elif kind == "trial_exited":
                    self.manager.on_trial_exited(agent, message.trial_exited)
        except (grpc.aio.AioRpcError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("agent message handling failed", agent_id=agent.id)
        finally:
            agent.send(CLOSE_STREAM)  # type: ignore[arg-type]
