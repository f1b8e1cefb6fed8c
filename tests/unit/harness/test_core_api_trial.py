"""A Core API script under the harness: its reports answer the scheduler's workloads, and a stop
reaches it through should_preempt(). A real child process and socket; no agent."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from core_api_rig import start_script

from pedl._metrics import from_struct
from pedl.harness.core_api_trial import (
    CoreApiTrial,
    ScriptFailed,
    ScriptSettings,
)
from pedl.v1 import common_pb2

KIND = common_pb2.WorkloadKind
REPORT = common_pb2.ScriptReportKind

SCRIPT = """
import determined as det
with det.core.init() as core:
    steps = 0
    while True:
        steps += 5
        core.train.report_training_metrics(steps_completed=steps, metrics={"loss": 1.0 / steps})
        if steps % 10 == 0:
            core.train.report_validation_metrics(steps_completed=steps, metrics={"x": steps, "t": steps * 2})
        if core.preempt.should_preempt() or steps >= LIMIT:
            break
print("stopped at", steps)
"""


def start(
    tmp_path: Path,
    limit: int,
    time_metric: str | None = None,
    command: list[str] | None = None,
    model_exists: bool = False,
    searcher_metric: str = "x",
    operation_lengths: tuple[int, ...] = (),
    script: str = SCRIPT,
):
    (tmp_path / "model").mkdir(exist_ok=model_exists)
    (tmp_path / "model" / "train.py").write_text(script.replace("LIMIT", str(limit)))
    settings = ScriptSettings(
        command=command or [sys.executable, "train.py"],
        model_dir=tmp_path / "model",
        chief=True,
        searcher_metric=searcher_metric,
        time_metric=time_metric,
        operation_lengths=list(operation_lengths),
    )
    return start_script(tmp_path, settings)


def workload(kind: int, total: int) -> common_pb2.Workload:
    return common_pb2.Workload(kind=kind, trial_id=1, run_id=1, step_id=1, total_batches=total)


def test_steps_validations_and_a_stop_map_onto_the_script(tmp_path) -> None:
    trial, server = start(tmp_path, limit=10**6)
    try:
        step = trial.run_workload(workload(KIND.WORKLOAD_KIND_RUN_STEP, 20))
        assert step.script_progress == 20 and not step.script_finished
        training = [r for r in step.script_reports if r.kind == REPORT.SCRIPT_REPORT_KIND_TRAINING]
        assert [r.steps_completed for r in training][:4] == [5, 10, 15, 20]
        validation = trial.run_workload(workload(KIND.WORKLOAD_KIND_COMPUTE_VALIDATION_METRICS, 20))
        assert from_struct(validation.metrics)["x"] == 20
        trial.run_workload(workload(KIND.WORKLOAD_KIND_CHECKPOINT_MODEL, 20))  # stop: the script exits
        assert trial.wait_for_exit() == 0
        trial.close()
    finally:
        trial.kill()
        server.close()


def test_a_custom_metric_group_is_reported_by_its_name_beside_training(tmp_path) -> None:
    """Determined 0.38's `core.train.report_metrics(group="abc", ...)`: relayed as its group's report,
    steering neither progress nor the searcher."""
    custom = SCRIPT.replace(
        "        if steps % 10 == 0:",
        '        core.train.report_metrics("abc", steps_completed=steps, metrics={"lossx": 3.3})\n'
        "        if steps % 10 == 0:",
    )
    trial, server = start(tmp_path, limit=10, script=custom)
    try:
        step = trial.run_workload(workload(KIND.WORKLOAD_KIND_RUN_STEP, 10))
        groups = [r for r in step.script_reports if r.kind == REPORT.SCRIPT_REPORT_KIND_GROUP]
        # The step ends once training reaches 10, before the script's report of abc at 10.
        assert [(r.group, r.steps_completed, from_struct(r.metrics)) for r in groups][:1] == [
            ("abc", 5, {"lossx": 3.3})
        ]
        assert step.script_progress == 10
    finally:
        trial.kill()
        server.close()


def test_a_script_that_ends_on_its_own_finishes_the_step(tmp_path) -> None:
    trial, server = start(tmp_path, limit=15)
    try:
        step = trial.run_workload(workload(KIND.WORKLOAD_KIND_RUN_STEP, 100))
        assert step.script_finished and step.script_progress == 15
    finally:
        trial.kill()
        server.close()


def test_a_time_metric_measures_progress_by_the_validation_metric(tmp_path) -> None:
    trial, server = start(tmp_path, limit=10**6, time_metric="t")
    try:
        step = trial.run_workload(workload(KIND.WORKLOAD_KIND_RUN_STEP, 40))  # t = 2 * steps
        assert step.script_progress == 40
        steps = [
            r.steps_completed for r in step.script_reports if r.kind == REPORT.SCRIPT_REPORT_KIND_VALIDATION
        ]
        assert steps[-1] >= 20
        trial.close()
    finally:
        trial.kill()
        server.close()


def test_a_failing_script_fails_the_workload_with_its_exit_code(tmp_path) -> None:
    trial, server = start(tmp_path, limit=1, command=[sys.executable, "-c", "raise SystemExit(3)"])
    try:
        with pytest.raises(ScriptFailed, match="exited with code 3"):
            trial.run_workload(workload(KIND.WORKLOAD_KIND_RUN_STEP, 10))
    finally:
        server.close()


def test_a_script_dying_of_an_exception_names_it_and_its_line_and_its_traceback_still_shows(
    tmp_path, capfd
) -> None:
    # The published 0.20 Core API tutorial's adaptive stage, in short: a helper lacking its import.
    script = "def load_state(d):\n    return pathlib.Path(d)\n\nprint('training')\nload_state('x')\n"
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "model_def.py").write_text(script)
    trial, server = start(tmp_path, limit=1, command=[sys.executable, "model_def.py"], model_exists=True)
    try:
        with pytest.raises(ScriptFailed) as failed:
            trial.run_workload(workload(KIND.WORKLOAD_KIND_RUN_STEP, 10))
        assert str(failed.value) == (
            f"the entrypoint '{sys.executable} model_def.py' exited with code 1: "
            "NameError: name 'pathlib' is not defined (at model_def.py:2)"
        )
        assert "Traceback (most recent call last)" in capfd.readouterr().err
    finally:
        server.close()


def test_a_script_exiting_without_a_traceback_is_named_by_its_exit_code_alone(tmp_path) -> None:
    code = "import sys; sys.stderr.write('ValueError: not a traceback\\n'); sys.exit(4)"
    command = [sys.executable, "-c", code]
    trial, server = start(tmp_path, limit=1, command=command)
    try:
        with pytest.raises(ScriptFailed) as failed:
            trial.run_workload(workload(KIND.WORKLOAD_KIND_RUN_STEP, 10))
        assert str(failed.value).endswith("exited with code 4")
    finally:
        server.close()


def test_searcher_operations_without_a_length_are_refused_with_the_way_to_go(tmp_path) -> None:
    trial, server = start(tmp_path, limit=5)
    try:
        status, message = server.answer("next_operation", {})
        assert status == "error" and "searcher.max_length" in message and "should_preempt" in message
        assert server.answer("report", {"group": "a.b", "steps_completed": 1, "metrics": {}})[0] == "error"
        assert server.answer("no_such_call", {}) == ("error", "unknown Core API call 'no_such_call'")
    finally:
        trial.kill()
        server.close()


INVALID_HP_SCRIPT = """
import determined as det
with det.core.init() as core:
    core.train.report_training_metrics(steps_completed=5, metrics={"loss": 1.0})
    raise det.InvalidHP("lr is too large")
