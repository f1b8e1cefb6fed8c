"""Trials: their rows, runs, states, and the checkpoints a child trial continues from."""

from __future__ import annotations

from sqlalchemy import bindparam, case, func, insert, select, update

from pedl_scheduler.storage.connection import Positional, Row, Storage
from pedl_scheduler.storage.tables import checkpoints, steps, trials

# Positional: one row per trial created (see `Positional`).
_CREATE = Positional(
    insert(trials), ("experiment_id", "request_id", "state", "hparams_json", "seed", "sequencer_json")
)
_NEWEST = (
    select(trials.c.id, trials.c.request_id)
    .where(trials.c.experiment_id == bindparam("exp_id"))
    .order_by(trials.c.id.desc())
    .limit(bindparam("n"))
)
_OF_EXPERIMENT = select(trials).where(trials.c.experiment_id == bindparam("exp_id")).order_by(trials.c.id)
_STATES = select(trials.c.state).where(trials.c.experiment_id == bindparam("exp_id"))
_FIRST_ERROR = (
    select(trials.c.id, trials.c.error)
    .where(trials.c.experiment_id == bindparam("exp_id"), trials.c.state == "ERROR", trials.c.error != "")
    .order_by(trials.c.end_time, trials.c.id)
    .limit(1)
)
_BY_ID = select(trials).where(trials.c.id == bindparam("trial_id"))
_EXISTS = select(trials.c.id).where(trials.c.id == bindparam("trial_id"))
_STATE = select(trials.c.state).where(trials.c.id == bindparam("trial_id"))
_BY_REQUEST = select(trials.c.id).where(
    trials.c.experiment_id == bindparam("exp_id"), trials.c.request_id == bindparam("request_id")
)
_LATEST_CHECKPOINT = (
    select(
        trials.c.latest_checkpoint_uuid,
        trials.c.latest_checkpoint_batches,
        trials.c.latest_checkpoint_step,
        checkpoints.c.state,
    )
    .select_from(trials.outerjoin(checkpoints, checkpoints.c.uuid == trials.c.latest_checkpoint_uuid))
    .where(trials.c.id == bindparam("trial_id"))
)
_PARENT_CHECKPOINT = (
    select(
        trials.c.id,
        trials.c.latest_checkpoint_uuid,
        trials.c.latest_checkpoint_batches,
        trials.c.latest_checkpoint_step,
        checkpoints.c.state,
    )
    .select_from(trials.outerjoin(checkpoints, checkpoints.c.uuid == trials.c.latest_checkpoint_uuid))
    .where(trials.c.experiment_id == bindparam("exp_id"), trials.c.request_id == bindparam("request_id"))
)
_WITH_STEP_COUNTS = (
    select(
        trials,
        select(func.count())
        .select_from(steps)
        .where(steps.c.trial_id == trials.c.id)
        .scalar_subquery()
        .label("num_steps"),
    )
    .where(trials.c.experiment_id == bindparam("exp_id"))
    .order_by(trials.c.id)
)
_PAGE = (
    _WITH_STEP_COUNTS.where(trials.c.id > bindparam("after_id"))
    .order_by(None)
    .order_by(trials.c.id)
    .limit(bindparam("n"))
)
_STATE_COUNTS = select(trials.c.state, func.count().label("n")).group_by(trials.c.state)
_SET_STATE = update(trials).where(trials.c.id == bindparam("trial_id")).values(state=bindparam("new_state"))
_START_RUN = (
    update(trials)
    .where(trials.c.id == bindparam("trial_id"))
    .values(
        run_id=bindparam("new_run_id"),
        sequencer_json=bindparam("new_sequencer_json"),
        agents=bindparam("new_agents"),
        start_time=case((trials.c.start_time == "", bindparam("now")), else_=trials.c.start_time),
    )
)
_SET_RESTARTS = (
    update(trials).where(trials.c.id == bindparam("trial_id")).values(restarts=bindparam("new_restarts"))
)
_SET_PARENT = (
    update(trials).where(trials.c.id == bindparam("trial_id")).values(parent_trial_id=bindparam("parent_id"))
)
_SAVE = Positional(
    update(trials)
    .where(trials.c.id == bindparam("trial_id"))
    .values(
        total_batches=bindparam("new_total_batches"),
        latest_checkpoint_uuid=bindparam("new_checkpoint_uuid"),
        latest_checkpoint_batches=bindparam("new_checkpoint_batches"),
        latest_checkpoint_step=bindparam("new_checkpoint_step"),
        sequencer_json=bindparam("new_sequencer_json"),
        best_validation=bindparam("new_best_validation"),
        waiting_on_trial_id=bindparam("new_waiting_on"),
    ),
    (
        "new_total_batches",
        "new_checkpoint_uuid",
        "new_checkpoint_batches",
        "new_checkpoint_step",
        "new_sequencer_json",
        "new_best_validation",
        "new_waiting_on",
        "trial_id",
    ),
)  # Positional: one row per trial a batch of results touches (see `Positional`)
_END = (
    update(trials)
    .where(trials.c.id == bindparam("trial_id"))
    .values(
        state=bindparam("new_state"),
        error=bindparam("new_error"),
        end_time=bindparam("now"),
        end_cause=bindparam("new_end_cause"),
    )
)
_REVIVE = (
    update(trials)
    .where(trials.c.id == bindparam("trial_id"))
    .values(state="ACTIVE", error="", end_time="", end_cause="", restarts=0)
)
_REOPEN = (
    update(trials)
    .where(trials.c.id == bindparam("trial_id"))
    .values(state="ACTIVE", end_time="", end_cause="")
)


