"""HarnessService for one trial run: what the harness asks the agent over its Unix socket."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import grpc.aio

import pedl._grpc
from pedl.v1 import agent_pb2, common_pb2, harness_pb2, harness_pb2_grpc

# A harness may report this many timeline phases per run; more are dropped (user code could flood them).
MAX_PHASES = 2000


class HarnessServicer(harness_pb2_grpc.HarnessServiceServicer):
    """Hands the harness its trial and workloads, and passes its results on through `on_result`."""

    def __init__(
        self,
        start: agent_pb2.StartTrial,
        on_result: Callable[[common_pb2.WorkloadResult], None],
        on_epoch_length: Callable[[int], None] = lambda batches: None,
    ) -> None:
        self.start = start
        self.model_definition_dir = ""
        self._on_result = on_result
        self._on_epoch_length = on_epoch_length
        self._workloads: asyncio.Queue[common_pb2.Workload] = asyncio.Queue()
        self._in_progress: common_pb2.Workload | None = None
        # Workloads queued or running, by (kind, step, batches): their results are still to come.
        self._held: list[tuple[int, int, int]] = []
        # Whether the harness has been handed a training workload, and the error it reported.
        self.trained = False
        self.failure: agent_pb2.FailureSignature | None = None
        # Set at the harness's first request for a workload: it has loaded (load_limit.py).
        self.loaded = asyncio.Event()
        # The harness's timeline phases, and when it was handed TERMINATE (the start of its exit).
        self.timeline: list[common_pb2.TimelinePhase] = []
        self.terminate_sent_at: float | None = None
        # Called once the harness has taken its last piece of work: TERMINATE, or a checkpoint with
        # only TERMINATE behind it (what is left is saving, uploading and exiting).
        self.on_last_work: Callable[[], None] | None = None
        self._terminate_queued = False
        # Until done, workloads are held back: a harness started while its slots' previous run still
        # finishes (TrialRun) gets ready meanwhile and starts its first workload once they are free.
        self.gate: asyncio.Future[None] | None = None
        self.first_asked_at: float | None = None  # the harness's first request for a workload
        # When the harness took the workload it holds (time.monotonic), None while it holds none.
        self.busy_since: float | None = None

    def add_workload(self, workload: common_pb2.Workload) -> bool:
        """Queues a workload of this run; one of another run or trial is refused (False).

        A workload this run already holds is not queued twice: a scheduler that adopted the run
        after a restart does not know which of its queued workloads the run holds, and re-sends
        them; the result of the one held answers both.
        """
        if workload.trial_id != self.start.trial_id or workload.run_id != self.start.run_id:
            return False
        key = _key(workload)
        if key in self._held:
            return True
        if workload.kind == common_pb2.WORKLOAD_KIND_TERMINATE:
            self._terminate_queued = True
        self._held.append(key)
        self._workloads.put_nowait(workload)
        return True

    @property
    def queued(self) -> int:
        return self._workloads.qsize()

    @property
    def busy(self) -> bool:
        """Whether the harness holds a workload it has not completed yet."""
        return self._in_progress is not None or not self._workloads.empty()

    async def GetTrialInfo(
        self, request: harness_pb2.GetTrialInfoRequest, context: grpc.aio.ServicerContext
    ) -> harness_pb2.GetTrialInfoResponse:
        return harness_pb2.GetTrialInfoResponse(
            trial=self.start, model_definition_dir=self.model_definition_dir
        )

    async def NextWorkload(
        self, request: harness_pb2.NextWorkloadRequest, context: grpc.aio.ServicerContext
    ) -> harness_pb2.NextWorkloadResponse:
        self.loaded.set()
        if self.first_asked_at is None:
            self.first_asked_at = time.time()
        if self.gate is not None and not self.gate.done():
            await asyncio.shield(self.gate)
        workload = await self._workloads.get()
        self._in_progress = workload
        self.busy_since = time.monotonic()
        if workload.kind == common_pb2.WORKLOAD_KIND_RUN_STEP:
            self.trained = True
        elif workload.kind == common_pb2.WORKLOAD_KIND_TERMINATE:
            self.terminate_sent_at = time.time()
        last = workload.kind == common_pb2.WORKLOAD_KIND_TERMINATE or (
            workload.kind == common_pb2.WORKLOAD_KIND_CHECKPOINT_MODEL
            and self._terminate_queued
            and self._workloads.qsize() == 1
        )
        if last and self.on_last_work is not None:
            self.on_last_work()
        return harness_pb2.NextWorkloadResponse(workload=workload)

    async def CompleteWorkload(
        self, request: harness_pb2.CompleteWorkloadRequest, context: grpc.aio.ServicerContext
    ) -> harness_pb2.CompleteWorkloadResponse:
        w = request.result.workload
        if w.trial_id != self.start.trial_id or w.run_id != self.start.run_id:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"result.workload is for trial {w.trial_id} run {w.run_id}, but this harness runs "
                f"trial {self.start.trial_id} run {self.start.run_id}",
            )
        for phase in request.timeline[: max(0, MAX_PHASES - len(self.timeline))]:
            self.timeline.append(
                common_pb2.TimelinePhase(
                    name=phase.name[:100],
                    start=phase.start,
                    end=phase.end,
                    source="harness",
                    run_id=self.start.run_id,
                )
            )
        self._in_progress = None
        self.busy_since = None
        if _key(w) in self._held:
            self._held.remove(_key(w))
        self._on_result(request.result)
        return harness_pb2.CompleteWorkloadResponse()

    async def ReportFailure(
        self, request: harness_pb2.ReportFailureRequest, context: grpc.aio.ServicerContext
    ) -> harness_pb2.ReportFailureResponse:
        if self.failure is None:  # the first report stands (ranks that only lost a peer send none)
            self.failure = agent_pb2.FailureSignature()
            self.failure.CopyFrom(request.failure)
        return harness_pb2.ReportFailureResponse()

    async def ReportEpochLength(
        self, request: harness_pb2.ReportEpochLengthRequest, context: grpc.aio.ServicerContext
    ) -> harness_pb2.ReportEpochLengthResponse:
        if request.batches < 1:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"an epoch of {request.batches} batches cannot be trained"
            )
        self._on_epoch_length(request.batches)
        return harness_pb2.ReportEpochLengthResponse()

    def failure_report(self) -> agent_pb2.FailureSignature | None:
        """The reported error with whether training had begun, for TrialExited (None: none reported)."""
        if self.failure is None:
            return None
        report = agent_pb2.FailureSignature()
        report.CopyFrom(self.failure)
        report.trained = self.trained
        return report


def _key(workload: common_pb2.Workload) -> tuple[int, int, int]:
    return (workload.kind, workload.step_id, workload.total_batches)


async def serve_on_socket(servicer: HarnessServicer, socket_path: Path) -> grpc.aio.Server:
    """The run's HarnessService on its Unix socket, a stale socket file of an earlier run replaced."""
    socket_path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        socket_path.unlink()
    server, _ = pedl._grpc.aio_server(
        [lambda s: harness_pb2_grpc.add_HarnessServiceServicer_to_server(servicer, s)],
        [pedl._grpc.service_name(harness_pb2, "HarnessService")],
        f"unix:{socket_path}",
    )
    await server.start()
    await pedl._grpc.mark_serving(server)
    return server
