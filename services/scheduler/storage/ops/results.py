"""What trials report: steps, validations, checkpoints and log lines."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, Table, bindparam, func, insert, select, tuple_, update

from pedl._timeutil import utc_now
from pedl.config.masking import mask_text
from pedl_scheduler.storage.connection import Positional, Row, Storage
from pedl_scheduler.storage.ops import metric_groups
from pedl_scheduler.storage.ops._insert import insert_new
from pedl_scheduler.storage.tables import checkpoints, experiments, steps, trial_logs, trials, validations

# Positional: one row per result (see `Positional`).
_STEP = {
    dialect: Positional(
        statement,
        ("trial_id", "step_id", "total_batches", "num_batches", "metrics_json", "end_time", "run_id"),
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
# Listings show stored checkpoints only (COMPLETED, and PARTIALLY_DELETED: some files removed on
# purpose, as Determined lists them): one being deleted, deleted, or whose bytes the store lost
# (MISSING) cannot be downloaded. Only COMPLETED ones are resumed from.
LISTED = ("COMPLETED", "PARTIALLY_DELETED")
_CHECKPOINTS_OF_MANY = (
    select(checkpoints)
    .where(checkpoints.c.trial_id.in_(bindparam("ids", expanding=True)), checkpoints.c.state.in_(LISTED))
    .order_by(checkpoints.c.trial_id, checkpoints.c.total_batches)
)
_CHECKPOINTS_OF = (
    select(checkpoints)
    .where(checkpoints.c.trial_id == bindparam("trial_id"), checkpoints.c.state.in_(LISTED))
    .order_by(checkpoints.c.total_batches)
)
_STEPS_PAGE = (
    select(steps)
    .where(steps.c.trial_id == bindparam("trial_id"), steps.c.total_batches > bindparam("after"))
    .order_by(steps.c.total_batches)
    .limit(bindparam("n"))
)
_STEP_COUNT_OF = select(func.count()).select_from(steps).where(steps.c.trial_id == bindparam("trial_id"))


def _between(table: Table) -> Select[Any]:
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
_CHECKPOINTS_BETWEEN = _between(checkpoints).where(checkpoints.c.state.in_(LISTED))  # as listings
_ANY_CHECKPOINTS_BETWEEN = _between(checkpoints)  # deleted ones too (Determined's workload listings)
_ANY_CHECKPOINTS_OF = (
    select(checkpoints)
    .where(checkpoints.c.trial_id == bindparam("trial_id"))
    .order_by(checkpoints.c.total_batches)
)
_NO_END = 2**62
_LOGS_AFTER = (
    select(trial_logs)
    .where(trial_logs.c.trial_id == bindparam("trial_id"), trial_logs.c.id > bindparam("after"))
    .order_by(trial_logs.c.id)
    .limit(bindparam("n"))
)
_LOG_BEFORE_TAIL = (
    select(trial_logs.c.id)
    .where(trial_logs.c.trial_id == bindparam("trial_id"))
    .order_by(trial_logs.c.id.desc())
    .offset(bindparam("n"))
    .limit(1)
)
_EXPERIMENT_VALIDATIONS = (
    select(validations.c.trial_id, validations.c.total_batches, validations.c.metrics_json)
    .select_from(validations.join(trials, trials.c.id == validations.c.trial_id))
    .where(trials.c.experiment_id == bindparam("exp_id"))
)
_EXPERIMENT_CHECKPOINTS = (
    select(checkpoints.c.uuid, checkpoints.c.trial_id, checkpoints.c.total_batches)
    .select_from(checkpoints.join(trials, trials.c.id == checkpoints.c.trial_id))
    .where(trials.c.experiment_id == bindparam("exp_id"), checkpoints.c.state.in_(LISTED))
)
_CHECKPOINT_SOURCE = (
    select(
        checkpoints.c.uuid,
        checkpoints.c.state,
        checkpoints.c.trial_id,
        checkpoints.c.checkpoint_json,
        trials.c.experiment_id,
        trials.c.request_id,
        trials.c.latest_checkpoint_uuid,
        experiments.c.owner,
    )
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
_SET_CHECKPOINT_STATE = (
    update(checkpoints)
    .where(checkpoints.c.uuid == bindparam("ckpt_uuid"))
    .values(state=bindparam("new_state"), state_changed_at=bindparam("now"))
)
# Which states each new state may follow (`move_checkpoints`): a deletion starts from any recorded
# row and ends only one that is DELETING; the reconciler's MISSING and COMPLETED only undo each other.
CHECKPOINT_MOVES = {
    "DELETING": ("COMPLETED", "DELETING", "DELETED", "MISSING", "PARTIALLY_DELETED"),
    "DELETED": ("DELETING",),
    "MISSING": ("COMPLETED",),
    "COMPLETED": ("MISSING",),
}
_MOVE_CHECKPOINTS = (
    update(checkpoints)
    .where(
        checkpoints.c.uuid.in_(bindparam("uuids", expanding=True)),
        checkpoints.c.state.in_(bindparam("from_states", expanding=True)),
    )
    .values(state=bindparam("new_state"), state_changed_at=bindparam("now"))
    .returning(checkpoints.c.uuid)
)
_PARTIALLY_DELETE = (
    update(checkpoints)
    .where(
        checkpoints.c.uuid == bindparam("ckpt_uuid"),
        checkpoints.c.state.in_(LISTED),
    )
    .values(state="PARTIALLY_DELETED", checkpoint_json=bindparam("json"), state_changed_at=bindparam("now"))
    .returning(checkpoints.c.uuid)
)
_CHECKPOINT_STATES = select(checkpoints.c.uuid, checkpoints.c.state, checkpoints.c.created_at)
_CHECKPOINTS_IN_STATE = (
    select(checkpoints.c.uuid).where(checkpoints.c.state == bindparam("state")).order_by(checkpoints.c.uuid)
)


def record_step(
    s: Storage,
    trial_id: int,
    step_id: int,
    total_batches: int,
    num_batches: int,
    metrics_json: str,
    end_time: str,
    run_id: int = 1,
) -> None:
    """A completed step, reported by the trial's run `run_id` (counted from 1); a repeat of a stored
    one is dropped: an agent may resend after a reconnect."""
    s.defer(_STEP[s.dialect], (trial_id, step_id, total_batches, num_batches, metrics_json, end_time, run_id))


def record_validation(
    s: Storage,
    trial_id: int,
    step_id: int,
    total_batches: int,
    metrics_json: str,
    end_time: str,
    run_id: int = 1,
) -> None:
    s.defer(
        _VALIDATION[s.dialect],
        {
            "trial_id": trial_id,
            "step_id": step_id,
            "total_batches": total_batches,
            "metrics_json": metrics_json,
            "end_time": end_time,
            "run_id": run_id,
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
            "message": mask_text(message),  # a trial printing its env or a URL with a password
        },
    )


def steps_of(s: Storage, trial_id: int) -> list[Row]:
    return s.rows(_STEPS_OF, {"trial_id": trial_id})


def validations_of(s: Storage, trial_id: int) -> list[Row]:
    return s.rows(_VALIDATIONS_OF, {"trial_id": trial_id})


def checkpoints_of(s: Storage, trial_id: int, with_deleted: bool = False) -> list[Row]:
    """The trial's stored (LISTED) checkpoints; with_deleted: those deleted or GC'd too."""
    return s.rows(_ANY_CHECKPOINTS_OF if with_deleted else _CHECKPOINTS_OF, {"trial_id": trial_id})


def steps_page(s: Storage, trial_id: int, after_batches: int, limit: int) -> list[Row]:
    """Up to `limit` of the trial's steps past `after_batches`, by total_batches."""
    return s.rows(_STEPS_PAGE, {"trial_id": trial_id, "after": after_batches, "n": limit})