print("not reached")
"""


def test_a_script_raising_invalid_hp_exits_0_and_its_results_say_it_ended_early(tmp_path) -> None:
    """Determined: `det.InvalidHP` inside `with det.core.init()` reports INVALID_HP and exits 0; the
    trial is no failure, its step ends where the script got to and is not 'finished'."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "bad.py").write_text(INVALID_HP_SCRIPT)
    trial, server = start(tmp_path, limit=1, command=[sys.executable, str(tmp_path / "run" / "bad.py")])
    try:
        step = trial.run_workload(workload(KIND.WORKLOAD_KIND_RUN_STEP, 100))
        assert step.early_exit == common_pb2.EarlyExitReason.EARLY_EXIT_REASON_INVALID_HP
        assert step.script_progress == 5 and not step.script_finished
        assert trial.wait_for_exit() == 0
        stop = trial.run_workload(workload(KIND.WORKLOAD_KIND_CHECKPOINT_MODEL, 5))
        assert stop.early_exit == common_pb2.EarlyExitReason.EARLY_EXIT_REASON_INVALID_HP
        trial.close()  # TERMINATE: no error
    finally:
        trial.kill()
        server.close()


def test_report_early_exit_with_an_unknown_reason_is_refused_naming_the_known_ones(tmp_path) -> None:
    trial, server = start(tmp_path, limit=1, command=[sys.executable, "-c", "pass"])
    try:
        with pytest.raises(ScriptFailed, match="unknown reason 'BORED'.*EXITED_REASON_INVALID_HP"):
            trial.early_exit("BORED")
    finally:
        trial.kill()
        server.close()


