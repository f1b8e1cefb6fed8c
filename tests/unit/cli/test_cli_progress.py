"""--follow prints each step, validation, checkpoint and state change exactly once, in order."""

from __future__ import annotations

from pedl.cli import progress
from pedl.v1 import common_pb2, scheduler_pb2

from .fake_scheduler import step, trial, validation

ACTIVE, COMPLETED, ERROR = (
    common_pb2.TRIAL_STATE_ACTIVE,
    common_pb2.TRIAL_STATE_COMPLETED,
    common_pb2.TRIAL_STATE_ERROR,
)


def test_lines() -> None:
    assert (
        progress.step_line(3, step(2, 200, 0.5, acc=0.9))
        == "Trial 3 step 2: batches 200 (+100) loss=0.5 acc=0.9"
    )
    assert progress.validation_line(3, validation(2, 200, val_loss=0.25)) == (
        "Trial 3 validation at batches 200: val_loss=0.25"
    )
    ckpt = common_pb2.Checkpoint(uuid="u1", total_batches=200, files=[common_pb2.FileInfo(path="a", size=10)])
    assert progress.checkpoint_line(3, ckpt) == "Trial 3 checkpoint u1 at batches 200 (1 files, 10 B)"


def test_tracker_reports_only_new_events() -> None:
    tracker = progress.ProgressTracker()
    first = scheduler_pb2.GetTrialResponse(trial=trial(3), steps=[step(1, 100, 0.75)])
    assert tracker.update(first) == [
        "Trial 3 ACTIVE: layers=2, lr=0.1",
        "Trial 3 step 1: batches 100 (+100) loss=0.75",
    ]
    assert tracker.update(first) == []
    second = scheduler_pb2.GetTrialResponse(
        trial=trial(3, state=COMPLETED, total_batches=200),
        steps=[step(1, 100, 0.75), step(2, 200, 0.5)],
        validations=[validation(2, 200, val_loss=0.4)],
        checkpoints=[common_pb2.Checkpoint(uuid="u1", total_batches=200)],
    )
    assert tracker.needs_fetch(second.trial)
    assert tracker.update(second) == [
        "Trial 3 step 2: batches 200 (+100) loss=0.5",
        "Trial 3 validation at batches 200: val_loss=0.4",
        "Trial 3 checkpoint u1 at batches 200 (0 files, 0 B)",
        "Trial 3 ACTIVE -> COMPLETED after 200 batches",
    ]
    assert not tracker.needs_fetch(second.trial)


def test_tracker_reports_restarts() -> None:
    tracker = progress.ProgressTracker()
    tracker.update(scheduler_pb2.GetTrialResponse(trial=trial(3)))
    assert tracker.update(scheduler_pb2.GetTrialResponse(trial=trial(3, restarts=1, run_id=2))) == [
        "Trial 3 restarted (restart 1, run 2)"
    ]


def test_error_lines_include_each_failed_trial() -> None:
    response = scheduler_pb2.GetExperimentResponse(
        experiment=scheduler_pb2.Experiment(
            id=7, state=common_pb2.EXPERIMENT_STATE_ERROR, error="too many errors"
        ),
        trials=[trial(4, state=ERROR, error="Traceback:\n  boom\nValueError: x"), trial(3, state=COMPLETED)],
    )
    assert progress.final_line(response.experiment) == "Experiment 7 ERROR"
    assert progress.error_lines(response) == [
        "Experiment 7 error: too many errors",
        "Trial 4 error: Traceback:",
        "      boom",
        "    ValueError: x",
    ]