def step_count_of(s: Storage, trial_id: int) -> int:
    return int(s.scalar(_STEP_COUNT_OF, {"trial_id": trial_id}) or 0)


def validations_between(s: Storage, trial_id: int, after_batches: int, upto: int | None) -> list[Row]:
    """The trial's validations with after_batches < total_batches <= upto (None: no upper end)."""
    args = {"trial_id": trial_id, "after": after_batches, "upto": _NO_END if upto is None else upto}
    return s.rows(_VALIDATIONS_BETWEEN, args)


def checkpoints_between(
    s: Storage, trial_id: int, after_batches: int, upto: int | None, with_deleted: bool = False
) -> list[Row]:
    args = {"trial_id": trial_id, "after": after_batches, "upto": _NO_END if upto is None else upto}
    return s.rows(_ANY_CHECKPOINTS_BETWEEN if with_deleted else _CHECKPOINTS_BETWEEN, args)


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


def log_id_before_tail(s: Storage, trial_id: int, n: int) -> int:
    """The id after which the trial's newest `n` log lines start (0 when it has no more than `n`)."""
    return int(s.scalar(_LOG_BEFORE_TAIL, {"trial_id": trial_id, "n": n}) or 0)


def experiment_validations(s: Storage, exp_id: int) -> list[Row]:
    """`trial_id`, `total_batches` and `metrics_json` of every validation of the experiment's trials."""
    return s.rows(_EXPERIMENT_VALIDATIONS, {"exp_id": exp_id})


