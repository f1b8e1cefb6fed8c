"""gRPC retries are declared once, in every channel's service config: a checkpoint store and a
scheduler that refuse the first calls with UNAVAILABLE are ridden out within RETRY_ATTEMPTS, and a
longer refusal fails with a message naming the server and its reason."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import grpc

from pedl import _grpc
from pedl.checkpoints.client import CheckpointStoreClient
from pedl.checkpoints.errors import CheckpointError
from pedl.v1 import checkpoint_store_pb2 as store_pb2
from pedl.v1 import checkpoint_store_pb2_grpc, common_pb2, scheduler_pb2, scheduler_pb2_grpc
from pedl_agent.model_definitions import ModelDefinitionCache


class RefusingStore(checkpoint_store_pb2_grpc.CheckpointStoreServiceServicer):
    def __init__(self, refuse: int) -> None:
        self.refuse, self.calls = refuse, 0

    async def GetCheckpoint(self, request, context):  # type: ignore[no-untyped-def]  # generated API
        self.calls += 1
        if self.calls <= self.refuse:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"store restarting (call {self.calls})")
        return store_pb2.GetCheckpointResponse(checkpoint=common_pb2.Checkpoint(uuid=request.uuid))


class RefusingScheduler(scheduler_pb2_grpc.SchedulerServiceServicer):
    def __init__(self, refuse: int) -> None:
        self.refuse, self.calls = refuse, 0

    async def GetModelDefinition(self, request, context):  # type: ignore[no-untyped-def]  # generated API
        self.calls += 1
        if self.calls <= self.refuse:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"scheduler restarting (call {self.calls})")
        return scheduler_pb2.GetModelDefinitionResponse(model_definition=b"tarball")


async def serving(servicer: object, add: object) -> tuple[grpc.aio.Server, str]:
    server, port = _grpc.aio_server([lambda s: add(servicer, s)], [], "127.0.0.1:0")  # type: ignore[operator]
    await server.start()
    return server, f"127.0.0.1:{port}"


def store_get(refuse: int) -> tuple[str | Exception, int]:
    async def scenario() -> tuple[str | Exception, int]:
        store = RefusingStore(refuse)
        server, address = await serving(
            store, checkpoint_store_pb2_grpc.add_CheckpointStoreServiceServicer_to_server
        )
        try:
            with CheckpointStoreClient(address, direct=False) as client:
                try:
                    return (await asyncio.to_thread(client.get, "abc")).uuid, store.calls
                except CheckpointError as e:
                    return e, store.calls
        finally:
            await server.stop(0)

    return asyncio.run(scenario())


def fetch_model_definition(refuse: int, tmp_path: Path) -> tuple[bytes | Exception, int]:
    async def scenario() -> tuple[bytes | Exception, int]:
        scheduler = RefusingScheduler(refuse)
        server, address = await serving(scheduler, scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server)
        try:
            try:
                return await ModelDefinitionCache(address, tmp_path).get(7), scheduler.calls
            except RuntimeError as e:
                return e, scheduler.calls
        finally:
            await server.stop(0)

    return asyncio.run(scenario())


def test_a_store_refusing_fewer_calls_than_the_budget_is_ridden_out() -> None:
    assert store_get(refuse=_grpc.RETRY_ATTEMPTS - 1) == ("abc", _grpc.RETRY_ATTEMPTS)


def test_a_store_refusing_past_the_budget_is_a_clear_error() -> None:
    error, calls = store_get(refuse=100)
    assert calls == _grpc.RETRY_ATTEMPTS
    assert isinstance(error, CheckpointError) and error.code == grpc.StatusCode.UNAVAILABLE
    assert "checkpoint store at 127.0.0.1:" in str(error) and "unreachable: store restarting (call 5)" in str(
        error
    )


def test_the_agent_rides_out_a_scheduler_refusing_its_model_definition_fetch(tmp_path: Path) -> None:
    assert fetch_model_definition(_grpc.RETRY_ATTEMPTS - 1, tmp_path) == (b"tarball", _grpc.RETRY_ATTEMPTS)


def test_a_scheduler_refusing_past_the_budget_is_a_clear_error(tmp_path: Path) -> None:
    error, calls = fetch_model_definition(100, tmp_path)
    assert calls == _grpc.RETRY_ATTEMPTS and isinstance(error, RuntimeError)
    assert "cannot fetch the model definition of experiment 7" in str(error)
    assert "scheduler restarting (call 5)" in str(error)


def test_reads_also_retry_deadlines_and_every_method_has_a_policy() -> None:
    config = json.loads(_grpc.service_config())
    default, reads = config["methodConfig"]
    assert default["name"] == [{}] and default["retryPolicy"]["retryableStatusCodes"] == ["UNAVAILABLE"]
    read_methods = {n["method"] for n in reads["name"]}
    assert {"GetModelDefinition", "GetCheckpoint", "ListExperiments"} <= read_methods
    assert not read_methods & {"CreateExperiment", "KillExperiment", "DeleteCheckpoint"}
    assert reads["retryPolicy"]["retryableStatusCodes"] == ["UNAVAILABLE", "DEADLINE_EXCEEDED"]
    assert all(c.get("waitForReady") for c in json.loads(_grpc.service_config(True))["methodConfig"])
    assert "waitForReady" not in default
