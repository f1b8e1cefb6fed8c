"""Database rows to API messages."""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from google.protobuf import json_format

from pedl._metrics import to_struct
from pedl.config import ExperimentConfig, carried, mask_secrets
from pedl.config.errors import ConfigError
from pedl.config.masking import mask_text
from pedl.config.stored import parse_stored_config
from pedl.v1 import common_pb2, scheduler_pb2
from pedl_scheduler.experiments import early_exit
from pedl_scheduler.slurm.commands import job_of_agent

EXPERIMENT_STATES = {
    name.removeprefix("EXPERIMENT_STATE_"): value for name, value in common_pb2.ExperimentState.items()
}
STATE_NAMES = {value: name for name, value in EXPERIMENT_STATES.items() if value}
TRIAL_STATES = {name.removeprefix("TRIAL_STATE_"): value for name, value in common_pb2.TrialState.items()}


def experiment(
    row: dict[str, Any], num_trials: int, *, document: bool = True, live: ExperimentConfig | None = None
) -> scheduler_pb2.Experiment:
    """`document`: fill config_document (`config_document`; `live`: the running experiment's config)."""
    config = json.loads(row["config_json"])
    searcher = config.get("searcher", {})
    return scheduler_pb2.Experiment(
        id=row["id"],
        state=EXPERIMENT_STATES[row["state"]],
        config_yaml=row["config_yaml"],
        config=to_struct(mask_secrets(config)),  # the raw config holds e.g. S3 keys
        description=description(row, config),
        created_at=row["created_at"],
        ended_at=row["ended_at"],
        num_trials=num_trials,
        model_definition_name=row["model_definition_name"],
        error=mask_text(row["error"] or ""),
        searcher_metric=searcher.get("metric", ""),
        smaller_is_better=bool(searcher.get("smaller_is_better", True)),
        owner=row.get("owner") or "",
        labels=json.loads(row.get("labels_json") or "[]"),
        archived=bool(row.get("archived")),
        name=mask_text(str(config.get("name") or "")),
        notes=row.get("notes") or "",
        config_document=config_document(row["config_json"], live) if document else "",
    )


_DOCUMENTS: OrderedDict[str, str] = OrderedDict()
DOCUMENTS_KEPT = 2048


def config_document(config_json: str, live: ExperimentConfig | None = None) -> str:
    """The stored config as the typed, masked document (`carried.masked_json`); "" for one that no
    longer parses. Made from the live experiment's config where there is one (parsed once, at create
    or recovery), else from one parse of the stored config; kept by the stored text (a config changes
    only by a patch, which stores new text), so a page of experiments costs no parse after its first view."""
    document = _DOCUMENTS.get(config_json)
    if document is None:
        try:
            config = live if live is not None else parse_stored_config(json.loads(config_json))
            document = carried.masked_json(config)
        except (ConfigError, ValueError):
            document = ""
        _DOCUMENTS[config_json] = document
        if len(_DOCUMENTS) > DOCUMENTS_KEPT:
            _DOCUMENTS.popitem(last=False)
    else:
        _DOCUMENTS.move_to_end(config_json)
    return document


def description(row: dict[str, Any], config: dict[str, Any]) -> str:
    """The one PatchExperiment set, else the config's."""
    patched = row.get("description")
    return mask_text(str(patched) if patched is not None else str(config.get("description") or ""))


def trial(
    row: dict[str, Any], agent_id: str = "", num_steps: int = 0, waiting_reason: str = ""
) -> scheduler_pb2.Trial:
    ran_on = [a for a in (row.get("agents") or "").split(",") if a]
    message = scheduler_pb2.Trial(
        id=row["id"],
        experiment_id=row["experiment_id"],
        state=TRIAL_STATES[row["state"]],
        # A hyperparameter with a secret-looking name (api_key) shows masked; others as they are.
        hparams=to_struct(mask_secrets(json.loads(row["hparams_json"]))),
        total_batches=row["total_batches"],
        run_id=row["run_id"],
        restarts=row["restarts"],
        agent_id=agent_id,
        latest_checkpoint_uuid=row["latest_checkpoint_uuid"],
        start_time=row["start_time"],
        end_time=row["end_time"],
        num_steps=num_steps,
        error=mask_text(row["error"] or ""),
        seed=row["seed"],
        waiting_reason=waiting_reason,
        parent_trial_id=row.get("parent_trial_id") or 0,
        ran_on=ran_on,
        slurm_job=job_of_agent(ran_on[0]) or "" if ran_on else "",
        # A COMPLETED trial's end_cause names its early exit; an ERROR's says whose fault it was.
        early_exit=early_exit.reason_value(
            (row.get("end_cause") or "") if row["state"] == "COMPLETED" else ""
        ),
    )
    if row["best_validation"] is not None:
        message.best_validation_metric = row["best_validation"]
    sequencer = row.get("sequencer_json") or ""
    if '"epoch_batches"' in sequencer:
        message.epoch_batches = json.loads(sequencer).get("epoch_batches") or 0
    return message


def step(row: dict[str, Any]) -> scheduler_pb2.Step:
    return scheduler_pb2.Step(
        step_id=row["step_id"],
        total_batches=row["total_batches"],
        num_batches=row["num_batches"],
        metrics=to_struct(json.loads(row["metrics_json"])),
        end_time=row["end_time"],
    )


def validation(row: dict[str, Any]) -> scheduler_pb2.Validation:
    return scheduler_pb2.Validation(
        step_id=row["step_id"],
        total_batches=row["total_batches"],
        metrics=to_struct(json.loads(row["metrics_json"])),
        end_time=row["end_time"],
    )


def checkpoint(row: dict[str, Any]) -> common_pb2.Checkpoint:
    message = common_pb2.Checkpoint()
    json_format.Parse(row["checkpoint_json"], message)
    message.state = common_pb2.CheckpointState.Value(f"CHECKPOINT_STATE_{row['state']}")
    return message


def log_line(row: dict[str, Any]) -> common_pb2.LogLine:
    return common_pb2.LogLine(
        id=row["id"],
        trial_id=row["trial_id"],
        run_id=row["run_id"],
        timestamp=row["timestamp"],
        source=row["source"],
        message=row["message"],
    )