def experiment_checkpoints(s: Storage, exp_id: int) -> list[Row]:
    """`uuid`, `trial_id` and `total_batches` of the experiment's stored (LISTED) checkpoints."""
    return s.rows(_EXPERIMENT_CHECKPOINTS, {"exp_id": exp_id})


def mark_checkpoint_deleted(s: Storage, uuid: str) -> None:
    """The store has confirmed the checkpoint is gone (or never had it)."""
    set_checkpoint_state(s, [uuid], "DELETED")


def set_checkpoint_state(s: Storage, uuids: list[str], state: str) -> None:
    """COMPLETED, DELETING (the store is asked to delete it), DELETED, or MISSING (the store lost it)."""
    now = utc_now()
    for uuid in uuids:
        s.defer(_SET_CHECKPOINT_STATE, {"ckpt_uuid": uuid, "new_state": state, "now": now})


def move_checkpoints(s: Storage, uuids: list[str], state: str) -> list[str]:
    """Moves the recorded checkpoints whose state `state` may follow (CHECKPOINT_MOVES) to it, now;
    the uuids it moved. A uuid with no row yet (its result not yet written) is never moved, so nothing
    deletes bytes the scheduler has not recorded, and a row another path moved meanwhile keeps its state."""
    moved: list[str] = []
    now, from_states = utc_now(), list(CHECKPOINT_MOVES[state])
    for first in range(0, len(uuids), 1000):  # well under PostgreSQL's 65535 parameters
        params = {"uuids": list(uuids[first : first + 1000]), "from_states": from_states}
        rows = s.rows(_MOVE_CHECKPOINTS, {**params, "new_state": state, "now": now})
        moved += [r["uuid"] for r in rows]
    return moved


def record_partial_deletion(s: Storage, uuid: str, checkpoint_json: str) -> bool:
    """A stored checkpoint lost some files on purpose: PARTIALLY_DELETED, with the store's record as
    it is now (files, size). False for a row no longer stored (a deletion took it over meanwhile)."""
    rows = s.rows(_PARTIALLY_DELETE, {"ckpt_uuid": uuid, "json": checkpoint_json, "now": utc_now()})
    return bool(rows)


def checkpoint_states(s: Storage) -> list[Row]:
    """`uuid`, `state` and `created_at` of every checkpoint the scheduler recorded (the reconciler's view)."""
    return s.rows(_CHECKPOINT_STATES)


def checkpoints_in_state(s: Storage, state: str) -> list[str]:
    return [r["uuid"] for r in s.rows(_CHECKPOINTS_IN_STATE, {"state": state})]


def checkpoint_source(s: Storage, uuid: str) -> Row | None:
    """A checkpoint's `uuid`, `state`, `trial_id`, `checkpoint_json`, its trial's `experiment_id`,
    `request_id` and `latest_checkpoint_uuid`, and its experiment's `owner`; None if unknown."""
    return s.row(_CHECKPOINT_SOURCE, {"ckpt_uuid": uuid})


def trial_source(s: Storage, trial_id: int) -> Row | None:
    """A trial's latest checkpoint `uuid` ('' for none), `experiment_id` and `owner`; None if no trial."""
    return s.row(_TRIAL_SOURCE, {"trial_id": trial_id})


def step_count(s: Storage) -> int:
    """How many steps are stored, over every trial."""
    return int(s.scalar(_STEP_COUNT) or 0)


# The metrics stream (`GetMetrics`): rows of many trials, paged by (trial, batches) on the tables'
# primary keys, so a page costs what it returns however long the experiment.
_METRIC_TABLES = {"training": steps, "validation": validations}
# (trial_id, total_batches, metrics_json, end_time, run_id): one stored step or validation.
MetricRow = tuple[int, int, str, str, int]
_TERMINAL_STATES = ("COMPLETED", "ERROR", "CANCELED")


def _metric_page(table: Table) -> Select[Any]:
    key = tuple_(table.c.trial_id, table.c.total_batches)
    return (
        select(
            table.c.trial_id, table.c.total_batches, table.c.metrics_json, table.c.end_time, table.c.run_id
        )
        .where(
            table.c.trial_id.in_(bindparam("ids", expanding=True)),
            table.c.total_batches >= bindparam("from_batches"),
            key > tuple_(bindparam("after_trial"), bindparam("after_batches")),
        )
        .order_by(table.c.trial_id, table.c.total_batches)
        .limit(bindparam("n"))
    )


