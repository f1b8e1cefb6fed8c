"""An in-test HarnessService on a Unix socket: the agent's side, as the harness sees it."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from google.protobuf import struct_pb2

from pedl import _grpc
from pedl.v1 import agent_pb2, common_pb2, harness_pb2, harness_pb2_grpc

KIND = common_pb2.WorkloadKind


def workload(kind: int, total_batches: int = 0, step_id: int = 0) -> common_pb2.Workload:
    return common_pb2.Workload(kind=kind, trial_id=1, run_id=1, step_id=step_id, total_batches=total_batches)


def trial_info(model_dir: Path, config: dict[str, Any], hparams: dict[str, Any], **fields: Any) -> Any:
    struct = struct_pb2.Struct()
    struct.update(hparams)
    trial = agent_pb2.StartTrial(
        trial_id=1,
        run_id=1,
        experiment_id=1,
        config_json=json.dumps(config),
        hparams=struct,
        trial_seed=7,
        model_definition_name=model_dir.name,
        **fields,
    )
    return harness_pb2.GetTrialInfoResponse(trial=trial, model_definition_dir=str(model_dir))


class FakeAgent(harness_pb2_grpc.HarnessServiceServicer):
    def __init__(self, info: harness_pb2.GetTrialInfoResponse, workloads: list[common_pb2.Workload]) -> None:
        self.info = info
        self.workloads = list(workloads)
        self.results: list[common_pb2.WorkloadResult] = []
        self.handed_out: list[common_pb2.Workload] = []
        self.failures: list[agent_pb2.FailureSignature] = []

    async def GetTrialInfo(self, request: Any, context: Any) -> harness_pb2.GetTrialInfoResponse:
        return self.info

    async def NextWorkload(self, request: Any, context: Any) -> harness_pb2.NextWorkloadResponse:
        next_one = self.workloads.pop(0) if self.workloads else workload(KIND.WORKLOAD_KIND_TERMINATE)
        self.handed_out.append(next_one)
        return harness_pb2.NextWorkloadResponse(workload=next_one)

    async def CompleteWorkload(self, request: Any, context: Any) -> harness_pb2.CompleteWorkloadResponse:
        self.results.append(request.result)
        return harness_pb2.CompleteWorkloadResponse()

    async def ReportFailure(self, request: Any, context: Any) -> harness_pb2.ReportFailureResponse:
        self.failures.append(request.failure)
        return harness_pb2.ReportFailureResponse()


@contextmanager
def serving(agent: FakeAgent) -> Iterator[str]:
    """Serves `agent` on a fresh Unix socket (short path: sun_path is ~108 bytes); yields the path."""
    directory = tempfile.mkdtemp(prefix="pedl-h-", dir="/tmp")
    socket_path = f"{directory}/harness.sock"
    loop = asyncio.new_event_loop()
    started = threading.Event()
    stop: list[asyncio.Event] = []
    failure: list[BaseException] = []

    async def serve() -> None:
        server, _ = _grpc.aio_server(
            [lambda s: harness_pb2_grpc.add_HarnessServiceServicer_to_server(agent, s)],
            [_grpc.service_name(harness_pb2, "HarnessService")],
            f"unix://{socket_path}",
        )
        await server.start()
        await _grpc.mark_serving(server)
        stop.append(asyncio.Event())
        started.set()
        await stop[0].wait()
        await server.stop(None)

    def run() -> None:
        try:
            loop.run_until_complete(serve())
        except BaseException as exc:  # surfaced to the test below
            failure.append(exc)
            started.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        started.wait(30)
        if failure:
            raise failure[0]
        yield socket_path
    finally:
        if stop:
            loop.call_soon_threadsafe(stop[0].set)
        thread.join(30)
        loop.close()
        shutil.rmtree(directory, ignore_errors=True)
