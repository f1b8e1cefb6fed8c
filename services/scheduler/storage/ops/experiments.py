"""Experiments: their rows, states, model definitions and searcher snapshots."""

from __future__ import annotations

from sqlalchemy import bindparam, delete, func, insert, select, update

from pedl_scheduler.storage.connection import Row, Storage
from pedl_scheduler.storage.tables import (
    checkpoints,
    cut_curves,
    experiments,
    metric_groups,
    searcher_events,
    steps,
    trial_logs,
    trial_timelines,
    trials,
    validations,
)

_CREATE = insert(experiments).returning(experiments.c.id)
_BY_ID = select(experiments).where(experiments.c.id == bindparam("exp_id"))
_LIVE = select(experiments).where(experiments.c.state.in_(("ACTIVE", "PAUSED"))).order_by(experiments.c.id)
_STATE = select(experiments.c.state).where(experiments.c.id == bindparam("exp_id"))
_OWNER = select(experiments.c.owner).where(experiments.c.id == bindparam("exp_id"))
_MODEL = select(experiments.c.model_definition, experiments.c.model_definition_name).where(
    experiments.c.id == bindparam("exp_id")
)
_MODEL_NAME = select(experiments.c.model_definition_name).where(experiments.c.id == bindparam("exp_id"))
_TRIAL_COUNT = select(func.count()).select_from(trials).where(trials.c.experiment_id == bindparam("exp_id"))
# A listing never reads the model definition or the searcher's snapshot (megabytes per row).
_LISTED = [c for c in experiments.c if c.name not in ("model_definition", "searcher_snapshot")]
_WITH_TRIAL_COUNTS = select(
    *_LISTED,
    select(func.count())
    .select_from(trials)
    .where(trials.c.experiment_id == experiments.c.id)
    .scalar_subquery()
    .label("num_trials"),
).order_by(experiments.c.id)
_PAGE = _WITH_TRIAL_COUNTS.where(experiments.c.id > bindparam("after_id")).limit(bindparam("n"))
_STATE_COUNTS = select(experiments.c.state, func.count().label("n")).group_by(experiments.c.state)
_SET_STATE = (
    update(experiments).where(experiments.c.id == bindparam("exp_id")).values(state=bindparam("new_state"))
)
_ALL_STATES = select(experiments.c.id, experiments.c.state)
_TRIAL_IDS = select(trials.c.id).where(trials.c.experiment_id == bindparam("exp_id")).scalar_subquery()
_UNDELETED_CHECKPOINTS = (
    select(checkpoints.c.uuid)
    .where(checkpoints.c.trial_id.in_(_TRIAL_IDS), checkpoints.c.state != "DELETED")
    .order_by(checkpoints.c.uuid)
)
_DELETE_ALL = [
    *(
        delete(t).where(t.c.trial_id.in_(_TRIAL_IDS))
        for t in (trial_logs, trial_timelines, cut_curves, steps, validations, metric_groups, checkpoints)
    ),
    delete(searcher_events).where(searcher_events.c.experiment_id == bindparam("exp_id")),
    delete(trials).where(trials.c.experiment_id == bindparam("exp_id")),
    delete(experiments).where(experiments.c.id == bindparam("exp_id")),
]
_PATCH = update(experiments).where(experiments.c.id == bindparam("exp_id"))
_END = (
    update(experiments)
    .where(experiments.c.id == bindparam("exp_id"))
    .values(state=bindparam("new_state"), error=bindparam("new_error"), ended_at=bindparam("now"))
)
_REOPEN = (
    update(experiments)
    .where(experiments.c.id == bindparam("exp_id"))
    .values(state="ACTIVE", error="", ended_at="")
)
_SAVE_SNAPSHOT = (
    update(experiments)
    .where(experiments.c.id == bindparam("exp_id"))
    .values(searcher_snapshot=bindparam("snapshot"), searcher_seq=bindparam("seq"))
)


def create_experiment(
    s: Storage,
    *,
    config_yaml: str,
    config_json: str,
    model_definition: bytes,
    model_definition_name: str,
    seed: int,
    created_at: str,
    owner: str,
    state: str = "ACTIVE",
    warm_start_checkpoint_uuid: str = "",
) -> int:
    """Stores a new experiment; returns its id."""
    return int(
        s.scalar(
            _CREATE,
            {
                "state": state,
                "config_yaml": config_yaml,
                "config_json": config_json,
                "model_definition": model_definition,
                "model_definition_name": model_definition_name,
                "seed": seed,
                "created_at": created_at,
                "owner": owner,
                "warm_start_checkpoint_uuid": warm_start_checkpoint_uuid,
            },
        )
    )


def experiment(s: Storage, exp_id: int) -> Row | None:
    return s.row(_BY_ID, {"exp_id": exp_id})


def live_experiments(s: Storage) -> list[Row]:
    """Experiments a restarted scheduler takes up again (ACTIVE or PAUSED)."""
    return s.rows(_LIVE)


