"""What trials report: steps, validations, checkpoints and log lines."""

from __future__ import annotations

from sqlalchemy import bindparam, func, insert, select, update

from pedl_scheduler.storage.connection import Positional, Row, Storage
from pedl_scheduler.storage.ops._insert import insert_new
from pedl_scheduler.storage.tables import checkpoints, experiments, steps, trial_logs, trials, validations

# Positional: one row per result (see `Positional`).
_STEP = {
    dialect: Positional(
        statement, ("trial_id", "step_id", "total_batches", "num_batches", "metrics_json", "end_time")
    )
    for dialect, statement in insert_new(steps).items()
}
_VALIDATION = insert_new(validations)
_CHECKPOINT = insert_new(checkpoints)
_LOG = insert(trial_logs)
_STEPS_OF = select(steps).where(steps.c.trial_id == bindparam("trial_id")).order_by(steps.c.total_batches)
_VALIDATIONS_OF = (
    select(validations)
    .where(validations.c.trial_id == bindparam("trial_id"))
    .order_by(validations.c.total_batches)
)
_STEPS_OF_MANY = (
    select(steps)
    .where(steps.c.trial_id.in_(bindparam("ids", expanding=True)))
    .order_by(steps.c.trial_id, steps.c.total_batches)
)
_VALIDATIONS_OF_MANY = (
    select(validations)
    .where(validations.c.trial_id.in_(bindparam("ids", expanding=True)))
    .order_by(validations.c.trial_id, validations.c.total_batches)
)
_CHECKPOINTS_OF_MANY = (
    select(checkpoints)
    .where(checkpoints.c.trial_id.in_(bindparam("ids", expanding=True)))
    .order_by(checkpoints.c.trial_id, checkpoints.c.total_batches)
)
_CHECKPOINTS_OF = (
    select(checkpoints)
    .where(checkpoints.c.trial_id == bindparam("trial_id"))
    .order_by(checkpoints.c.total_batches)
)
_STEPS_PAGE = (
    select(steps)
    .where(steps.c.trial_id == bindparam("trial_id"), steps.c.total_batches > bindparam("after"))
    .order_by(steps.c.total_batches)
    .limit(bindparam("n"))
)
_STEP_COUNT_OF = select(func.count()).select_from(steps).where(steps.c.trial_id == bindparam("trial_id"))


def _between(table):  # type: ignore[no-untyped-def]
    return (
        select(table)
        .where(
            table.c.trial_id == bindparam("trial_id"),
            table.c.total_batches > bindparam("after"),
            table.c.total_batches <= bindparam("upto"),
        )
        .order_by(table.c.total_batches)
    )


_VALIDATIONS_BETWEEN = _between(validations)
_CHECKPOINTS_BETWEEN = _between(checkpoints)
_NO_END = 2**62
_LOGS_AFTER = (
    select(trial_logs)
    .where(trial_logs.c.trial_id == bindparam("trial_id"), trial_logs.c.id > bindparam("after"))
    .order_by(trial_logs.c.id)
    .limit(bindparam("n"))
)
_EXPERIMENT_VALIDATIONS = (
    select(validations.c.trial_id, validations.c.total_batches, validations.c.metrics_json)
    .select_from(validations.join(trials, trials.c.id == validations.c.trial_id))
    .where(trials.c.experiment_id == bindparam("exp_id"))
)
_EXPERIMENT_CHECKPOINTS = (
    select(checkpoints.c.uuid, checkpoints.c.trial_id, checkpoints.c.total_batches)
    .select_from(checkpoints.join(trials, trials.c.id == checkpoints.c.trial_id))
    .where(trials.c.experiment_id == bindparam("exp_id"), checkpoints.c.state == "COMPLETED")
)
_CHECKPOINT_SOURCE = (
    select(checkpoints.c.uuid, checkpoints.c.state, trials.c.experiment_id, experiments.c.owner)
    .select_from(
        checkpoints.join(trials, trials.c.id == checkpoints.c.trial_id).join(
            experiments, experiments.c.id == trials.c.experiment_id
        )
    )
    .where(checkpoints.c.uuid == bindparam("ckpt_uuid"))
)
_TRIAL_SOURCE = (
    select(trials.c.latest_checkpoint_uuid.label("uuid"), trials.c.experiment_id, experiments.c.owner)
    .select_from(trials.join(experiments, experiments.c.id == trials.c.experiment_id))
    .where(trials.c.id == bindparam("trial_id"))
)
_STEP_COUNT = select(func.count()).select_from(steps)
_MARK_DELETED = (
    update(checkpoints).where(checkpoints.c.uuid == bindparam("ckpt_uuid")).values(state="DELETED")
)


def record_step(
    s: Storage,
    trial_id: int,
    step_id: int,
    total_batches: int,
    num_batches: int,
    metrics_json: str,
    end_time: str,
) -> None:
    """A completed step (a repeat of a stored one is dropped: an agent may resend after a reconnect)."""
    s.defer(_STEP[s.dialect], (trial_id, step_id, total_batches, num_batches, metrics_json, end_time))


