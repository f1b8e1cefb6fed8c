"""A command entrypoint (a Determined Core API script) run as a trial.

The harness starts the user's command as its child and serves the Core API to it on a Unix socket
(`core_api_server`); the harness alone talks to the agent, with the same workloads, result
batching, trial credential and checkpoint store as a Trial class. So there is one path from a
trial to the scheduler, and a script's trial is recorded, checkpointed, paused, resumed and
searched exactly as any other.

How workloads map onto a script that runs its own loop:
- RUN_STEP(T) ends when the script's progress reaches T (steps_completed, or the searcher's
  `time_metric` in its validation metrics), when it stored a checkpoint (the scheduler hears of
  each at once, so a run killed a moment later resumes from it), or when it exited. Every report
  the script made goes out with the next result, each recorded as made.
- COMPUTE_VALIDATION_METRICS(T) answers with the script's first validation at or past T.
- CHECKPOINT_MODEL and TERMINATE come when the trial stops (searcher done, pause, preemption):
  `should_preempt()` turns true, and the answer waits for the script to checkpoint and exit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
import uuid as uuidlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pedl import _log
from pedl._metrics import BUILTIN_GROUPS, check_group, to_struct
from pedl.harness.agent_client import StoreCheckpoints
from pedl.harness.checkpoint_metadata_file import write_metadata
from pedl.harness.child_bootstrap import dying_with_this_process
from pedl.harness.process_tree import kill_with_descendants
from pedl.harness.script_stderr import StderrTail
from pedl.v1 import common_pb2

KIND = common_pb2.WorkloadKind
REPORT = common_pb2.ScriptReportKind


# Determined's master logs this (then the exit code) for a trial whose process exited non-zero;
# its users and its e2e tests look for it in the trial's log.
RESOURCES_FAILED = "resources failed with non-zero exit code"
# A RUN_STEP ends early to send the script's reports once the oldest has waited this long.
REPORT_FLUSH_SECONDS = 1.0


class ScriptFailed(RuntimeError):
    """The script exited with an error (`exit_code`, negative for a signal), or broke the Core API's
    rules (`exit_code` None)."""

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def determined_line(self) -> str | None:
        """The trial log line Determined writes for this failure, if the script exited non-zero."""
        if not self.exit_code:
            return None
        return f"{RESOURCES_FAILED}: {self} (exit code {self.exit_code})"


@dataclass(frozen=True)
class ScriptSettings:
    command: list[str]
    model_dir: Path
    chief: bool
    searcher_metric: str
    # The entrypoint as written when it is a string: run by `sh -c`, as Determined's launch runs it
    # (`command` then holds its words); empty for a list, which is executed as it is.
    shell: str = ""
    # Validation metric that measures a trial's progress for ASHA (searcher.time_metric), if any.
    time_metric: str | None = None
    # Lengths of the legacy searcher operations (searcher.max_length); empty when the script decides.
    operation_lengths: list[int] = field(default_factory=list)
    start_progress: int = 0
    # The unit those lengths count, as the config writes searcher.max_length (Determined's Unit value).
    configured_unit: str = "UNIT_BATCHES"


class CoreApiTrial:
    """The script's state as the harness sees it; the Core API server's handlers update it."""

    def __init__(
        self,
        settings: ScriptSettings,
        checkpoints: StoreCheckpoints,
        work_dir: Path,
        run_id: int = 0,
    ) -> None:
        self.settings = settings
        self._checkpoints = checkpoints
        self._work_dir = work_dir
        self._run_id = run_id
        self._cv = threading.Condition()
        self._log = _log.get_logger(component="harness")
        self.progress = settings.start_progress
        self._reports: list[common_pb2.ScriptReport] = []
        self._reports_since: float | None = None  # when the oldest unsent report was made (monotonic)
        self._validations: list[tuple[int, dict[str, Any]]] = []
        self._new_checkpoint = False
        self._exit_code: int | None = None
        self._preempt = False
        self._early_exit: common_pb2.EarlyExitReason.ValueType | None = None
        self._operation = 0
        self._operation_open = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: StderrTail | None = None

    # --- the child process ------------------------------------------------------------------

    @property
    def shown(self) -> str:
        """The entrypoint as the user wrote it, for messages."""
        return self.settings.shell or " ".join(self.settings.command)

    def argv(self) -> list[str]:
        """What is executed: a string entrypoint through `sh -c`, a list as it is."""
        return ["sh", "-c", self.settings.shell] if self.settings.shell else list(self.settings.command)

    def start(self, env: dict[str, str]) -> None:
        argv = self.argv()
        program = argv[0] if argv else ""
        if program and "/" not in program and shutil.which(program, path=env.get("PATH", os.defpath)) is None:
            raise ScriptFailed(f"cannot start the entrypoint {self.shown!r}: {program!r} is not on PATH")
        try:
            self._proc = subprocess.Popen(
                dying_with_this_process(argv),
                cwd=self.settings.model_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        except OSError as e:
            raise ScriptFailed(f"cannot start the entrypoint {self.shown!r}: {e}") from e
        assert self._proc.stderr is not None
        self._stderr = StderrTail(self._proc.stderr, self.settings.model_dir)
        threading.Thread(target=self._watch, name="script-exit", daemon=True).start()

    def _watch(self) -> None:
        assert self._proc is not None
        code = self._proc.wait()
        if self._stderr is not None:  # its traceback read before the exit is told
            self._stderr.join(timeout=10.0)
        with self._cv:
            self._exit_code = code
            self._cv.notify_all()

    def wait_for_exit(self) -> int:
        with self._cv:
            self._cv.wait_for(lambda: self._exit_code is not None)
            assert self._exit_code is not None
            return self._exit_code

    def kill(self) -> None:
        """SIGKILLs the script; for a string entrypoint also what its shell started (a pipeline's
        commands), which would otherwise live on until the agent ends the harness's process group."""
        if self._proc is None or self._proc.poll() is not None:
            return
        if self.settings.shell:
            kill_with_descendants(self._proc)
        else:
            self._proc.kill()

    def _check_exit(self) -> None:
        """Raises when the script failed (caller holds the lock). An early exit it reported is no
        failure: each result carries it, and the trial ends COMPLETED."""
        code = self._exit_code
        if code is None:
            return
        if code != 0:
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            died_of = self._stderr.exception_line() if self._stderr is not None else ""
            how += f": {died_of}" if died_of else ""
            raise ScriptFailed(f"the entrypoint {self.shown!r} {how}", exit_code=code)

    # --- workloads (the chief's harness) ----------------------------------------------------

    def run_workload(self, workload: common_pb2.Workload) -> common_pb2.WorkloadResult:
        result = common_pb2.WorkloadResult()
        result.workload.CopyFrom(workload)
        target = workload.total_batches
        with self._cv:
            if workload.kind == KIND.WORKLOAD_KIND_RUN_STEP:
                self._wait_for_step_end(target)
                self._check_exit()
                result.script_progress = min(self.progress, target)
                result.script_finished = (
                    self._exit_code == 0 and self.progress < target and self._early_exit is None
                )
                self._new_checkpoint = False
            elif workload.kind == KIND.WORKLOAD_KIND_COMPUTE_VALIDATION_METRICS:
                self._cv.wait_for(
                    lambda: self._validation_at(target) is not None or self._exit_code is not None
                )
                self._check_exit()
                found = self._validation_at(target)
                if found is None and self._heard():
                    found = self._heard()[-1]  # the script ended before the target
                if found is None and self._early_exit is None:
                    self._ended_without_metrics()
                result.metrics.CopyFrom(to_struct(found[1] if found else {}))
            elif workload.kind == KIND.WORKLOAD_KIND_CHECKPOINT_MODEL:
                # The trial stops: the script checkpoints on should_preempt() and exits.
                self._preempt = True
                self._cv.wait_for(lambda: self._exit_code is not None)
                self._check_exit()
            else:
                raise ValueError(f"workload of unknown kind {workload.kind} ({KIND.Name(workload.kind)})")
            result.script_reports.extend(self._reports)
            self._reports.clear()
            self._reports_since = None
            if self._early_exit is not None:
                result.early_exit = self._early_exit
        return result

    def _wait_for_step_end(self, target: int) -> None:
        """Until the script reaches `target`, stores a checkpoint or exits, or its oldest unsent report
        has waited REPORT_FLUSH_SECONDS: users (and a cancel they send) see its metrics as it makes
        them, as Determined's master does, not only when a long step ends. Caller holds the lock."""
        while not (self.progress >= target or self._new_checkpoint or self._exit_code is not None):
            if self._reports_since is None:
                self._cv.wait()
                continue
            left = self._reports_since + REPORT_FLUSH_SECONDS - time.monotonic()
            if left <= 0:
                return
            self._cv.wait(left)

    def _ended_without_metrics(self) -> None:
        """The script exited 0 before its target having reported nothing the searcher hears (an
        unmodified training script, Determined's Core API tutorial stage 0; or its later stages,
        which report `test_loss` under `metric: val_loss`): that is no failure. As Determined's
        master does with a trial whose processes exit 0 on their own, the trial ends as one that
        stopped itself (COMPLETED; the searcher hears USER_REQUESTED_STOP). Caller holds the lock."""
        self._early_exit = common_pb2.EarlyExitReason.EARLY_EXIT_REASON_USER_REQUESTED_STOP
        reported = sorted({name for _, metrics in self._validations for name in metrics})
        self._log.info(
            f"the entrypoint exited before reaching the searcher's length, having reported no "
            f"validation metrics with searcher.metric {self.settings.searcher_metric!r} (it reported: "
            f"{', '.join(reported) or 'none'}): the trial completes as one that stopped itself "
            "(USER_REQUESTED_STOP)"
        )

    def _heard(self) -> list[tuple[int, dict[str, Any]]]:
        """The validations that answer the searcher. Under a searcher with a length (Determined's
        operations) Determined's searcher hears only `op.report_completed`: a validation lacking
        searcher.metric is recorded and shown, and answers nothing (a script that never reports
        the metric runs to its own end, then stops itself)."""
        name, legacy = self.settings.searcher_metric, bool(self.settings.operation_lengths)
        return [v for v in self._validations if not legacy or name in v[1]]

    def _validation_at(self, target: int) -> tuple[int, dict[str, Any]] | None:
        return next((v for v in self._heard() if v[0] >= target), None)

    def close(self) -> None:
        """TERMINATE: the script stops on should_preempt(); an error it exits with fails the trial."""
        with self._cv:
            self._preempt = True
            self._cv.notify_all()
            self._cv.wait_for(lambda: self._exit_code is not None)
            self._check_exit()

    # --- the Core API, as the server calls it -----------------------------------------------

    def _chief_only(self, what: str) -> None:
        if not self.settings.chief:
            raise ScriptFailed(f"{what} may only be called on the chief (rank 0)")

    def report(self, group: str, steps_completed: int, metrics: dict[str, Any]) -> None:
        self._chief_only(f"report_metrics({group!r})")
        try:
            check_group(group)
        except ValueError as e:
            raise ScriptFailed(f"report_metrics: {e}") from None
        report = common_pb2.ScriptReport(steps_completed=steps_completed)
        report.metrics.CopyFrom(to_struct(metrics))
        with self._cv:
            if group not in BUILTIN_GROUPS:  # a custom group: charted, steers nothing
                report.kind, report.group = REPORT.SCRIPT_REPORT_KIND_GROUP, group
            elif group == "training":
                report.kind = REPORT.SCRIPT_REPORT_KIND_TRAINING
                if not self.settings.time_metric:
                    self.progress = max(self.progress, steps_completed)
            else:
                report.kind = REPORT.SCRIPT_REPORT_KIND_VALIDATION
                reached = self._validation_progress(steps_completed, metrics)
                self.progress = max(self.progress, reached)
                self._validations.append((reached, metrics))
                del self._validations[:-64]
            self._reports.append(report)
            if self._reports_since is None:
                self._reports_since = time.monotonic()
            self._cv.notify_all()

    def _validation_progress(self, steps_completed: int, metrics: dict[str, Any]) -> int:
        name = self.settings.time_metric
        if not name:
            return steps_completed
        value = metrics.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ScriptFailed(
                f"report_validation_metrics: searcher.time_metric {name!r} must be among the validation "
                f"metrics as a number (ASHA measures the trial's progress by it); got {sorted(metrics)}"
            )
        return int(value)

    def report_progress(self, progress: float) -> None:
        self._log.info("script progress", percent=round(progress * 100, 1))

    def early_exit(self, reason: str) -> None:
        """`report_early_exit`: the trial ends COMPLETED once the script exits (checkpointed first if
        it trained past its last checkpoint), and the searcher hears it exited early. The first
        reason stands, as in Determined."""
        self._chief_only("report_early_exit")
        value = EARLY_EXIT_REASONS.get(reason)
        if value is None:
            raise ScriptFailed(
                f"report_early_exit: unknown reason {reason!r}; "
                f"Determined's are {', '.join(EARLY_EXIT_REASONS)}"
            )
        self._log.info("the script reported an early exit", reason=reason)
        with self._cv:
            if self._early_exit is None:
                self._early_exit = value
            self._cv.notify_all()

    def should_preempt(self) -> bool:
        self._chief_only("should_preempt")
        with self._cv:
            return self._preempt

    def request_preemption(self) -> None:
        """SIGTERM to the harness: ask the script to stop (the agent kills it after its grace period)."""
        with self._cv:
            self._preempt = True
            self._cv.notify_all()

    def checkpoint_begin(self) -> dict[str, str]:
        self._chief_only("checkpoint.store_path")
        storage_id = str(uuidlib.uuid4())
        path = self._work_dir / "checkpoints" / storage_id
        path.mkdir(parents=True)
        return {"storage_id": storage_id, "path": str(path)}

    def checkpoint_abort(self, storage_id: str, path: str) -> None:
        shutil.rmtree(self._staged(storage_id, path), ignore_errors=True)

    def checkpoint_commit(self, storage_id: str, path: str, metadata: dict[str, Any]) -> str:
        self._chief_only("checkpoint.store_path")
        directory = self._staged(storage_id, path)
        with self._cv:
            progress = self.progress
        meta = {"steps_completed": progress, **metadata}
        text = json.dumps(meta, sort_keys=True)
        write_metadata(directory, meta)  # over a framework's own (pedl's PyTorch Trainer), keeping it
        try:
            stored = self._checkpoints.store(
                directory, progress, uuid=storage_id, extra_metadata={CORE_METADATA_KEY: text}
            )
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        report = common_pb2.ScriptReport(kind=REPORT.SCRIPT_REPORT_KIND_CHECKPOINT, steps_completed=progress)
        report.checkpoint.CopyFrom(stored)
        with self._cv:
            self._reports.append(report)
            self._new_checkpoint = True
            self._cv.notify_all()
        self._log.info("checkpoint stored", uuid=stored.uuid, progress=progress)
        return stored.uuid

    def _staged(self, storage_id: str, path: str) -> Path:
        expected = self._work_dir / "checkpoints" / storage_id
        if Path(path) != expected or not expected.is_dir():
            raise ScriptFailed(f"no checkpoint {storage_id} is being written at {path}")
        return expected

    def checkpoint_upload(self, source: str, metadata: dict[str, Any]) -> str:
        begun = self.checkpoint_begin()
        shutil.copytree(source, begun["path"], dirs_exist_ok=True)
        return self.checkpoint_commit(begun["storage_id"], begun["path"], metadata)

    def checkpoint_download(self, storage_id: str, dest: str) -> None:
        self._checkpoints.fetch(storage_id, Path(dest))

    def checkpoint_metadata(self, storage_id: str) -> dict[str, Any]:
        record = self._checkpoints.get(storage_id)
        stored = record.metadata.get(CORE_METADATA_KEY)
        return json.loads(stored) if stored else dict(record.metadata)

    def checkpoint_delete(self, storage_id: str) -> None:
        raise ScriptFailed(
            "checkpoint.delete: a trial's checkpoints are deleted by the experiment's checkpoint GC "
            "(save_trial_latest, save_trial_best, save_experiment_best) or `pedl checkpoint delete`"
        )

    def next_operation(self) -> int | None:
        self._chief_only("searcher.operations")
        lengths = self.settings.operation_lengths
        if not lengths:
            raise ScriptFailed(
                "searcher.operations() needs a searcher with a length (searcher.max_length); with none, "
                "the script trains until it decides it is done, reporting validation metrics, and stops "
                "when core_context.preempt.should_preempt() says so"
            )
        with self._cv:
            if self._operation_open:
                raise ScriptFailed("searcher.operations: the previous operation was not completed")
            remaining = [n for n in lengths if n > self.progress]
            if self._operation >= len(lengths) or not remaining:
                return None
            self._operation_open = True
            return remaining[0]

    def operation_progress(self, length: float) -> None:
        with self._cv:
            if not self.settings.time_metric:
                self.progress = max(self.progress, int(length))
            self._cv.notify_all()

    def operation_completed(self, length: int, searcher_metric: float) -> None:
        with self._cv:
            self.progress = max(self.progress, length)
            self._validations.append((length, {self.settings.searcher_metric: searcher_metric}))
            self._operation_open = False
            self._operation += 1
            self._cv.notify_all()

    def configured_units(self) -> str | None:
        return self.settings.configured_unit if self.settings.operation_lengths else None

    def acknowledge_preemption(self) -> None:
        self._log.info("the script acknowledged the preemption signal")