def test_a_script_that_exits_having_reported_nothing_ends_itself_instead_of_failing(tmp_path) -> None:
    """Determined's Core API tutorial stage 0 (an unmodified loop under `max_length: 1`): the script
    exits 0 short of its length with no validation to answer the searcher; the trial stops itself
    (USER_REQUESTED_STOP), as Determined's master ends a trial whose processes exit on their own."""
    trial, server = start(tmp_path, limit=1, command=[sys.executable, "-c", "print('x is now 100')"])
    try:
        step = trial.run_workload(workload(KIND.WORKLOAD_KIND_RUN_STEP, 8))
        assert step.script_finished and step.script_progress == 0
        validation = trial.run_workload(workload(KIND.WORKLOAD_KIND_COMPUTE_VALIDATION_METRICS, 0))
        assert from_struct(validation.metrics) == {}
        assert validation.early_exit == common_pb2.EarlyExitReason.EARLY_EXIT_REASON_USER_REQUESTED_STOP
        trial.close()  # TERMINATE: no error
    finally:
        trial.kill()
        server.close()


def test_a_script_that_reported_validations_answers_with_its_last_and_does_not_end_itself(tmp_path) -> None:
    trial, server = start(tmp_path, limit=15)  # validations at 10, exits at 15
    try:
        trial.run_workload(workload(KIND.WORKLOAD_KIND_RUN_STEP, 100))
        validation = trial.run_workload(workload(KIND.WORKLOAD_KIND_COMPUTE_VALIDATION_METRICS, 100))
        assert from_struct(validation.metrics)["x"] == 10
        assert not validation.early_exit
    finally:
        trial.kill()
        server.close()


def test_a_script_reporting_other_metrics_under_a_searcher_length_runs_to_its_end_and_ends_itself(
    tmp_path,
) -> None:
    """Determined 0.20 to 0.34's Core API MNIST tutorial (`metrics`, `checkpoints` stages): `max_length:
    1`, `metric: val_loss`, and a script that reports `test_loss` and never asks the searcher. In
    Determined the searcher hears only `op.report_completed`, so those validations answer nothing:
    the script trains to its own end, exits 0, and the trial stops itself (COMPLETED)."""
    trial, server = start(tmp_path, limit=30, searcher_metric="val_loss", operation_lengths=(1,))
    try:
        step = trial.run_workload(workload(KIND.WORKLOAD_KIND_RUN_STEP, 1))
        assert step.script_progress == 1 and not step.script_finished
        validation = trial.run_workload(workload(KIND.WORKLOAD_KIND_COMPUTE_VALIDATION_METRICS, 1))
        assert from_struct(validation.metrics) == {}
        assert validation.early_exit == common_pb2.EarlyExitReason.EARLY_EXIT_REASON_USER_REQUESTED_STOP
        reports = [*step.script_reports, *validation.script_reports]
        reported = [r.steps_completed for r in reports if r.kind == REPORT.SCRIPT_REPORT_KIND_VALIDATION]
        assert reported == [10, 20, 30]  # each recorded, up to the script's own end
        assert trial.wait_for_exit() == 0
        trial.close()  # TERMINATE: no error
    finally:
        trial.kill()
        server.close()


