"""The harness reads Determined's `context.set_stop_requested(True)` from any Trial API's context
(PyTorch, Keras, Estimator all inherit it from determined's TrialContext) after each workload, and
says so in the result; the scheduler then checkpoints the trial and ends it (test_early_exit.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pedl.harness.compat import ensure_determined_importable
from pedl.harness.controller import StepResult
from pedl.harness.workloads import run_workload
from pedl.v1 import common_pb2

ensure_determined_importable()

from determined._trial_context import TrialContext  # noqa: E402

KIND = common_pb2.WorkloadKind


class Trial:
    def __init__(self) -> None:
        self.context = TrialContext({}, {})


class Controller:
    """Stands for any framework's controller: it holds the user's trial as `trial`."""

    def __init__(self) -> None:
        self.trial = Trial()
        self.batches_trained = 0

    def train_until(self, total_batches: int) -> StepResult:
        if total_batches >= 20:
            self.trial.context.set_stop_requested(True)  # as train_batch would, mid-step
        self.batches_trained = total_batches
        return StepResult({"loss": 1.0}, num_batches=10)

    def validate(self) -> dict[str, Any]:
        return {"error": 0.5}

    def save(self, path: Path) -> None: ...

    def load(self, path: Path) -> None: ...

    def warm_start(self, path: Path) -> None: ...


def step(total: int) -> common_pb2.Workload:
    return common_pb2.Workload(
        kind=KIND.WORKLOAD_KIND_RUN_STEP, trial_id=1, run_id=1, step_id=1, total_batches=total
    )


def test_the_step_in_which_the_trial_asked_to_stop_says_so_and_later_results_too() -> None:
    controller = Controller()
    assert run_workload(controller, step(10), checkpoints=None).early_exit == 0  # type: ignore[arg-type]
    stopped = run_workload(controller, step(20), checkpoints=None)  # type: ignore[arg-type]
    assert stopped.early_exit == common_pb2.EarlyExitReason.EARLY_EXIT_REASON_USER_REQUESTED_STOP
    validation = common_pb2.Workload(kind=KIND.WORKLOAD_KIND_COMPUTE_VALIDATION_METRICS, total_batches=20)
    assert run_workload(controller, validation, checkpoints=None).early_exit != 0  # type: ignore[arg-type]


def test_a_controller_without_a_determined_context_never_stops_early() -> None:
    class Plain(Controller):
        def __init__(self) -> None:
            super().__init__()
            self.trial = object()  # type: ignore[assignment]

        def train_until(self, total_batches: int) -> StepResult:
            return StepResult({"loss": 1.0}, num_batches=10)

    assert run_workload(Plain(), step(20), checkpoints=None).early_exit == 0  # type: ignore[arg-type]
