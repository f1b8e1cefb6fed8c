"""Scheduler messages as plain, correctly typed Python values: the one conversion layer behind the
CLI's --json/--csv, its tables' state names and the SDK's objects.

Protobuf's JSON mapping writes 64-bit integers as strings, Struct numbers as floats and enums as
their long names; a user reading `det e describe --json` expects `200`, `32` and `COMPLETED`.
Hyperparameters get back the types the experiment's config gave them.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pedl._metrics import from_struct
from pedl.harness.hparams import typed_values
from pedl.log_filter import log_fields
from pedl.v1 import common_pb2, scheduler_pb2


def _enum_name(enum: Any, value: int, prefix: str) -> str:
    try:
        return str(enum.Name(value)).removeprefix(prefix)
    except ValueError:
        return str(value)


def experiment_state(value: int) -> str:
    return _enum_name(common_pb2.ExperimentState, value, "EXPERIMENT_STATE_")


def trial_state(value: int) -> str:
    return _enum_name(common_pb2.TrialState, value, "TRIAL_STATE_")


def checkpoint_state(value: int) -> str:
    return _enum_name(common_pb2.CheckpointState, value, "CHECKPOINT_STATE_")


def config_mapping(experiment: scheduler_pb2.Experiment) -> dict[str, Any]:
    """The validated config (defaults filled in, secrets masked) as a mapping with JSON's types,
    decoded from the typed config document the scheduler sent (`pedl.config.received`); {} where it
    sent none."""
    from pedl.config import received  # the config's modules are loaded only where a config is read

    return received.masked_raw(received.experiment_config(experiment))


def hparam_space(experiment: scheduler_pb2.Experiment) -> dict[str, Any] | None:
    """The hyperparameter space of the experiment's typed config (`pedl.config.received`) that
    `typed_hparams` types trial values by; None where the scheduler sent no config document."""
    from pedl.config import received  # the config's modules are loaded only where a config is read

    return received.hparam_space(received.experiment_config(experiment))


def typed_hparams(values: Mapping[str, Any], space: Any) -> dict[str, Any]:
    """Sampled hyperparameters with the types of the config's space (`pedl.harness.hparams`)."""
    return typed_values(values, space)


def experiment_record(experiment: scheduler_pb2.Experiment, *, with_config: bool = True) -> dict[str, Any]:
    """`with_config`: include the validated config (defaults filled in, secrets masked) as a mapping,
    decoded from the typed config_document the scheduler sent (`pedl.config.received`)."""
    record = {
        "id": experiment.id,
        "state": experiment_state(experiment.state),
        "name": experiment.name,
        "description": experiment.description,
        "notes": experiment.notes,
        "owner": experiment.owner,
        "labels": list(experiment.labels),
        "archived": experiment.archived,
        "num_trials": experiment.num_trials,
        "created_at": experiment.created_at,
        "ended_at": experiment.ended_at or None,
        "model_definition_name": experiment.model_definition_name,
        "searcher_metric": experiment.searcher_metric,
        "smaller_is_better": experiment.smaller_is_better,
        "error": experiment.error or None,
    }
    if with_config:
        record["config"] = config_mapping(experiment)
    return record


def trial_record(trial: scheduler_pb2.Trial, hparam_space: Any = None) -> dict[str, Any]:
    return {
        "id": trial.id,
        "experiment_id": trial.experiment_id,
        "state": trial_state(trial.state),
        "hparams": typed_hparams(from_struct(trial.hparams), hparam_space),
        "total_batches": trial.total_batches,
        "num_steps": trial.num_steps,
        "restarts": trial.restarts,
        "run_id": trial.run_id,
        "seed": trial.seed,
        "agent_id": trial.agent_id or None,
        "best_validation_metric": (
            trial.best_validation_metric if trial.HasField("best_validation_metric") else None
        ),
        "latest_checkpoint_uuid": trial.latest_checkpoint_uuid or None,
        "start_time": trial.start_time or None,
        "end_time": trial.end_time or None,
        "error": trial.error or None,
        "waiting_reason": trial.waiting_reason or None,
        "parent_trial_id": trial.parent_trial_id or None,
        "early_exit": early_exit_reason(trial.early_exit),
    }


def early_exit_reason(reason: int) -> str | None:
    """Determined's EarlyExitReason name (INVALID_HP, USER_REQUESTED_STOP), None when the trial did not
    end itself early."""
    return _enum_name(common_pb2.EarlyExitReason, reason, "EARLY_EXIT_REASON_") if reason else None


def step_record(step: scheduler_pb2.Step) -> dict[str, Any]:
    return {
        "step_id": step.step_id,
        "total_batches": step.total_batches,
        "num_batches": step.num_batches,
        "metrics": from_struct(step.metrics),
        "end_time": step.end_time or None,
    }


def validation_record(validation: scheduler_pb2.Validation) -> dict[str, Any]:
    return {
        "step_id": validation.step_id,
        "total_batches": validation.total_batches,
        "metrics": from_struct(validation.metrics),
        "end_time": validation.end_time or None,
    }


def metric_kind(value: int) -> str:
    """ "training" or "validation" (the GetMetrics kinds, lower case as the SDK's records have them)."""
    return _enum_name(scheduler_pb2.MetricKind, value, "METRIC_KIND_").lower()