def create_trial(
    s: Storage, exp_id: int, request_id: str, hparams_json: str, seed: int, sequencer_json: str
) -> None:
    """Stores a new ACTIVE trial (deferred: read the ids back with `newest_trials`)."""
    s.defer(_CREATE, (exp_id, request_id, "ACTIVE", hparams_json, seed, sequencer_json))


def newest_trials(s: Storage, exp_id: int, n: int) -> list[Row]:
    """`id` and `request_id` of the experiment's `n` newest trials, newest first.

    Raw DBAPI read: creating 10,000 trials reads 10,000 rows back here, and SQLAlchemy's Row
    objects made this read about 3x slower (45 -> 15 ms on SQLite)."""
    return s.rows_raw(_NEWEST, {"exp_id": exp_id, "n": n})


def trials_of(s: Storage, exp_id: int) -> list[Row]:
    """The experiment's trials, oldest first."""
    return s.rows(_OF_EXPERIMENT, {"exp_id": exp_id})


def trials_with_step_counts(s: Storage, exp_id: int) -> list[Row]:
    """The experiment's trials, oldest first, each with `num_steps`."""
    return s.rows(_WITH_STEP_COUNTS, {"exp_id": exp_id})


def trials_page(s: Storage, exp_id: int, after_id: int, limit: int) -> list[Row]:
    """Up to `limit` of the experiment's trials with ids above `after_id`, by id, with `num_steps`."""
    return s.rows(_PAGE, {"exp_id": exp_id, "after_id": after_id, "n": limit})


def trial_states_of(s: Storage, exp_id: int) -> list[str]:
    return [r["state"] for r in s.rows(_STATES, {"exp_id": exp_id})]


def first_trial_error(s: Storage, exp_id: int) -> tuple[int, str] | None:
    """The trial of the experiment that failed first (by end time) and its error."""
    row = s.row(_FIRST_ERROR, {"exp_id": exp_id})
    return None if row is None else (row["id"], row["error"])


def trial(s: Storage, trial_id: int) -> Row | None:
    return s.row(_BY_ID, {"trial_id": trial_id})


def trial_exists(s: Storage, trial_id: int) -> bool:
    return s.row(_EXISTS, {"trial_id": trial_id}) is not None


def trial_state(s: Storage, trial_id: int) -> str | None:
    return s.scalar(_STATE, {"trial_id": trial_id})


def trial_id_of_request(s: Storage, exp_id: int, request_id: str) -> int | None:
    """The id of the experiment's trial the searcher knows as `request_id`."""
    return s.scalar(_BY_REQUEST, {"exp_id": exp_id, "request_id": request_id})


def latest_checkpoint(s: Storage, trial_id: int) -> Row | None:
    """The trial's `latest_checkpoint_uuid`, `_batches` and `_step` as stored, and that checkpoint's
    `state` (None if unrecorded)."""
    return s.row(_LATEST_CHECKPOINT, {"trial_id": trial_id})


def parent_checkpoint(s: Storage, exp_id: int, request_id: str) -> Row | None:
    """A parent trial's `id`, latest checkpoint fields and that checkpoint's `state` (None if unstored)."""
    return s.row(_PARENT_CHECKPOINT, {"exp_id": exp_id, "request_id": request_id})


def set_trial_state(s: Storage, trial_id: int, state: str) -> None:
    s.defer(_SET_STATE, {"trial_id": trial_id, "new_state": state})


def start_run(
    s: Storage, trial_id: int, run_id: int, sequencer_json: str, now: str, agents: tuple[str, ...]
) -> None:
    """A new run of the trial on `agents` (chief first); its start time is the first run's."""
    s.defer(
        _START_RUN,
        {
            "trial_id": trial_id,
            "new_run_id": run_id,
            "new_sequencer_json": sequencer_json,
            "now": now,
            "new_agents": ",".join(agents),
        },
    )


def set_restarts(s: Storage, trial_id: int, restarts: int) -> None:
    s.defer(_SET_RESTARTS, {"trial_id": trial_id, "new_restarts": restarts})


def set_parent(s: Storage, trial_id: int, parent_id: int) -> None:
    s.defer(_SET_PARENT, {"trial_id": trial_id, "parent_id": parent_id})


def save_trial(
    s: Storage,
    trial_id: int,
    *,
    total_batches: int,
    checkpoint_uuid: str,
    checkpoint_batches: int,
    checkpoint_step: int,
    sequencer_json: str,
    best_validation: float | None,
    waiting_on: int | None,
) -> None:
    """The trial's progress as kept in memory."""
    s.defer(
        _SAVE,
        (
            total_batches,
            checkpoint_uuid,
            checkpoint_batches,
            checkpoint_step,
            sequencer_json,
            best_validation,
            waiting_on,
            trial_id,
        ),
    )


def end_trial(s: Storage, trial_id: int, state: str, error: str, now: str, cause: str = "") -> None:
    """`cause`: why an ERROR happened, "user" or "infrastructure" (restart_policy)."""
    s.defer(
        _END,
        {"trial_id": trial_id, "new_state": state, "new_error": error, "now": now, "new_end_cause": cause},
    )


def revive_trial(s: Storage, trial_id: int) -> None:
    """An ERROR trial the infrastructure ended is live again, with its restarts unspent."""
    s.defer(_REVIVE, {"trial_id": trial_id})


def reopen_trial(s: Storage, trial_id: int) -> None:
    """A trial its searcher had closed is live again (an ASHA promotion), its restarts as they were."""
    s.defer(_REOPEN, {"trial_id": trial_id})


def trial_state_counts(s: Storage) -> dict[str, int]:
    """How many trials are in each state (states with none left out)."""
    return {r["state"]: int(r["n"]) for r in s.rows(_STATE_COUNTS)}
