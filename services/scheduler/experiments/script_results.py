"""Recording what a Core API script reported (command entrypoints), as the harness relays it.

A script reports at its own pace; the harness sends its reports with the next workload result.
Each is recorded as the script made it: training metrics as a step row and validation metrics as
a validation row at the script's `steps_completed` (a custom group's in its own table), each
checkpoint at once as the trial's latest (so a run lost a moment later resumes from it), with the
same garbage collection as any trial's.
The searcher hears only the validations its targets ask for (COMPUTE_VALIDATION_METRICS).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from google.protobuf import json_format

from pedl._metrics import from_struct
from pedl.searcher import MetricError, is_better, searcher_metric
from pedl.v1 import common_pb2
from pedl_scheduler import metrics as prometheus
from pedl_scheduler.checkpoint_gc import CheckpointRef
from pedl_scheduler.experiments.state import SchedulerState
from pedl_scheduler.runtime import TrialRuntime
from pedl_scheduler.storage.ops import metric_groups
from pedl_scheduler.storage.ops import results as result_ops

REPORT = common_pb2.ScriptReportKind


def record_reports(
    state: SchedulerState, trial: TrialRuntime, reports: Iterable[common_pb2.ScriptReport], now: str
) -> None:
    """Inside the result intake's unit of work."""
    exp = state.experiments[trial.experiment_id]
    step_id = trial.sequencer.step_id
    previous = trial.sequencer.batches_trained  # where the last result left the script
    for report in reports:
        steps = report.steps_completed
        if report.kind == REPORT.SCRIPT_REPORT_KIND_TRAINING:
            result_ops.record_step(
                state.db,
                trial.id,
                step_id,
                steps,
                max(steps - previous, 0),
                json.dumps(from_struct(report.metrics)),
                now,
                run_id=trial.run_id,
            )
            previous = steps
            prometheus.step_ingested()
        elif report.kind == REPORT.SCRIPT_REPORT_KIND_VALIDATION:
            _record_validation(state, exp, trial, step_id, steps, from_struct(report.metrics), now)
        elif report.kind == REPORT.SCRIPT_REPORT_KIND_CHECKPOINT:
            _record_checkpoint(state, exp, trial, step_id, steps, report.checkpoint, now)
        elif report.kind == REPORT.SCRIPT_REPORT_KIND_GROUP and report.group:
            metrics_json = json.dumps(from_struct(report.metrics))
            metric_groups.record(state.db, trial.id, report.group, steps, metrics_json, now, trial.run_id)


def _record_validation(
    state: SchedulerState,
    exp: Any,
    trial: TrialRuntime,
    step_id: int,
    steps: int,
    metrics: dict[str, Any],
    now: str,
) -> None:
    result_ops.record_validation(
        state.db, trial.id, step_id, steps, json.dumps(metrics), now, run_id=trial.run_id
    )
    prometheus.validation_ingested()
    try:
        value = searcher_metric(metrics, exp.config.searcher_metric)
    except MetricError:
        return  # a validation without the searcher's metric is shown, but ranks nothing
    if exp.gc is not None:
        exp.gc.add_metric(trial.id, steps, value)
    if is_better(value, trial.best_validation, exp.config.smaller_is_better):
        trial.best_validation = value


def _record_checkpoint(
    state: SchedulerState,
    exp: Any,
    trial: TrialRuntime,
    step_id: int,
    progress: int,
    ckpt: common_pb2.Checkpoint,
    now: str,
) -> None:
    result_ops.record_checkpoint(
        state.db, ckpt.uuid, trial.id, step_id, progress, json_format.MessageToJson(ckpt), now
    )
    trial.latest_checkpoint_uuid = ckpt.uuid
    trial.latest_checkpoint_batches = progress
    trial.latest_checkpoint_step = step_id
    state.holds_checkpoint(trial)
    if exp.gc is not None:
        exp.gc.add_checkpoint(CheckpointRef(ckpt.uuid, trial.id, progress))
    prometheus.checkpoint_recorded()


def step_completed(trial: TrialRuntime, w: common_pb2.Workload, result: common_pb2.WorkloadResult) -> None:
    """A script's RUN_STEP ends where the script got to (it may stop short of the target: a
    checkpoint to record at once, or the script exiting because it is done)."""
    progress = result.script_progress
    trial.sequencer.on_step_completed(w.step_id, progress)
    if result.script_finished:
        trial.sequencer.finish(progress)
