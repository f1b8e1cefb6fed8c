"""Running a whole experiment in this process, without a cluster.

The searcher, the workload sequencer and the harness's `run_workload` are the cluster's
own; this module only plays the scheduler's part for one machine: trials run one
workload at a time, in creation order.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from pedl import _trial_context, records
from pedl._metrics import from_struct
from pedl.config import ExperimentConfig, carried, env_vars
from pedl.experimental._local_checkpoints import LocalCheckpoints
from pedl.harness.build import build_controller, seed_all
from pedl.harness.controller import TrialController
from pedl.harness.epoch import epoch_length
from pedl.harness.workloads import run_workload
from pedl.model_def import ModelDefinition
from pedl.searcher import (
    Close,
    Create,
    Operation,
    Resume,
    Shutdown,
    ValidateAfter,
    is_better,
    make_search_method,
    searcher_metric,
)
from pedl.sequencer import Kind, TrialSequencer
from pedl.v1 import common_pb2

WORKLOAD_KINDS = {kind: common_pb2.WorkloadKind.Value(f"WORKLOAD_KIND_{kind.value}") for kind in Kind}


@dataclass
class LocalTrialResult:
    trial_id: int
    hparams: dict[str, Any]
    state: str = "ACTIVE"
    steps: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    validations: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    checkpoints: list[str] = field(default_factory=list)
    best_validation: float | None = None
    # Why the trial's own code ended it early (INVALID_HP, USER_REQUESTED_STOP), if it did.
    early_exit: str | None = None


@dataclass
class LocalExperimentResult:
    state: str
    trials: list[LocalTrialResult]
    checkpoint_dir: Path

    def best_trial(self, smaller_is_better: bool = True) -> LocalTrialResult | None:
        scored = [t for t in self.trials if t.best_validation is not None]
        if not scored:
            return None
        pick = min if smaller_is_better else max
        return pick(scored, key=lambda t: cast(float, t.best_validation))  # `scored` holds no None


@dataclass
class _Trial:
    result: LocalTrialResult
    request_id: str
    seed: int
    sequencer: TrialSequencer
    checkpoints: LocalCheckpoints
    controller: TrialController | None = None
    # The checkpoint a resumed trial's next controller loads (an ASHA promotion), else "".
    resume_from: str = ""


def local_refusal(config: ExperimentConfig) -> str | None:
    """Why the config cannot run locally (a field that needs a cluster), or None."""
    searcher = config.searcher
    for name, value in (
        ("source_checkpoint_uuid", searcher.source_checkpoint_uuid),
        ("source_trial_id", searcher.source_trial_id),
    ):
        if value is not None:
            return (
                f"searcher.{name}: a warm start reads the checkpoint from a cluster's store, so it runs "
                "only on a cluster (pedl experiment create); locally, load the weights in your Trial"
            )
    return None


def run_local(
    config: ExperimentConfig,
    model_def: ModelDefinition,
    *,
    seed: int = 0,
    checkpoint_dir: Path | None = None,
    verify_restore: bool = False,
    on_event: Any = None,
) -> LocalExperimentResult:
    """Runs every trial of the config's searcher here; user errors propagate with their traceback.

    With `verify_restore`, each checkpoint is loaded back into a fresh trial, which must
    then report the same validation metrics (the test mode's promise).
    """
    refusal = local_refusal(config)
    if refusal is not None:
        raise ValueError(refusal)
    # As the scheduler stores it and its harnesses load it: a local trial gets what a cluster's gets.
    config = carried.carried(config)
    root = checkpoint_dir or Path(tempfile.mkdtemp(prefix="pedl-local-"))
    runner = _LocalRunner(config, model_def, root, verify_restore, on_event or (lambda _: None))
    searcher = make_search_method(
        config, config.experiment_seed if config.experiment_seed is not None else seed
    )
    runner.searcher = searcher
    runner.apply(searcher.initial_operations())
    # As on an agent, the trial's code sees environment.environment_variables (local trials use the CPU).
    with env_vars.applied(config.environment, gpu=False):
        runner.run()
    return LocalExperimentResult(runner.state, [t.result for t in runner.trials.values()], root)


class _LocalRunner:
    def __init__(
        self,
        config: ExperimentConfig,
        model_def: ModelDefinition,
        root: Path,
        verify_restore: bool,
        on_event: Any,
    ) -> None:
        self.config = config
        self.model_def = model_def
        self.root = root
        self.verify_restore = verify_restore
        self.on_event = on_event
        self.trials: dict[str, _Trial] = {}
        self.searcher: Any = None
        self.done = False
        self.failed = False
        self._best_validation: float | None = None  # of all trials (checkpoint_policy: best)

    @property
    def state(self) -> str:
        return "ERROR" if self.failed else "COMPLETED"

    def apply(self, ops: list[Operation]) -> None:
        pending = list(ops)
        while pending:
            op = pending.pop(0)
            if isinstance(op, Create):
                trial_id = len(self.trials) + 1
                self.trials[op.request_id] = _Trial(
                    LocalTrialResult(trial_id, op.hparams),
                    op.request_id,
                    op.seed,
                    TrialSequencer.for_config(self.config, op.hparams),
                    LocalCheckpoints(self.root / f"trial-{trial_id}", trial_id),
                )
                pending.extend(self.searcher.on_trial_created(op.request_id))
            elif isinstance(op, Resume):
                self._resume(self.trials[op.request_id])
            elif isinstance(op, ValidateAfter):
                self.trials[op.request_id].sequencer.add_target(op.length)
            elif isinstance(op, Close):
                self.trials[op.request_id].sequencer.close()
            elif isinstance(op, Shutdown):
                self.done = True
                self.failed = self.failed or op.failure

    def run(self) -> None:
        while True:
            for t in self.trials.values():
                if t.result.state == "ACTIVE" and t.sequencer.awaits_epoch_length:
                    # As a harness does at a trial's start: measure the epoch before any workload.
                    t.sequencer.learn_epoch_length(epoch_length(self._controller(t)))
            ready = [
                t
                for t in self.trials.values()
                if t.result.state == "ACTIVE" and t.sequencer.next_workload() is not None
            ]
            if not ready:
                return
            self._run_next(ready[0])

    def _resume(self, trial: _Trial) -> None:
        """The searcher promotes a trial it had closed: it goes on from its latest checkpoint."""
        sequencer = trial.sequencer
        trial.resume_from = trial.result.checkpoints[-1] if trial.result.checkpoints else ""
        batches = sequencer.last_checkpoint if trial.resume_from else 0
        sequencer.reopen(batches, sequencer.step_id if trial.resume_from else 0)
        trial.result.state = "ACTIVE"

    def _controller(self, trial: _Trial) -> TrialController:
        _trial_context.set_hyperparameters(trial.result.hparams)
        if trial.controller is None:
            seed_all(trial.seed)
            trial.controller = build_controller(self.model_def, self.config.raw, trial.result.hparams)
            if trial.resume_from:
                trial.controller.load(trial.checkpoints.path(trial.resume_from))
                trial.resume_from = ""
        return trial.controller

    def _run_next(self, trial: _Trial) -> None:
        nxt = trial.sequencer.next_workload()
        assert nxt is not None
        result = trial.result
        if nxt.kind is Kind.TERMINATE:
            trial.sequencer.on_terminate_sent()
            trial.controller = None
            result.state = "COMPLETED"
            self.on_event(("trial_completed", result))
            if trial.sequencer.exited_early:  # its code ended it: the searcher hears so, as on a cluster
                result.early_exit = trial.sequencer.early_exit
                self.apply(self.searcher.on_trial_exited_early(trial.request_id, trial.sequencer.early_exit))
            else:
                self.apply(self.searcher.on_trial_closed(trial.request_id))
            return
        workload = common_pb2.Workload(
            kind=WORKLOAD_KINDS[nxt.kind],
            trial_id=result.trial_id,
            step_id=nxt.step_id,
            total_batches=nxt.total_batches,
        )
        controller = self._controller(trial)
        outcome = run_workload(controller, workload, trial.checkpoints)
        metrics = from_struct(outcome.metrics)
        if outcome.early_exit:
            trial.sequencer.exit_early(records.early_exit_reason(outcome.early_exit) or "")
        if nxt.kind is Kind.RUN_STEP:
            trial.sequencer.on_step_completed(nxt.step_id, nxt.total_batches)
            result.steps.append((nxt.total_batches, metrics))
            self.on_event(("step", result, nxt.total_batches, metrics))
        elif nxt.kind is Kind.COMPUTE_VALIDATION_METRICS:
            self._on_validation(trial, nxt.total_batches, metrics)
        else:
            trial.sequencer.on_checkpoint_completed(nxt.total_batches)
            result.checkpoints.append(outcome.checkpoint.uuid)
            self.on_event(("checkpoint", result, nxt.total_batches, outcome.checkpoint.uuid))
            if self.verify_restore:
                self._verify_restore(trial, outcome.checkpoint.uuid)

    def _on_validation(self, trial: _Trial, total_batches: int, metrics: dict[str, Any]) -> None:
        result = trial.result
        value = searcher_metric(metrics, self.config.searcher_metric)
        result.validations.append((total_batches, metrics))
        if is_better(value, result.best_validation, self.config.smaller_is_better):
            result.best_validation = value
        best = is_better(value, self._best_validation, self.config.smaller_is_better)
        if best:
            self._best_validation = value
        self.on_event(("validation", result, total_batches, metrics))
        if trial.sequencer.on_validation_completed(total_batches, best=best):
            length = trial.sequencer.answered_length
            self.apply(self.searcher.on_validation_completed(trial.request_id, value, length))

    def _verify_restore(self, trial: _Trial, uuid: str) -> None:
        """Loads the checkpoint into a fresh trial, which must validate exactly as the original."""
        original = self._controller(trial).validate()
        seed_all(trial.seed)
        fresh = build_controller(self.model_def, self.config.raw, trial.result.hparams)
        fresh.load(trial.checkpoints.path(uuid))
        restored = fresh.validate()
        if restored != original:
            raise AssertionError(
                f"trial {trial.result.trial_id}: restoring checkpoint {uuid} changed the validation metrics "
                f"from {original} to {restored}; save()/load() miss some state"
            )
        self.on_event(("restored", trial.result, uuid))
