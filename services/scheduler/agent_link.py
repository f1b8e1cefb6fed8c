"""AgentLinkService: each agent's one bidirectional stream, relayed to the ExperimentManager.

Every stream's reader puts what its agent reports into ONE shared `Inbox`; the inbox hands
everything that has arrived, across all streams, to `Dispatcher.on_agent_messages` as one
batch, in arrival order (so each agent's own order is kept). A batch is one database transaction:
under load, what arrives while one commit waits on the disk is committed together by the next, so
fsyncs are shared instead of paid per result.

Both directions coalesce what is queued into one `batch` message where the other side accepts it
(RegisterAgent / AgentRegistered `accepts_batches`): a trial start and its first workloads, or a
result and the trial's exit, then cost one write and one wake-up instead of one each.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence

import grpc
import grpc.aio
import structlog

from pedl.v1 import agent_pb2, agent_pb2_grpc
from pedl_scheduler import agent_protocol
from pedl_scheduler.cluster import CLOSE_STREAM, AgentHandle, Cluster
from pedl_scheduler.experiments import ExperimentManager
from pedl_scheduler.storage import DatabaseUnavailable

log = structlog.get_logger(component="agent_link")

Batch = Sequence[tuple[AgentHandle, agent_pb2.ConnectRequest]]

# What the manager handles; heartbeats only refresh the agent's liveness.
HANDLED = frozenset({"workload_completed", "trial_logs", "trial_exited", "epoch_length", "draining"})
# Bounds on one outgoing batch message (far below the channels' message limit).
BATCH_MAX_MESSAGES = 256
BATCH_MAX_BYTES = 4 * 1024 * 1024


class Inbox:
    """Agent messages waiting to be handled, in arrival order, drained in batches by one task."""

    def __init__(self, handle: Callable[[Batch], None]) -> None:
        self._handle = handle
        self._items: deque[tuple[AgentHandle, agent_pb2.ConnectRequest]] = deque()
        self._scheduled: asyncio.Handle | None = None
        self.batches = 0
        self.messages = 0

    def put(self, agent: AgentHandle, message: agent_pb2.ConnectRequest) -> None:
        """Queues the message; the batch is handled once the loop has run what is ready now (the
        other streams' readers among it), so what arrives together is committed together."""
        self._items.append((agent, message))
        if self._scheduled is None:
            self._scheduled = asyncio.get_running_loop().call_soon(self._drain_scheduled)

    def _drain_scheduled(self) -> None:
        self._scheduled = None
        self.drain()

    def drain(self) -> None:
        """Handles everything queued now, as one batch; its failure closes the senders' streams."""
        if not self._items:
            return
        batch = list(self._items)
        self._items.clear()
        self.batches += 1
        self.messages += len(batch)
        try:
            self._handle(batch)
        except DatabaseUnavailable as e:
            # A serving scheduler restarts in place before this (db_restart); without that hook, the
            # agents reconnect and re-synchronise their runs, as after any broken stream.
            agents = {id(agent): agent for agent, _ in batch}
            log.warning("agent messages wait for the database", error=str(e))
            for agent in agents.values():
                agent.send(CLOSE_STREAM)
        except Exception:
            # The transaction rolled back and nothing it decided was sent. The agents reconnect and
            # re-register, which re-synchronises their runs (as a broken stream always has).
            agents = {id(agent): agent for agent, _ in batch}
            log.exception("agent message handling failed", agents=sorted(a.id for a in agents.values()))
            for agent in agents.values():
                agent.send(CLOSE_STREAM)

    def close(self) -> None:
        if self._scheduled is not None:
            self._scheduled.cancel()
            self._scheduled = None


class AgentLink(agent_pb2_grpc.AgentLinkServiceServicer):
    def __init__(
        self, manager: ExperimentManager, cluster: Cluster, cluster_id: str, heartbeat_interval: float
    ) -> None:
        self.manager = manager
        self.cluster = cluster
        self.cluster_id = cluster_id
        self.heartbeat_interval = heartbeat_interval
        self.inbox = Inbox(manager.rooms.on_agent_messages)

    async def Connect(  # noqa: N802
        self, request_iterator: AsyncIterator[agent_pb2.ConnectRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[agent_pb2.ConnectResponse]:
        try:
            first = await request_iterator.__anext__()
        except StopAsyncIteration:
            return
        if first.WhichOneof("message") != "register":
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "the first message must be register")
        refused = agent_protocol.refusal(first.register)
        if refused is not None:
            log.error("agent refused", agent_id=first.register.agent_id, reason=refused)
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, refused)
        # What an earlier stream of this agent delivered is handled before the register.
        self.inbox.drain()
        agent = self.cluster.connect(first.register)
        log.info("agent connected", agent_id=agent.id, slots=len(agent.slots))
        yield agent_pb2.ConnectResponse(
            registered=agent_pb2.AgentRegistered(
                cluster_id=self.cluster_id,
                heartbeat_interval_seconds=self.heartbeat_interval,
                accepts_batches=True,
                protocol=agent_protocol.SCHEDULER_PROTOCOL,
            )
        )
        self.manager.adoption.on_agent_registered(agent, list(first.register.running_trials))
        reader = asyncio.create_task(self._read(agent, request_iterator))
        try:
            while True:
                message = await agent.outbox.get()
                if message is CLOSE_STREAM:
                    break
                if not agent.accepts_batches or agent.outbox.empty():
                    yield message
                    continue
                batch, closing = _take_batch(agent.outbox, message)
                yield batch
                if closing:
                    break
        finally:
            reader.cancel()
            self.inbox.drain()  # what the stream delivered, before its agent counts as gone
            if self.cluster.disconnect(agent):
                log.warning("agent disconnected", agent_id=agent.id)
                self.manager.adoption.on_agent_disconnected(agent.id)

    async def _read(
        self, agent: AgentHandle, request_iterator: AsyncIterator[agent_pb2.ConnectRequest]
    ) -> None:
        try:
            async for message in request_iterator:
                self.cluster.heartbeat(agent)
                kind = message.WhichOneof("message")
                if kind in HANDLED:
                    self.inbox.put(agent, message)
                elif kind == "batch":
                    for item in message.batch.messages:
                        if item.WhichOneof("message") in HANDLED:
                            self.inbox.put(agent, item)
        except (grpc.aio.AioRpcError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("agent stream failed", agent_id=agent.id)
        finally:
            agent.send(CLOSE_STREAM)


def _take_batch(
    outbox: asyncio.Queue, first: agent_pb2.ConnectResponse
) -> tuple[agent_pb2.ConnectResponse, bool]:
    """`first` and what else is queued (within the bounds) as one batch; True if CLOSE_STREAM was next."""
    batch = agent_pb2.ConnectResponse()
    messages = batch.batch.messages
    messages.append(first)
    size = first.ByteSize()
    while not outbox.empty() and len(messages) < BATCH_MAX_MESSAGES and size < BATCH_MAX_BYTES:
        message = outbox.get_nowait()
        if message is CLOSE_STREAM:
            return batch, True
        messages.append(message)
        size += message.ByteSize()
    return batch, False
