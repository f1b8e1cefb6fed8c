"""The workload loop, independent of where workloads come from (agent over gRPC, local mode)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Protocol

from pedl import _log
from pedl._metrics import to_struct
from pedl.harness import model_code, timeline
from pedl.harness.controller import TrialController
from pedl.v1 import common_pb2

KIND = common_pb2.WorkloadKind


class WorkloadSource(Protocol):
    def next_workload(self) -> common_pb2.Workload:
        """The next workload; may block until there is one."""
        ...

    def complete(self, result: common_pb2.WorkloadResult) -> None: ...


class CheckpointStorage(Protocol):
    def store(self, directory: Path, total_batches: int) -> common_pb2.Checkpoint:
        """Persists the checkpoint files in `directory`; returns the stored Checkpoint."""
        ...

    def fetch(self, uuid: str, directory: Path) -> None:
        """Writes the files of checkpoint `uuid` into `directory`."""
        ...


def run_workload(
    controller: TrialController, workload: common_pb2.Workload, checkpoints: CheckpointStorage
) -> common_pb2.WorkloadResult:
    with timeline.phase(PHASE_NAMES.get(workload.kind, "workload")):
        return _run_workload(controller, workload, checkpoints)


# The timeline's name of each workload's phase.
PHASE_NAMES = {
    KIND.WORKLOAD_KIND_RUN_STEP: "train step",
    KIND.WORKLOAD_KIND_COMPUTE_VALIDATION_METRICS: "validation",
    KIND.WORKLOAD_KIND_CHECKPOINT_MODEL: "checkpoint",
}


def _run_workload(
    controller: TrialController, workload: common_pb2.Workload, checkpoints: CheckpointStorage
) -> common_pb2.WorkloadResult:
    started = time.monotonic()
    result = common_pb2.WorkloadResult()
    result.workload.CopyFrom(workload)
    if workload.kind == KIND.WORKLOAD_KIND_RUN_STEP:
        step = controller.train_until(workload.total_batches)
        result.metrics.CopyFrom(to_struct(step.metrics))
        result.num_batches = step.num_batches
        result.num_inputs = step.num_inputs
    elif workload.kind == KIND.WORKLOAD_KIND_COMPUTE_VALIDATION_METRICS:
        result.metrics.CopyFrom(to_struct(controller.validate()))
    elif workload.kind == KIND.WORKLOAD_KIND_CHECKPOINT_MODEL:
        with tempfile.TemporaryDirectory(prefix="pedl-checkpoint-") as tmp:
            directory = Path(tmp)
            with timeline.phase("checkpoint saved"):
                controller.save(directory)
                model_code.add_to_checkpoint(directory)
            with timeline.phase("checkpoint upload"):
                result.checkpoint.CopyFrom(checkpoints.store(directory, controller.batches_trained))
    else:
        raise ValueError(f"workload of unknown kind {workload.kind} ({KIND.Name(workload.kind)})")
    if stop_requested(controller):
        result.early_exit = common_pb2.EarlyExitReason.EARLY_EXIT_REASON_USER_REQUESTED_STOP
    result.duration_seconds = time.monotonic() - started
    return result


def stop_requested(controller: TrialController) -> bool:
    """Whether the trial called Determined's `context.set_stop_requested(True)` (any Trial API whose
    context has it). The workload in progress finishes; the result says so, and the scheduler then
    checkpoints the trial and ends it."""
    context = getattr(getattr(controller, "trial", None), "context", None)
    asked = getattr(context, "get_stop_requested", None)
    return bool(asked()) if callable(asked) else False


def run_workloads(
    controller: TrialController, source: WorkloadSource, checkpoints: CheckpointStorage
) -> None:
    """Runs workloads until TERMINATE (which gets no result: the process exiting is the answer)."""
    log = _log.get_logger(component="harness")
    while True:
        workload = source.next_workload()
        if workload.kind == KIND.WORKLOAD_KIND_TERMINATE:
            log.info("terminate", batches_trained=controller.batches_trained)
            return
        result = run_workload(controller, workload, checkpoints)
        log.info(
            "workload completed",
            kind=KIND.Name(workload.kind),
            step_id=workload.step_id,
            total_batches=workload.total_batches,
            seconds=round(result.duration_seconds, 3),
        )
        source.complete(result)