# What `determined.core.EarlyExitReason` values send, and the reason each stands for.
EARLY_EXIT_REASONS = {
    "EXITED_REASON_INVALID_HP": common_pb2.EarlyExitReason.EARLY_EXIT_REASON_INVALID_HP,
    "EXITED_REASON_USER_REQUESTED_STOP": common_pb2.EarlyExitReason.EARLY_EXIT_REASON_USER_REQUESTED_STOP,
}

# The store's metadata map holds strings: the script's metadata goes in as JSON under this key.
CORE_METADATA_KEY = "core_api_metadata"

Handler = Callable[..., Any]


def handlers(trial: CoreApiTrial) -> dict[str, Handler]:
    """The Core API calls a script may make, by name (what `determined.core` sends)."""
    return {
        "report": trial.report,
        "progress": trial.report_progress,
        "early_exit": trial.early_exit,
        "should_preempt": trial.should_preempt,
        "acknowledge_preemption": trial.acknowledge_preemption,
        "checkpoint_begin": trial.checkpoint_begin,
        "checkpoint_commit": trial.checkpoint_commit,
        "checkpoint_abort": trial.checkpoint_abort,
        "checkpoint_upload": trial.checkpoint_upload,
        "checkpoint_download": trial.checkpoint_download,
        "checkpoint_metadata": trial.checkpoint_metadata,
        "checkpoint_delete": trial.checkpoint_delete,
        "next_operation": trial.next_operation,
        "operation_progress": trial.operation_progress,
        "operation_completed": trial.operation_completed,
        "configured_units": trial.configured_units,
    }
