"""The agent's one bidirectional stream to the scheduler, reconnected with backoff when it breaks."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, cast

import grpc
import grpc.aio
import structlog

import pedl._grpc
from pedl._backoff import backoff_seconds as _backoff
from pedl.v1 import agent_pb2, agent_pb2_grpc

from .agent import Agent
from .outbox import Outbox
from .version import IncompatibleScheduler, check_scheduler_protocol

_Call = grpc.aio.StreamStreamCall[agent_pb2.ConnectRequest, agent_pb2.ConnectResponse]

DEFAULT_HEARTBEAT_SECONDS = 5.0
FIRST_BACKOFF_SECONDS = 0.1
# Bounds on one batch message to a scheduler that accepts batches.
BATCH_MAX_MESSAGES = 256
BATCH_MAX_BYTES = 4 * 1024 * 1024


def backoff_seconds(failures: int, cap: float) -> float:
    """0.1 s, 0.2 s, 0.4 s, ... up to `cap` after `failures` consecutive failed attempts (pedl._backoff;
    no jitter: the scheduler's own accept loop spreads reconnecting agents)."""
    return _backoff(failures + 1, FIRST_BACKOFF_SECONDS, cap, jitter=False)


class SchedulerLink:
    """Registers, heartbeats, relays the outbox upstream and hands scheduler messages to the agent."""

    def __init__(self, master: str, agent: Agent, outbox: Outbox, backoff_cap_seconds: float = 5.0) -> None:
        self._master = master
        self._agent = agent
        self._outbox = outbox
        self._cap = backoff_cap_seconds
        self._log = structlog.get_logger(master=master)
        self.connected = asyncio.Event()
        self.sessions = 0
        # Whether the scheduler of the current session accepts ConnectRequest.batch.
        self._batches = False

    async def run(self, stop: asyncio.Event) -> None:
        """Keeps a session up until `stop` is set."""
        failures = 0
        while not stop.is_set():
            sessions_before = self.sessions
            try:
                await self._session(stop)
            except IncompatibleScheduler as e:
                self._log.error("scheduler refused", error=str(e))
                raise
            except grpc.aio.AioRpcError as e:
                if e.code() == grpc.StatusCode.FAILED_PRECONDITION and self.sessions == sessions_before:
                    # Refused at registration (this agent's link revision is too old): retrying cannot help.
                    self._log.error("scheduler refused registration", details=e.details())
                    raise IncompatibleScheduler(e.details()) from None
                self._log.warning("scheduler stream broke", code=e.code().name, details=e.details())
            except Exception as e:  # any broken stream is retried, whatever broke it
                self._log.warning("scheduler stream broke", error=f"{type(e).__name__}: {e}")
            finally:
                self.connected.clear()
            if stop.is_set():
                break
            # A session the scheduler accepted resets the backoff even though it ended in an error.
            failures = 0 if self.sessions > sessions_before else failures
            delay = backoff_seconds(failures, self._cap)
            failures += 1
            self._log.info("reconnecting to the scheduler", in_seconds=delay)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)

    async def _session(self, stop: asyncio.Event) -> None:
        """One stream from register until it breaks (raises) or `stop` is set (returns)."""
        channel = pedl._grpc.aio_channel(self._master)
        stub = cast("agent_pb2_grpc.AgentLinkServiceAsyncStub", agent_pb2_grpc.AgentLinkServiceStub(channel))
        call = stub.Connect()
        registered = asyncio.Event()
        interval: list[float] = [DEFAULT_HEARTBEAT_SECONDS]
        tasks: list[asyncio.Task[Any]] = []
        self._batches = False
        try:
            register = self._agent.register_message()
            register.register.accepts_batches = True
            await call.write(register)
            running = len(register.register.running_trials)
            self._log.info("registering", running_trials=running, buffered=len(self._outbox))
            tasks = [
                asyncio.ensure_future(self._read(call, registered, interval)),
                asyncio.ensure_future(self._write(call, registered, interval)),
                asyncio.ensure_future(stop.wait()),
            ]
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                if not t.cancelled() and (error := t.exception()) is not None:
                    raise error
            if not stop.is_set():
                raise ConnectionError("the scheduler closed the stream")
            with contextlib.suppress(Exception):  # a polite half-close; the stream goes away regardless
                await asyncio.wait_for(call.done_writing(), 1.0)
                # Until the scheduler ends its side, the last messages (the runs' exits) may still be
                # in flight: cancelling now could drop them.
                await asyncio.wait([tasks[0]], timeout=2.0)
        finally:
            for t in tasks:
                t.cancel()
            call.cancel()
            await channel.close()

    async def _read(self, call: _Call, registered: asyncio.Event, interval: list[float]) -> None:
        while True:
            message = await call.read()
            if not isinstance(message, agent_pb2.ConnectResponse):  # grpc.aio.EOF
                return
            if message.WhichOneof("message") == "registered":
                check_scheduler_protocol(message.registered.protocol, self._master)
                if message.registered.heartbeat_interval_seconds > 0:
                    interval[0] = message.registered.heartbeat_interval_seconds
                self._batches = message.registered.accepts_batches
                self.sessions += 1
                self._log.info(
                    "registered",
                    cluster_id=message.registered.cluster_id,
                    heartbeat_seconds=interval[0],
                )
                registered.set()
                self.connected.set()
                continue
            if message.WhichOneof("message") == "batch":
                for item in message.batch.messages:
                    self._agent.handle(item)
            else:
                self._agent.handle(message)

    async def _write(self, call: _Call, registered: asyncio.Event, interval: list[float]) -> None:
        await registered.wait()
        loop = asyncio.get_running_loop()
        next_beat = loop.time() + interval[0]
        while True:
            message = await self._outbox.peek(timeout=max(0.0, next_beat - loop.time()))
            if message is not None and self._batches and len(self._outbox) > 1:
                # Everything queued goes as one message; popped only once written, so a broken
                # stream re-sends it all on the next one.
                messages = self._outbox.peek_many(BATCH_MAX_MESSAGES, BATCH_MAX_BYTES)
                await call.write(
                    agent_pb2.ConnectRequest(batch=agent_pb2.ConnectRequestBatch(messages=messages))
                )
                self._outbox.pop_many(messages)
            elif message is not None:
                await call.write(message)
                self._outbox.pop()
            if loop.time() >= next_beat:
                await call.write(agent_pb2.ConnectRequest(heartbeat=agent_pb2.Heartbeat()))
                next_beat = loop.time() + interval[0]