def metric_records(series: scheduler_pb2.MetricSeries) -> list[dict[str, Any]]:
    """One record per stored step or validation of a GetMetrics series (metrics as the trial reported
    them: numbers stay numbers, NaN stays NaN); a custom group's rows have its name as their kind."""
    kind = series.group or metric_kind(series.kind)
    return [
        {
            "trial_id": series.trial_id,
            "kind": kind,
            "total_batches": batches,
            "metrics": json.loads(metrics),
            "end_time": end_time or None,
        }
        for batches, metrics, end_time in zip(
            series.total_batches, series.metrics_json, series.end_time, strict=True
        )
    ]


def checkpoint_record(
    checkpoint: common_pb2.Checkpoint, metric: str = "", value: Any = None
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "uuid": checkpoint.uuid,
        "trial_id": checkpoint.trial_id,
        "total_batches": checkpoint.total_batches,
        "state": checkpoint_state(checkpoint.state),
        "num_files": len(checkpoint.files),
        "size_bytes": checkpoint.total_size or sum(f.size for f in checkpoint.files),
        "created_at": checkpoint.created_at or None,
    }
    if metric:
        record["searcher_metric"] = metric
        record["validation_metric"] = value
    return record


def trial_detail_record(
    detail: scheduler_pb2.GetTrialResponse, hparam_space: Any = None, metrics: bool = True
) -> dict[str, Any]:
    """A trial with its validations and checkpoints; with `metrics`, every training step too."""
    record = trial_record(detail.trial, hparam_space)
    if metrics:
        record["steps"] = [step_record(s) for s in sorted(detail.steps, key=lambda s: s.total_batches)]
    record["validations"] = [
        validation_record(v) for v in sorted(detail.validations, key=lambda v: v.total_batches)
    ]
    record["checkpoints"] = [
        checkpoint_record(c) for c in sorted(detail.checkpoints, key=lambda c: (c.total_batches, c.uuid))
    ]
    record["metric_groups"] = {g.group: metric_group_record(g) for g in detail.metric_groups}
    return record


def metric_group_record(group: scheduler_pb2.MetricGroupSummary) -> dict[str, Any]:
    """A custom metric group's reports and per metric its count, last, min, max and mean."""
    metrics = from_struct(group.metrics)
    for figures in metrics.values():
        figures["count"] = int(figures["count"])  # a Struct holds every number as a float
    return {"reports": group.reports, "last_batches": group.last_batches, "metrics": metrics}


def agent_record(agent: scheduler_pb2.Agent) -> dict[str, Any]:
    return {
        "id": agent.id,
        "hostname": agent.hostname,
        "address": agent.address,
        "resource_pool": agent.resource_pool,
        "num_slots": len(agent.slots),
        "used_slots": sum(1 for s in agent.slots if s.trial_id),
        "enabled": not agent.disabled,
        "last_heartbeat": agent.last_heartbeat or None,
    }


def slot_records(agents: Iterable[scheduler_pb2.Agent]) -> list[dict[str, Any]]:
    return [
        {
            "agent_id": a.id,
            "slot_id": s.id,
            "type": s.type,
            "device": s.device,
            "trial_id": s.trial_id or None,
            "enabled": not (a.disabled or s.disabled),
        }
        for a in sorted(agents, key=lambda a: a.id)
        for s in a.slots
    ]


def to_csv(records: Sequence[Mapping[str, Any]]) -> str:
    """One row per record; nested values (hparams, metrics) are flattened to `hparams.lr` columns."""
    rows = [_flatten(r) for r in records]
    columns: list[str] = []
    for row in rows:
        columns.extend(k for k in row if k not in columns)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return out.getvalue().rstrip("\n")


def _flatten(record: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flatten(value, name + "."))
        elif isinstance(value, list):
            import json

            flat[name] = json.dumps(value)
        elif isinstance(value, bool):
            flat[name] = "true" if value else "false"
        else:
            flat[name] = value
    return flat


def is_system_line(source: str, message: str) -> bool:
    """pedl's own lines in a trial log: what the platform wrote (source "pedl") and the harness's
    structured JSON log records (`{"event": ..., "level": ..., ...}`), as opposed to user output."""
    if source == "pedl":
        return True
    text = message.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return False
    import json

    try:
        record = json.loads(text)
    except ValueError:
        return False
    return isinstance(record, dict) and "event" in record and "level" in record


def log_record(line: common_pb2.LogLine) -> dict[str, Any]:
    level, rank = log_fields(line.message)
    return {
        "level": level,
        "rank": rank,
        "id": line.id,
        "trial_id": line.trial_id,
        "run_id": line.run_id,
        "timestamp": line.timestamp,
        "source": line.source,
        "system": is_system_line(line.source, line.message),
        "message": line.message.rstrip("\n"),
    }


def flat_hparams(hparams: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested hyperparameters as dotted names (a column each in the trials table)."""
    flat: dict[str, Any] = {}
    for name, value in hparams.items():
        if isinstance(value, dict):
            flat.update(flat_hparams(value, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = (
                value if isinstance(value, (int, float, str, bool)) or value is None else str(value)
            )
    return flat