def experiment_state(s: Storage, exp_id: int) -> str | None:
    return s.scalar(_STATE, {"exp_id": exp_id})


def experiment_owner(s: Storage, exp_id: int) -> str | None:
    """The owner's username ('' for none); None when there is no such experiment."""
    return s.scalar(_OWNER, {"exp_id": exp_id})


def model_definition(s: Storage, exp_id: int) -> Row | None:
    """`model_definition` (bytes) and `model_definition_name`, or None."""
    row = s.row(_MODEL, {"exp_id": exp_id})
    if row is not None:
        row["model_definition"] = bytes(row["model_definition"])
    return row


def model_definition_name(s: Storage, exp_id: int) -> str | None:
    return s.scalar(_MODEL_NAME, {"exp_id": exp_id})


def trial_count(s: Storage, exp_id: int) -> int:
    return int(s.scalar(_TRIAL_COUNT, {"exp_id": exp_id}) or 0)


def experiments_with_trial_counts(s: Storage) -> list[Row]:
    """Every experiment, oldest first, with `num_trials`."""
    return s.rows(_WITH_TRIAL_COUNTS)


def experiments_page(s: Storage, after_id: int, limit: int) -> list[Row]:
    """Up to `limit` experiments with ids above `after_id`, oldest first, with `num_trials`."""
    return s.rows(_PAGE, {"after_id": after_id, "n": limit})


def filtered_experiments_page(
    s: Storage,
    after_id: int,
    limit: int,
    *,
    newest_first: bool = False,
    states: tuple[str, ...] = (),
    owner: str = "",
    exclude_archived: bool = False,
) -> list[Row]:
    """Up to `limit` experiments past `after_id` (above it oldest first; below it newest first, 0
    meaning from the newest) that pass the filters, with `num_trials`. Indexed on id: one range scan."""
    query = _WITH_TRIAL_COUNTS.order_by(None)
    if newest_first:
        query = query.order_by(experiments.c.id.desc())
        if after_id:
            query = query.where(experiments.c.id < after_id)
    else:
        query = query.order_by(experiments.c.id).where(experiments.c.id > after_id)
    if states:
        query = query.where(experiments.c.state.in_(states))
    if owner:
        query = query.where(experiments.c.owner == owner)
    if exclude_archived:
        query = query.where(experiments.c.archived == 0)
    return s.rows(query.limit(limit))


def patch_experiment(
    s: Storage,
    exp_id: int,
    *,
    description: str | None = None,
    labels_json: str | None = None,
    archived: bool | None = None,
    config_json: str | None = None,
    config_yaml: str | None = None,
    notes: str | None = None,
) -> None:
    """Changes what users may change after creation; None leaves a field as it is."""
    values: dict[str, object] = {}
    if config_json is not None and config_yaml is not None:
        values.update(config_json=config_json, config_yaml=config_yaml)
    if description is not None:
        values["description"] = description
    if labels_json is not None:
        values["labels_json"] = labels_json
    if archived is not None:
        values["archived"] = int(archived)
    if notes is not None:
        values["notes"] = notes
    if values:
        s.defer(_PATCH.values(**values), {"exp_id": exp_id})


def set_experiment_state(s: Storage, exp_id: int, state: str) -> None:
    s.defer(_SET_STATE, {"exp_id": exp_id, "new_state": state})


def end_experiment(s: Storage, exp_id: int, state: str, error: str, now: str) -> None:
    s.defer(_END, {"exp_id": exp_id, "new_state": state, "new_error": error, "now": now})


def reopen_experiment(s: Storage, exp_id: int) -> None:
    """An ended experiment is ACTIVE again (`pedl experiment activate` of one the infrastructure ended)."""
    s.defer(_REOPEN, {"exp_id": exp_id})


def save_searcher_snapshot(s: Storage, exp_id: int, snapshot: str, seq: int) -> None:
    """The searcher's snapshot, covering its events up to `seq`."""
    s.defer(_SAVE_SNAPSHOT, {"exp_id": exp_id, "snapshot": snapshot, "seq": seq})


def experiment_state_counts(s: Storage) -> dict[str, int]:
    """How many experiments are in each state (states with none left out)."""
    return {r["state"]: int(r["n"]) for r in s.rows(_STATE_COUNTS)}


def experiment_states(s: Storage) -> dict[int, str]:
    """Every experiment's state by id (the reconciler decides which orphans may go)."""
    return {r["id"]: r["state"] for r in s.rows(_ALL_STATES)}


def undeleted_checkpoints(s: Storage, exp_id: int) -> list[str]:
    """Uuids of the experiment's checkpoints the store may still hold (any state but DELETED)."""
    return [r["uuid"] for r in s.rows(_UNDELETED_CHECKPOINTS, {"exp_id": exp_id})]


def delete_experiment(s: Storage, exp_id: int) -> None:
    """Removes the experiment and everything of its trials, in one transaction."""
    with s.transaction():
        for statement in _DELETE_ALL:
            s.run(statement, {"exp_id": exp_id})