def _experiment_metric_page(table: Table) -> Select[Any]:
    key = tuple_(table.c.trial_id, table.c.total_batches)
    return (
        select(
            table.c.trial_id, table.c.total_batches, table.c.metrics_json, table.c.end_time, table.c.run_id
        )
        .select_from(table.join(trials, trials.c.id == table.c.trial_id))
        .where(
            trials.c.experiment_id == bindparam("exp_id"),
            table.c.total_batches >= bindparam("from_batches"),
            key > tuple_(bindparam("after_trial"), bindparam("after_batches")),
        )
        .order_by(table.c.trial_id, table.c.total_batches)
        .limit(bindparam("n"))
    )


_METRIC_PAGES = {kind: _metric_page(table) for kind, table in _METRIC_TABLES.items()}
_METRIC_MARKS = {
    kind: select(table.c.trial_id, func.count().label("n"), func.max(table.c.total_batches).label("last"))
    .where(table.c.trial_id.in_(bindparam("ids", expanding=True)))
    .group_by(table.c.trial_id)
    for kind, table in _METRIC_TABLES.items()
}
_EXPERIMENT_METRIC_PAGES = {kind: _experiment_metric_page(table) for kind, table in _METRIC_TABLES.items()}
_TRIAL_STATES_OF = (
    select(trials.c.id, trials.c.state)
    .where(trials.c.experiment_id == bindparam("exp_id"))
    .order_by(trials.c.id)
)
_TRIAL_STATE_ONE = select(trials.c.id, trials.c.state).where(trials.c.id == bindparam("trial_id"))


def metric_rows(
    s: Storage,
    kind: str,
    trial_ids: list[int],
    from_batches: int,
    after: tuple[int, int],
    limit: int,
) -> list[MetricRow]:
    """`MetricRow`s of `kind` ("training", "validation", or a custom group's name) rows
    of `trial_ids` at or past `from_batches`, after the (trial, batches) key `after`, in key order."""
    if not trial_ids:
        return []
    if kind not in _METRIC_PAGES:
        return metric_groups.rows(s, kind, trial_ids, from_batches, after, limit)
    params = {
        "ids": trial_ids,
        "from_batches": from_batches,
        "after_trial": after[0],
        "after_batches": after[1],
        "n": limit,
    }
    return [
        (r["trial_id"], r["total_batches"], r["metrics_json"], r["end_time"], r["run_id"])
        for r in s.rows(_METRIC_PAGES[kind], params)
    ]


def metric_marks(s: Storage, kind: str, trial_ids: list[int]) -> dict[int, tuple[int, int]]:
    """Trial id -> (row count, last batch count) of its `kind` rows, for those of `trial_ids` with
    any: read from the primary key's index alone, so it costs tens of milliseconds at 100,000 rows.
    Rows are only ever added (once per batch count), so an unchanged mark means unchanged rows."""
    if kind not in _METRIC_MARKS:
        return metric_groups.marks(s, kind, trial_ids)
    marks: dict[int, tuple[int, int]] = {}
    for start in range(0, len(trial_ids), 500):  # far under SQLite's bound-parameter limit
        for r in s.rows(_METRIC_MARKS[kind], {"ids": trial_ids[start : start + 500]}):
            marks[r["trial_id"]] = (int(r["n"]), int(r["last"]))
    return marks


def experiment_metric_rows(
    s: Storage, kind: str, experiment_id: int, from_batches: int, after: tuple[int, int], limit: int
) -> list[MetricRow]:
    """`metric_rows` of every trial of an experiment: one statement per page, read through the
    driver's cursor (an experiment's whole history is 100,000 rows at 1,000 trials)."""
    if kind not in _EXPERIMENT_METRIC_PAGES:
        return metric_groups.experiment_rows(s, kind, experiment_id, from_batches, after, limit)
    params = {
        "exp_id": experiment_id,
        "from_batches": from_batches,
        "after_trial": after[0],
        "after_batches": after[1],
        "n": limit,
    }
    return [
        (r["trial_id"], r["total_batches"], r["metrics_json"], r["end_time"], r["run_id"])
        for r in s.rows_raw(_EXPERIMENT_METRIC_PAGES[kind], params)
    ]


def trial_states(s: Storage, experiment_id: int | None = None, trial_id: int | None = None) -> dict[int, str]:
    """Trial id -> state, of an experiment's trials or of one trial (empty: none such)."""
    if trial_id is not None:
        rows = s.rows(_TRIAL_STATE_ONE, {"trial_id": trial_id})
    else:
        rows = s.rows(_TRIAL_STATES_OF, {"exp_id": experiment_id})
    return {r["id"]: r["state"] for r in rows}


def is_terminal(state: str | None) -> bool:
    return state in _TERMINAL_STATES
