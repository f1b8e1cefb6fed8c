"""TRANSITIONAL: the `?`-statement API `experiments.py` still calls, answered by named operations.

`ExperimentManager` (being split into modules by responsibility) still writes
`db.query("SELECT ...", params)`; until those call sites name the operations themselves, each of
its statements, exactly as written there, maps here onto the storage operation that replaces it.
A statement not in `STATEMENTS` is refused by name: there is no SQL pass-through. Delete this
module (and `pedl_scheduler.db`) once `experiments.py` calls `storage.ops` directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Executable

from pedl_scheduler.storage.connection import Params, Row, Storage
from pedl_scheduler.storage.ops import experiments as E
from pedl_scheduler.storage.ops import results as R
from pedl_scheduler.storage.ops import searcher as S
from pedl_scheduler.storage.ops import trials as T

Operation = Callable[..., Any]


def _named(name: str, value: Any) -> list[Row]:
    return [] if value is None else [{name: value}]


def _row(row: Row | None) -> list[Row]:
    return [] if row is None else [row]


# Each statement of experiments.py -> the storage operation doing what it did. Reads return rows
# (for query/query_one); writes return the new id where the statement inserted one, else None.
STATEMENTS: dict[str, Operation] = {
    # recovery after a restart
    "SELECT * FROM experiments WHERE state IN ('ACTIVE', 'PAUSED')": E.live_experiments,
    "SELECT seq, event_json FROM searcher_events WHERE experiment_id = ? AND seq > ? ORDER BY seq": (
        lambda s, exp_id, after: [{"seq": q, "event_json": e} for q, e in S.events_after(s, exp_id, after)]
    ),
    "SELECT * FROM trials WHERE experiment_id = ? ORDER BY id": T.trials_of,
    # experiment lifecycle
    "INSERT INTO experiments (state, config_yaml, config_json, model_definition, model_definition_name, "
    "seed, created_at, owner) VALUES ('ACTIVE', ?, ?, ?, ?, ?, ?, ?)": (
        lambda s, yaml, cfg, model, name, seed, now, owner: E.create_experiment(
            s,
            config_yaml=yaml,
            config_json=cfg,
            model_definition=model,
            model_definition_name=name,
            seed=seed,
            created_at=now,
            owner=owner,
        )
    ),
    "SELECT state FROM experiments WHERE id = ?": lambda s, i: _named("state", E.experiment_state(s, i)),
    "UPDATE experiments SET state = 'PAUSED' WHERE id = ?": lambda s, i: E.set_experiment_state(
        s, i, "PAUSED"
    ),
    "UPDATE experiments SET state = 'ACTIVE' WHERE id = ?": lambda s, i: E.set_experiment_state(
        s, i, "ACTIVE"
    ),
    "SELECT model_definition_name FROM experiments WHERE id = ?": (
        lambda s, i: _named("model_definition_name", E.model_definition_name(s, i))
    ),
    "UPDATE experiments SET state = ?, error = ?, ended_at = ? WHERE id = ?": (
        lambda s, state, error, now, i: E.end_experiment(s, i, state, error, now)
    ),
    "SELECT state FROM trials WHERE experiment_id = ?": (
        lambda s, i: [{"state": state} for state in T.trial_states_of(s, i)]
    ),
    # trial runs
    "UPDATE trials SET state = ? WHERE id = ?": lambda s, state, i: T.set_trial_state(s, i, state),
    "UPDATE trials SET run_id = ?, sequencer_json = ?, start_time = CASE WHEN start_time = '' THEN ? "
    "ELSE start_time END WHERE id = ?": lambda s, run, seq, now, i: T.start_run(s, i, run, seq, now),
    "UPDATE trials SET restarts = ? WHERE id = ?": lambda s, n, i: T.set_restarts(s, i, n),
    "UPDATE trials SET total_batches = ?, latest_checkpoint_uuid = ?, latest_checkpoint_batches = ?, "
    "latest_checkpoint_step = ?, sequencer_json = ?, best_validation = ?, waiting_on_trial_id = ? "
    "WHERE id = ?": lambda s, tb, cu, cb, cs, seq, best, wait, i: T.save_trial(
        s,
        i,
        total_batches=tb,
        checkpoint_uuid=cu,
        checkpoint_batches=cb,
        checkpoint_step=cs,
        sequencer_json=seq,
        best_validation=best,
        waiting_on=wait,
    ),
    "UPDATE trials SET state = ?, error = ?, end_time = ? WHERE id = ?": (
        lambda s, state, error, now, i: T.end_trial(s, i, state, error, now)
    ),
    # result intake
    "INSERT INTO steps (trial_id, step_id, total_batches, num_batches, metrics_json, end_time) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING": R.record_step,
    "INSERT INTO validations (trial_id, step_id, total_batches, metrics_json, end_time) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING": R.record_validation,
    "INSERT INTO checkpoints (uuid, trial_id, step_id, total_batches, state, checkpoint_json, created_at) "
    "VALUES (?, ?, ?, ?, 'COMPLETED', ?, ?) ON CONFLICT DO NOTHING": R.record_checkpoint,
    "SELECT id FROM trials WHERE id = ?": lambda s, i: [{"id": i}] if T.trial_exists(s, i) else [],
    "INSERT INTO trial_logs (trial_id, run_id, timestamp, source, message) VALUES (?, ?, ?, ?, ?)": (
        R.record_log
    ),
    # search driving
    "INSERT INTO trials (experiment_id, request_id, state, hparams_json, seed, sequencer_json) "
    "VALUES (?, ?, 'ACTIVE', ?, ?, ?)": T.create_trial,
    "SELECT id, request_id FROM trials WHERE experiment_id = ? ORDER BY id DESC LIMIT ?": T.newest_trials,
    "SELECT id FROM trials WHERE experiment_id = ? AND request_id = ?": (
        lambda s, e, r: _named("id", T.trial_id_of_request(s, e, r))
    ),
    "UPDATE trials SET parent_trial_id = ? WHERE id = ?": lambda s, parent, i: T.set_parent(s, i, parent),
    "SELECT t.id, t.latest_checkpoint_uuid, t.latest_checkpoint_batches, t.latest_checkpoint_step, c.state "
    "FROM trials t LEFT JOIN checkpoints c ON c.uuid = t.latest_checkpoint_uuid "
    "WHERE t.experiment_id = ? AND t.request_id = ?": lambda s, e, r: _row(T.parent_checkpoint(s, e, r)),
    "SELECT latest_checkpoint_uuid, latest_checkpoint_batches, latest_checkpoint_step FROM trials "
    "WHERE id = ?": lambda s, i: _row(T.latest_checkpoint(s, i)),
    "UPDATE experiments SET searcher_snapshot = ?, searcher_seq = ? WHERE id = ?": (
        lambda s, snap, seq, i: E.save_searcher_snapshot(s, i, snap, seq)
    ),
    "DELETE FROM searcher_events WHERE experiment_id = ? AND seq <= ?": S.drop_events_through,
    "INSERT INTO searcher_events (experiment_id, seq, event_json) VALUES (?, ?, ?)": S.journal_event,
    # checkpoint lifecycle
    "SELECT v.trial_id, v.total_batches, v.metrics_json FROM validations v JOIN trials t "
    "ON t.id = v.trial_id WHERE t.experiment_id = ?": R.experiment_validations,
    "SELECT c.uuid, c.trial_id, c.total_batches FROM checkpoints c "
    "JOIN trials t ON t.id = c.trial_id WHERE t.experiment_id = ? AND c.state = 'COMPLETED'": (
        R.experiment_checkpoints
    ),
    "UPDATE checkpoints SET state = 'DELETED' WHERE uuid = ?": R.mark_checkpoint_deleted,
}


def _key(sql: str) -> str:
    return " ".join(sql.split())


_BY_KEY = {_key(sql): op for sql, op in STATEMENTS.items()}
_SEEN: dict[str, Operation] = {}  # each statement as experiments.py spells it, looked up once


class UnknownStatement(LookupError):
    """SQL outside the storage layer that no named operation stands for."""


class Database(Storage):
    """`Storage` that also answers the `?` statements experiments.py writes (see the module docstring)."""

    def _operation(self, sql: str) -> Operation:
        op = _SEEN.get(sql)
        if op is not None:
            return op
        op = _SEEN[sql] = _BY_KEY.get(_key(sql))  # type: ignore[assignment]
        if op is None:
            del _SEEN[sql]
            raise UnknownStatement(
                f"no storage operation stands for this statement (SQL lives in pedl_scheduler.storage): {sql}"
            )
        return op

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        rows = self._operation(sql)(self, *params)
        return list(rows)

    def query_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Runs a write; returns the new id where it inserted one, else 0."""
        result = self._operation(sql)(self, *params)
        self.flush()
        return int(result) if isinstance(result, int) else 0

    def defer(self, statement: Executable | str, params: Params | Sequence[Any] = ()) -> None:  # type: ignore[override]
        if isinstance(statement, str):
            self._operation(statement)(self, *params)
            return
        super().defer(statement, params)  # type: ignore[arg-type]
