"""What agents report, taken in: workload results (steps, validations, checkpoints), trial logs and
exits, a batch of them in one unit of work (group commit)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import structlog
from google.protobuf import json_format

from pedl._timeutil import utc_now
from pedl.config import masking
from pedl.searcher import MetricError, is_better, searcher_metric
from pedl.sequencer import Kind
from pedl.v1 import agent_pb2, common_pb2
from pedl_scheduler import metrics as prometheus
from pedl_scheduler.checkpoint_gc import CheckpointRef
from pedl_scheduler.cluster import AgentHandle
from pedl_scheduler.experiments import early_exit, machine, script_results
from pedl_scheduler.experiments.effects import Emit
from pedl_scheduler.experiments.errors import UserError
from pedl_scheduler.experiments.state import SchedulerState
from pedl_scheduler.experiments.unit_of_work import UnitOfWork
from pedl_scheduler.experiments.wire import KIND_NAMES, metrics_json, metrics_plain, retire
from pedl_scheduler.runtime import TrialRuntime
from pedl_scheduler.storage.ops import results as result_ops
from pedl_scheduler.storage.ops import trials as trial_ops

log = structlog.get_logger(component="experiments")


class ResultIntake:
    def __init__(self, state: SchedulerState, work: UnitOfWork, emit: Emit) -> None:
        self.state = state
        self.work = work
        self.emit = emit  # searcher calls, refused results, checkpoints children wait for
        self.db = state.db
        self.experiments = state.experiments
        self.trials = state.trials
        # One commit, one timestamp for the rows it writes (set while a batch is handled).
        self._batch_time: str | None = None
        self._secrets: dict[int, tuple[Any, frozenset[str]]] = {}

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Agent messages that arrived together: the rows they write share one timestamp."""
        self._batch_time = utc_now()
        try:
            yield
        finally:
            self._batch_time = None

    def take(self, agent: AgentHandle, message: agent_pb2.ConnectRequest, kind: str | None) -> None:
        """One agent message of a batch, of `kind` (its oneof; a run's exit is the trial runs room's)."""
        if kind == "workload_completed":
            self._workload_completed(agent, message.workload_completed.result)
        elif kind == "trial_logs":
            self._trial_logs(message.trial_logs)
        elif kind == "epoch_length":
            self._epoch_length(agent, message.epoch_length)

    def on_workload_completed(self, agent: AgentHandle, result: common_pb2.WorkloadResult) -> None:
        """One result alone (`on_agent_messages` handles what arrives together)."""
        with self.work.transaction():
            self._workload_completed(agent, result)
        self.state.notify()

    def _workload_completed(self, agent: AgentHandle, result: common_pb2.WorkloadResult) -> None:
        w = result.workload
        trial = self.state.current_run(agent, w.trial_id, w.run_id)
        if trial is None:
            return
        trial.busy_unknown = False
        trial.infrastructure_failures, trial.waiting_reason = 0, ""  # whatever held it up is over
        retire(trial.outstanding, w)
        kind = KIND_NAMES.get(w.kind)
        now = self._batch_time or utc_now()
        try:
            if result.script_reports:
                script_results.record_reports(self.state, trial, result.script_reports, now)
            if kind is Kind.RUN_STEP:
                self._record_step(trial, w, result, now)
            elif kind is Kind.COMPUTE_VALIDATION_METRICS:
                metrics = metrics_plain(result.metrics)
                if metrics or not result.early_exit:  # a script that exited early may have none
                    self._record_validation(trial, w, metrics, now)
            elif kind is Kind.CHECKPOINT_MODEL:
                self._record_checkpoint(trial, w, result.checkpoint, now)
        except UserError as e:  # raised before the result wrote anything
            exp = self.experiments[trial.experiment_id]
            self.emit(exp, [trial], [machine.ResultsRefused(trial.id, str(e))])
            return
        if result.early_exit and trial.sequencer.exit_early(early_exit.reason_name(result.early_exit)):
            self.work.log_line(trial, early_exit.asked_line(trial.id, result.early_exit))
        self.work.save_trial(trial)
        self.work.dispatch(trial)

    def _epoch_length(self, agent: AgentHandle, message: agent_pb2.EpochLength) -> None:
        """The harness measured the trial's epoch: lengths in epochs now count batches."""
        trial = self.state.current_run(agent, message.trial_id, message.run_id)
        if trial is None or message.batches < 1:
            return
        before = trial.sequencer.epoch_batches
        if before != message.batches:
            was = f" (was {before})" if before else ""
            self.work.log_line(
                trial,
                f"trial {trial.id}: one epoch is {message.batches} batches{was}, its training data "
                "loader's length; the config's lengths in epochs count that",
            )
            trial.sequencer.learn_epoch_length(message.batches)
            self.work.save_trial(trial)
        self.work.dispatch(trial)

    def _record_step(
        self,
        trial: TrialRuntime,
        w: common_pb2.Workload,
        result: common_pb2.WorkloadResult,
        now: str,
    ) -> None:
        if result.HasField("script_progress"):  # a Core API script's: its reports are its steps
            script_results.step_completed(trial, w, result)
            return
        result_ops.record_step(
            self.db,
            trial.id,
            w.step_id,
            w.total_batches,
            result.num_batches,
            metrics_json(result.metrics),
            now,
            run_id=trial.run_id,
        )
        trial.sequencer.on_step_completed(w.step_id, w.total_batches)
        prometheus.step_ingested()

    def _record_validation(
        self, trial: TrialRuntime, w: common_pb2.Workload, metrics: dict[str, Any], now: str
    ) -> None:
        exp = self.experiments[trial.experiment_id]
        try:
            value = searcher_metric(metrics, exp.config.searcher_metric)
        except MetricError as e:
            raise UserError(str(e)) from None
        result_ops.record_validation(
            self.db, trial.id, w.step_id, w.total_batches, json.dumps(metrics), now, run_id=trial.run_id
        )
        prometheus.validation_ingested()
        if exp.gc is not None:
            exp.gc.add_metric(trial.id, w.total_batches, value)
        if is_better(value, trial.best_validation, exp.config.smaller_is_better):
            trial.best_validation = value
        best = is_better(value, exp.best_validation, exp.config.smaller_is_better)
        if best:
            exp.best_validation = value
        if trial.sequencer.on_validation_completed(w.total_batches, best=best):
            ops = exp.journal.call(
                "on_validation_completed", trial.request_id, float(value), trial.sequencer.answered_length
            )
            self.emit(exp, [trial], [machine.SearcherDecided(ops)])

    def _record_checkpoint(
        self, trial: TrialRuntime, w: common_pb2.Workload, ckpt: common_pb2.Checkpoint, now: str
    ) -> None:
        if not ckpt.uuid:  # a Core API script's: it stopped, its checkpoints came as reports
            trial.sequencer.on_checkpoint_completed(w.total_batches)
            return
        result_ops.record_checkpoint(
            self.db, ckpt.uuid, trial.id, w.step_id, w.total_batches, json_format.MessageToJson(ckpt), now
        )
        trial.latest_checkpoint_uuid = ckpt.uuid
        trial.latest_checkpoint_batches = w.total_batches
        trial.latest_checkpoint_step = w.step_id
        self.state.holds_checkpoint(trial)
        exp = self.experiments[trial.experiment_id]
        if exp.gc is not None:
            exp.gc.add_checkpoint(CheckpointRef(ckpt.uuid, trial.id, w.total_batches))
        copyable = trial.sequencer.requested_checkpoint_reached(w.total_batches)
        trial.sequencer.on_checkpoint_completed(w.total_batches)
        prometheus.checkpoint_recorded()
        if copyable:
            self.emit(
                exp, [trial], [machine.CheckpointStored(trial.id, ckpt.uuid, w.total_batches, w.step_id)]
            )

    def _trial_logs(self, message: agent_pb2.TrialLogs) -> None:
        if message.trial_id not in self.trials and not self._trial_exists(message.trial_id):
            return
        secrets = self._secret_values(message.trial_id)
        for line in message.lines:
            result_ops.record_log(
                self.db,
                message.trial_id,
                message.run_id,
                line.timestamp or utc_now(),
                line.source or "stdout",
                masking.mask_values(line.message, secrets) if secrets else line.message,
            )

    def _secret_values(self, trial_id: int) -> frozenset[str]:
        """The secrets in the trial's experiment config, masked wherever a log line shows them."""
        trial = self.trials.get(trial_id)
        exp = self.experiments.get(trial.experiment_id) if trial is not None else None
        if exp is None:
            return frozenset()
        cached = self._secrets.get(exp.id)
        if cached is None or cached[0] is not exp.config:  # a patched config holds other values
            cached = (exp.config, masking.secret_values(exp.config.raw))
            self._secrets[exp.id] = cached
        return cached[1]

    def _trial_exists(self, trial_id: int) -> bool:
        return trial_ops.trial_exists(self.db, trial_id)