def record_validation(
    s: Storage, trial_id: int, step_id: int, total_batches: int, metrics_json: str, end_time: str
) -> None:
    s.defer(
        _VALIDATION[s.dialect],
        {
            "trial_id": trial_id,
            "step_id": step_id,
            "total_batches": total_batches,
            "metrics_json": metrics_json,
            "end_time": end_time,
        },
    )


def record_checkpoint(
    s: Storage,
    uuid: str,
    trial_id: int,
    step_id: int,
    total_batches: int,
    checkpoint_json: str,
    created_at: str,
) -> None:
    """A checkpoint the trial has saved (state COMPLETED)."""
    s.defer(
        _CHECKPOINT[s.dialect],
        {
            "uuid": uuid,
            "trial_id": trial_id,
            "step_id": step_id,
            "total_batches": total_batches,
            "state": "COMPLETED",
            "checkpoint_json": checkpoint_json,
            "created_at": created_at,
        },
    )


def record_log(s: Storage, trial_id: int, run_id: int, timestamp: str, source: str, message: str) -> None:
    s.defer(
        _LOG,
        {
            "trial_id": trial_id,
            "run_id": run_id,
            "timestamp": timestamp,
            "source": source,
            "message": message,
        },
    )


def steps_of(s: Storage, trial_id: int) -> list[Row]:
    return s.rows(_STEPS_OF, {"trial_id": trial_id})


def validations_of(s: Storage, trial_id: int) -> list[Row]:
    return s.rows(_VALIDATIONS_OF, {"trial_id": trial_id})


def checkpoints_of(s: Storage, trial_id: int) -> list[Row]:
    return s.rows(_CHECKPOINTS_OF, {"trial_id": trial_id})


def steps_page(s: Storage, trial_id: int, after_batches: int, limit: int) -> list[Row]:
    """Up to `limit` of the trial's steps past `after_batches`, by total_batches."""
    return s.rows(_STEPS_PAGE, {"trial_id": trial_id, "after": after_batches, "n": limit})


def step_count_of(s: Storage, trial_id: int) -> int:
    return int(s.scalar(_STEP_COUNT_OF, {"trial_id": trial_id}) or 0)


def validations_between(s: Storage, trial_id: int, after_batches: int, upto: int | None) -> list[Row]:
    """The trial's validations with after_batches < total_batches <= upto (None: no upper end)."""
    args = {"trial_id": trial_id, "after": after_batches, "upto": _NO_END if upto is None else upto}
    return s.rows(_VALIDATIONS_BETWEEN, args)


def checkpoints_between(s: Storage, trial_id: int, after_batches: int, upto: int | None) -> list[Row]:
    args = {"trial_id": trial_id, "after": after_batches, "upto": _NO_END if upto is None else upto}
    return s.rows(_CHECKPOINTS_BETWEEN, args)


def steps_of_trials(s: Storage, trial_ids: list[int]) -> list[Row]:
    """Every step of these trials, by trial then batches (one query for a page of trials)."""
    return s.rows(_STEPS_OF_MANY, {"ids": trial_ids}) if trial_ids else []


def validations_of_trials(s: Storage, trial_ids: list[int]) -> list[Row]:
    return s.rows(_VALIDATIONS_OF_MANY, {"ids": trial_ids}) if trial_ids else []


def checkpoints_of_trials(s: Storage, trial_ids: list[int]) -> list[Row]:
    return s.rows(_CHECKPOINTS_OF_MANY, {"ids": trial_ids}) if trial_ids else []


def logs_after(s: Storage, trial_id: int, after_id: int, limit: int = 1000) -> list[Row]:
    """The trial's log lines with ids above `after_id`, oldest first, at most `limit`."""
    return s.rows(_LOGS_AFTER, {"trial_id": trial_id, "after": after_id, "n": limit})


def experiment_validations(s: Storage, exp_id: int) -> list[Row]:
    """`trial_id`, `total_batches` and `metrics_json` of every validation of the experiment's trials."""
    return s.rows(_EXPERIMENT_VALIDATIONS, {"exp_id": exp_id})


def experiment_checkpoints(s: Storage, exp_id: int) -> list[Row]:
    """`uuid`, `trial_id` and `total_batches` of the experiment's stored (COMPLETED) checkpoints."""
    return s.rows(_EXPERIMENT_CHECKPOINTS, {"exp_id": exp_id})


def mark_checkpoint_deleted(s: Storage, uuid: str) -> None:
    """The store has confirmed the checkpoint is gone (or never had it)."""
    s.defer(_MARK_DELETED, {"ckpt_uuid": uuid})


def checkpoint_source(s: Storage, uuid: str) -> Row | None:
    """A checkpoint's `uuid`, `state`, and its experiment's `experiment_id` and `owner`; None if unknown."""
    return s.row(_CHECKPOINT_SOURCE, {"ckpt_uuid": uuid})


def trial_source(s: Storage, trial_id: int) -> Row | None:
    """A trial's latest checkpoint `uuid` ('' for none), `experiment_id` and `owner`; None if no trial."""
    return s.row(_TRIAL_SOURCE, {"trial_id": trial_id})


def step_count(s: Storage) -> int:
    """How many steps are stored, over every trial."""
    return int(s.scalar(_STEP_COUNT) or 0)
