"""pedl's scheduler messages in Determined's JSON (camelCase, its enum spellings)."""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring as _esc
from typing import Any

from pedl import records
from pedl._metrics import from_struct
from pedl.config.experiment import ExperimentConfig
from pedl.v1 import common_pb2, scheduler_pb2
from pedl_webui import configs
from pedl_webui.rest.common import state_name
from pedl_webui.rest.log_filters import level, stdtype

DEFAULT_PROJECT = {
    "projectId": 1,
    "projectName": "Uncategorized",
    "workspaceId": 1,
    "workspaceName": "Uncategorized",
}
STORE_PATH = "/nonexistent/pedl-checkpoint-store (download through the master)"
_TRIAL_STATE = {
    "ACTIVE": "STATE_ACTIVE",
    "PAUSED": "STATE_PAUSED",
    "COMPLETED": "STATE_COMPLETED",
    "CANCELED": "STATE_CANCELED",
    "ERROR": "STATE_ERROR",
    "QUEUED": "STATE_QUEUED",
    "RUNNING": "STATE_RUNNING",
    "STOPPING_CANCELED": "STATE_STOPPING_CANCELED",
    "STOPPING_COMPLETED": "STATE_STOPPING_COMPLETED",
    "STOPPING_ERROR": "STATE_STOPPING_ERROR",
}
_CHECKPOINT_STATE = {
    "COMPLETED": "STATE_COMPLETED",
    "ACTIVE": "STATE_ACTIVE",
    "DELETED": "STATE_DELETED",
    # Being deleted, or lost by the store: either way gone for a user, as Determined's deleted ones.
    "DELETING": "STATE_DELETED",
    "MISSING": "STATE_DELETED",
    "ERROR": "STATE_ERROR",
    "PARTIALLY_DELETED": "STATE_PARTIALLY_DELETED",
}


def shared_raw(config: ExperimentConfig | None) -> dict[str, Any]:
    """The config with its defaults (secrets masked by the scheduler), not copied: every REST answer
    serialises it at once and none changes it, and a deep copy per row was a fifth of an experiments
    page's time in the web UI. Callers that change it use `configs.masked_raw`."""
    return config.raw if config is not None else {}


def experiment_json(
    exp: scheduler_pb2.Experiment, trials: list[scheduler_pb2.Trial] | None = None
) -> dict[str, Any]:
    config = configs.experiment_config(exp)
    value: dict[str, Any] = {
        "id": exp.id,
        "name": exp.name or f"Experiment {exp.id}",
        "description": exp.description,
        "labels": list(exp.labels),
        "startTime": exp.created_at,
        "endTime": exp.ended_at or None,
        "state": state_name(exp.state),
        "archived": exp.archived,
        "numTrials": exp.num_trials,
        "displayName": exp.owner,
        "username": exp.owner,
        "userId": 0,
        "resourcePool": config.resource_pool if config is not None else "default",
        "searcherType": config.searcher_name if config is not None else "",
        "searcherMetric": exp.searcher_metric,
        "notes": exp.notes,
        "jobId": f"experiment-{exp.id}",
        "forkedFrom": None,
        "progress": None,
        "parentArchived": False,
        "projectOwnerId": 1,
        "config": shared_raw(config),
        "originalConfig": exp.config_yaml,
        "unmanaged": False,
        **DEFAULT_PROJECT,
    }
    if trials is not None:
        value["trialIds"] = sorted(t.id for t in trials)
        if value["state"] == "STATE_ACTIVE":
            # Determined tells an active experiment's two conditions apart: a trial of it runs on
            # an agent, or none does yet (all waiting for slots).
            running = any(t.agent_id for t in trials)
            value["state"] = "STATE_RUNNING" if running else "STATE_QUEUED"
    return value


def trial_json(
    trial: scheduler_pb2.Trial,
    hparam_space: Any = None,
    validations: list[scheduler_pb2.Validation] | None = None,
    checkpoints: list[common_pb2.Checkpoint] | None = None,
    metric: str = "",
    smaller_is_better: bool = True,
) -> dict[str, Any]:
    state = records.trial_state(trial.state)
    value: dict[str, Any] = {
        "id": trial.id,
        "experimentId": trial.experiment_id,
        "startTime": trial.start_time or None,
        "endTime": trial.end_time or None,
        "state": _TRIAL_STATE.get(state, "STATE_UNSPECIFIED"),
        "restarts": trial.restarts,
        "hparams": records.typed_hparams(from_struct(trial.hparams), hparam_space),
        "totalBatchesProcessed": trial.total_batches,
        "taskId": f"trial-{trial.id}",
        "taskIds": [f"trial-{trial.id}"],
        "summaryMetrics": {},
        "metadata": slurm_placement(trial),
    }
    if trial.HasField("best_validation_metric"):
        value["searcherMetricValue"] = trial.best_validation_metric
    if validations:
        read = [(v, from_struct(v.metrics)) for v in validations]  # each Struct read once
        latest = max(read, key=lambda pair: pair[0].total_batches)
        value["latestValidation"] = metrics_workload(*latest)
        if metric:
            best = _best(read, metric, smaller_is_better)
            if best is not None:
                value["bestValidation"] = metrics_workload(*best)
    if checkpoints is not None:
        done = [c for c in checkpoints if records.checkpoint_state(c.state) == "COMPLETED"]
        best_at = value.get("bestValidation", {}).get("totalBatches")
        chosen = [c for c in done if c.total_batches == best_at] or done[-1:]
        if chosen:
            value["bestCheckpoint"] = {
                "uuid": chosen[0].uuid,
                "endTime": chosen[0].created_at or None,
                "state": "STATE_COMPLETED",
                "resources": {f.path: str(f.size) for f in chosen[0].files},
                "totalBatches": chosen[0].total_batches,
                "metadata": dict(chosen[0].metadata),
            }
        value["checkpointCount"] = len(done)
        value["totalCheckpointSize"] = str(sum(c.total_size for c in done))
    return value