def test_a_validation_with_the_searcher_metric_still_answers_a_searcher_length(tmp_path) -> None:
    trial, server = start(tmp_path, limit=10**6, operation_lengths=(20,))
    try:
        trial.run_workload(workload(KIND.WORKLOAD_KIND_RUN_STEP, 20))
        validation = trial.run_workload(workload(KIND.WORKLOAD_KIND_COMPUTE_VALIDATION_METRICS, 20))
        assert from_struct(validation.metrics)["x"] == 20 and not validation.early_exit
        trial.close()
    finally:
        trial.kill()
        server.close()


SLOW_SCRIPT = """
import time
import determined as det
with det.core.init() as core:
    core.train.report_training_metrics(steps_completed=1, metrics={"loss": 0.5})
    core.train.report_validation_metrics(steps_completed=1, metrics={"x": 0.5})
    while not core.preempt.should_preempt():
        time.sleep(0.05)
"""


def test_reports_of_a_script_far_from_its_target_are_sent_without_waiting_for_the_step(tmp_path) -> None:
    """A script that reports, then works on for long (a noop trial's sleeps, a slow epoch): its metrics
    reach the scheduler while it runs, not only when it reaches the step's target or exits, so a user
    sees them and a cancel sent on seeing them finds the trial still running."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "train.py").write_text(SLOW_SCRIPT)
    settings = ScriptSettings(
        command=[sys.executable, "train.py"], model_dir=tmp_path / "model", chief=True, searcher_metric="x"
    )
    trial, server = start_script(tmp_path, settings)
    try:
        step = trial.run_workload(workload(KIND.WORKLOAD_KIND_RUN_STEP, 10**6))
        assert step.script_progress == 1 and not step.script_finished
        kinds = [r.kind for r in step.script_reports]
        assert kinds == [REPORT.SCRIPT_REPORT_KIND_TRAINING, REPORT.SCRIPT_REPORT_KIND_VALIDATION]
        trial.run_workload(workload(KIND.WORKLOAD_KIND_CHECKPOINT_MODEL, 1))  # stop: the script exits
        assert trial.wait_for_exit() == 0
    finally:
        trial.kill()
        server.close()


class _Store:
    """Records what a committed checkpoint's directory held when it was stored."""

    def __init__(self) -> None:
        self.metadata: dict[str, Any] = {}

    def store(self, directory: Path, progress: int, uuid: str, extra_metadata: dict[str, str]) -> Any:
        self.metadata = json.loads((directory / "metadata.json").read_text())
        return common_pb2.Checkpoint(uuid=uuid)


def test_a_checkpoint_keeps_the_frameworks_metadata_under_the_core_apis(tmp_path) -> None:
    """pedl's PyTorch Trainer writes metadata.json (framework, format) into the Core API's
    directory; the commit adds steps_completed and the user's metadata without dropping it, so the
    trial can be restored from it (Determined's test_streaming_metrics_api resumes ASHA trials)."""
    settings = ScriptSettings(command=["true"], model_dir=tmp_path / "model", chief=True, searcher_metric="x")
    store = _Store()
    trial = CoreApiTrial(settings, checkpoints=store, work_dir=tmp_path)  # type: ignore[arg-type]
    staged = trial.checkpoint_begin()
    (Path(staged["path"]) / "metadata.json").write_text(json.dumps({"framework": "pytorch", "k": 1}))
    trial.checkpoint_commit(staged["storage_id"], staged["path"], {"k": 2})
    assert store.metadata == {"framework": "pytorch", "k": 2, "steps_completed": 0}