def slurm_placement(trial: scheduler_pb2.Trial) -> dict[str, str]:
    """The Slurm job the trial's latest run ran in (running or ended), for
    `det trial describe --json`; {} when no Slurm pool's pilot agent ran it."""
    if not trial.slurm_job:
        return {}
    return {"slurm_job": trial.slurm_job, "agent": trial.agent_id or trial.ran_on[0]}


def _best(
    read: list[tuple[scheduler_pb2.Validation, dict[str, Any]]], metric: str, smaller_is_better: bool
) -> tuple[scheduler_pb2.Validation, dict[str, Any]] | None:
    """The (validation, its metrics) best at `metric`, of those that have it as a number (not NaN)."""
    numbers = [
        (m[metric], (v, m))
        for v, m in read
        if isinstance(m.get(metric), (int, float))
        and not isinstance(m.get(metric), bool)
        and not math.isnan(m[metric])  # a NaN is never a trial's best, as the scheduler ranks it
    ]
    if not numbers:
        return None
    pick = min if smaller_is_better else max
    return pick(numbers, key=lambda p: p[0])[1]


def metrics_workload(row: Any, metrics: dict[str, Any] | None = None) -> dict[str, Any]:
    """Determined's MetricsWorkload: one validation's metrics (`metrics`, already read, or its
    Struct's) at `totalBatches`."""
    avg = from_struct(row.metrics) if metrics is None else metrics
    return {
        "endTime": row.end_time or None,
        "metrics": {"avgMetrics": avg, "batchMetrics": []},
        "numInputs": 0,
        "totalBatches": row.total_batches,
    }


def checkpoint_json(
    checkpoint: common_pb2.Checkpoint,
    exp: scheduler_pb2.Experiment | None = None,
    trial: scheduler_pb2.Trial | None = None,
    validation: scheduler_pb2.Validation | None = None,
) -> dict[str, Any]:
    state = records.checkpoint_state(checkpoint.state)
    training: dict[str, Any] = {
        "trialId": checkpoint.trial_id,
        "experimentId": checkpoint.experiment_id,
        "trainingMetrics": {"avgMetrics": {}, "batchMetrics": []},
        "validationMetrics": {
            "avgMetrics": from_struct(validation.metrics) if validation else {},
            "batchMetrics": [],
        },
    }
    if exp is not None:
        # Not a storage Determined's client can read directly: its download (DownloadMode.AUTO)
        # finds no such directory and goes through this app (`GET /checkpoints/{uuid}`).
        training["experimentConfig"] = shared_raw(configs.experiment_config(exp)) | {
            "checkpoint_storage": {"type": "directory", "container_path": STORE_PATH}
        }
        training["searcherMetric"] = None
        if validation is not None and exp.searcher_metric:
            metric = from_struct(validation.metrics).get(exp.searcher_metric)
            training["searcherMetric"] = metric if isinstance(metric, (int, float)) else None
    if trial is not None:
        training["hparams"] = from_struct(trial.hparams)
    return {
        "uuid": checkpoint.uuid,
        "taskId": f"trial-{checkpoint.trial_id}",
        "allocationId": f"trial-{checkpoint.trial_id}.1",
        "reportTime": checkpoint.created_at or None,
        "resources": {f.path: str(f.size) for f in checkpoint.files},
        "metadata": checkpoint_metadata(checkpoint),
        "state": _CHECKPOINT_STATE.get(state, "STATE_UNSPECIFIED"),
        "training": training,
        "storageId": 1,
    }


def checkpoint_metadata(checkpoint: common_pb2.Checkpoint) -> dict[str, Any]:
    """What Determined's client reads as the checkpoint's metadata: the user's own once set
    (`POST /api/v1/checkpoints/{uuid}/metadata` replaces it whole), else what the trial wrote and
    the batches it had trained."""
    if checkpoint.user_metadata_json:
        value: dict[str, Any] = json.loads(checkpoint.user_metadata_json)
        return value
    return {
        **dict(checkpoint.metadata),
        "steps_completed": checkpoint.total_batches,
        "framework": "",
        "format": "",
    }


def log_ndjson(line: common_pb2.LogLine, task_id: str = "") -> str:
    """`{"result": <Determined's TrialLogsResponse>}` and a newline (its TaskLogsResponse when
    `task_id` is given), written out directly: a followed log streams tens of thousands of lines a
    second, twice the rate of dumping dicts. A pedl line has no agent, container or rank, so those
    optional fields are left out (Determined's "no rank")."""
    message, source = line.message, line.source
    text = message if message.endswith("\n") else message + "\n"
    owner = f'"taskId": {_esc(task_id)}' if task_id else f'"trialId": {line.trial_id}'
    return (
        f'{{"result": {{"id": "{line.id}", {owner}, "timestamp": {_esc(line.timestamp)}, '
        f'"message": {_esc(text)}, "level": "{level(line)}", "stdtype": "{stdtype(line)}", '
        f'"source": {_esc(source)}, "log": {_esc(message)}}}}}\n'
    )
