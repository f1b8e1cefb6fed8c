"""The storage layer behaves the same on SQLite and PostgreSQL.

Fresh databases get the newest schema, newer ones are refused, transactions roll back together,
inserts return their ids, bytes and numbers round-trip, deferred writes land with their
transaction, and no SQL is written outside the storage layer.
"""

import ast
import re
from pathlib import Path

import pytest

from pedl_scheduler.storage import Storage, migrate, open_storage
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import results as result_ops
from pedl_scheduler.storage.ops import searcher as searcher_ops
from pedl_scheduler.storage.ops import trials as trial_ops
from support import stored

ROOT = Path(__file__).resolve().parents[3]


def add_experiment(s: Storage, model: bytes = b"m") -> int:
    return experiment_ops.create_experiment(
        s,
        config_yaml="",
        config_json="{}",
        model_definition=model,
        model_definition_name="m",
        seed=1,
        created_at="now",
        owner="",
    )


def add_trial(s: Storage, exp_id: int, request_id: str = "r1") -> int:
    trial_ops.create_trial(s, exp_id, request_id, "{}", 1, "{}")
    (row,) = trial_ops.newest_trials(s, exp_id, 1)
    return row["id"]


def step(s: Storage, trial_id: int, step_id: int, total_batches: int) -> None:
    result_ops.record_step(s, trial_id, step_id, total_batches, 100, "{}", "now")


def test_a_fresh_database_gets_the_newest_schema_and_reopens(database_url: str) -> None:
    open_storage(database_url).close()
    s = open_storage(database_url)
    assert stored.rows(s, "SELECT version_num FROM alembic_version") == [{"version_num": migrate.head()}]
    s.close()


def test_a_sqlite_url_and_a_path_open_the_same_file(tmp_path) -> None:
    path = tmp_path / "nested" / "pedl.db"
    s = open_storage(str(path))
    add_experiment(s)
    s.close()
    assert len(experiment_ops.experiments_with_trial_counts(open_storage(f"sqlite:///{path}"))) == 1


def test_a_database_from_a_newer_pedl_is_refused(database_url: str) -> None:
    s = open_storage(database_url)
    stored.execute(s, "UPDATE alembic_version SET version_num = '9999'")
    s.close()
    with pytest.raises(RuntimeError, match="revision 9999, newer than this scheduler's"):
        open_storage(database_url)


def test_transactions_roll_back_together(database_url: str) -> None:
    s = open_storage(database_url)
    with pytest.raises(ZeroDivisionError), s.transaction():
        add_experiment(s, b"x")
        with s.transaction():  # nested: joins the outer one
            add_experiment(s, b"y")
        raise ZeroDivisionError
    assert experiment_ops.experiments_with_trial_counts(s) == []
    with s.transaction():
        add_experiment(s, b"z")
    assert len(experiment_ops.experiments_with_trial_counts(s)) == 1


def test_inserts_return_the_new_id(database_url: str) -> None:
    s = open_storage(database_url)
    first = add_experiment(s)
    second = add_experiment(s)
    assert first > 0 and second > first
    trial = add_trial(s, second)
    assert trial_ops.trial(s, trial)["experiment_id"] == second  # type: ignore[index]


def test_a_repeated_result_keeps_the_first_row(database_url: str) -> None:
    s = open_storage(database_url)
    trial = add_trial(s, add_experiment(s))
    with s.transaction():
        step(s, trial, 1, 100)
        result_ops.record_step(s, trial, 1, 100, 999, '{"again": 1}', "later")
    assert [(r["step_id"], r["num_batches"]) for r in result_ops.steps_of(s, trial)] == [(1, 100)]


def test_deferred_writes_land_with_their_transaction_in_order_and_are_seen_by_its_reads(
    database_url: str,
) -> None:
    s = open_storage(database_url)
    trial = add_trial(s, add_experiment(s))
    with s.transaction():
        for n in range(1, 6):  # one executemany
            step(s, trial, n, 100 * n)
        trial_ops.set_restarts(s, trial, 5)
        assert result_ops.step_count(s) == 5  # flushed before the read
        step(s, trial, 6, 600)
    assert [r["total_batches"] for r in result_ops.steps_of(s, trial)] == [100 * n for n in range(1, 7)]
    assert trial_ops.trial(s, trial)["restarts"] == 5  # type: ignore[index]
    commits = s.commits
    with pytest.raises(ZeroDivisionError), s.transaction():
        step(s, trial, 7, 700)
        raise ZeroDivisionError
    assert result_ops.step_count(s) == 6 and s.commits == commits
    step(s, trial, 8, 800)  # outside a transaction: written at once
    assert result_ops.step_count(s) == 7


def test_flush_hooks_write_state_kept_in_memory_last_and_once(database_url: str) -> None:
    s = open_storage(database_url)
    trial = add_trial(s, add_experiment(s))
    state = {"restarts": 0, "dirty": False, "writes": 0}

    def hook() -> None:
        if state["dirty"]:
            state["dirty"] = False
            state["writes"] += 1
            trial_ops.set_restarts(s, trial, state["restarts"])

    s.add_flush_hook(hook)
    with s.transaction():
        for restarts in (1, 2, 3):
            state["restarts"], state["dirty"] = restarts, True
    assert trial_ops.trial(s, trial)["restarts"] == 3 and state["writes"] == 1  # type: ignore[index]


def test_bytes_and_numbers_keep_their_values(database_url: str) -> None:
    payload = bytes(range(256)) * 1000
    s = open_storage(database_url)
    exp_id = add_experiment(s, payload)
    assert experiment_ops.model_definition(s, exp_id)["model_definition"] == payload  # type: ignore[index]
    trial = add_trial(s, exp_id)
    fields = dict(
        checkpoint_uuid="c",
        checkpoint_batches=2**40,
        checkpoint_step=3,
        sequencer_json="{}",
        waiting_on=None,
    )
    trial_ops.save_trial(s, trial, total_batches=2**40, best_validation=0.25, **fields)  # type: ignore[arg-type]
    row = trial_ops.trial(s, trial)
    assert (row["best_validation"], row["total_batches"]) == (0.25, 2**40)  # type: ignore[index]
    trial_ops.save_trial(s, trial, total_batches=1, best_validation=None, **fields)  # type: ignore[arg-type]
    assert trial_ops.trial(s, trial)["best_validation"] is None  # type: ignore[index]


def test_many_deferred_rows_of_one_insert_land_as_given_duplicates_and_all(database_url: str) -> None:
    s = open_storage(database_url)
    trial = add_trial(s, add_experiment(s))
    # More rows than one PostgreSQL statement takes parameters for (65535 / 6), and repeats that
    # ON CONFLICT DO NOTHING drops, also within one statement.
    steps = [*range(1, 22_001), 5, 21_999]
    with s.transaction():
        for n in steps:
            step(s, trial, n, 10 * n)
    rows = result_ops.steps_of(s, trial)
    assert len(rows) == 22_000
    assert (rows[0]["step_id"], rows[0]["total_batches"]) == (1, 10) and rows[-1]["total_batches"] == 220_000


def test_many_trials_journal_events_and_saves_of_one_transaction_land_in_their_columns(
    database_url: str,
) -> None:
    """The writes deferred as tuples (`Positional`), many rows of each in one transaction."""
    s = open_storage(database_url)
    exp_id = add_experiment(s)
    with s.transaction():
        for n in range(300):
            trial_ops.create_trial(s, exp_id, f"r{n}", f'{{"n": {n}}}', n, "{}")
            searcher_ops.journal_event(s, exp_id, n + 1, f'["e{n}"]')
    ids = {r["request_id"]: r["id"] for r in trial_ops.newest_trials(s, exp_id, 300)}
    with s.transaction():
        for n in (7, 8):
            trial_ops.save_trial(
                s,
                ids[f"r{n}"],
                total_batches=n,
                checkpoint_uuid=f"c{n}",
                checkpoint_batches=n,
                checkpoint_step=1,
                sequencer_json="{}",
                best_validation=n / 2,
                waiting_on=None,
            )
    row = trial_ops.trial(s, ids["r7"])
    assert (row["hparams_json"], row["seed"], row["state"]) == ('{"n": 7}', 7, "ACTIVE")  # type: ignore[index]
    assert (row["total_batches"], row["latest_checkpoint_uuid"], row["best_validation"]) == (7, "c7", 3.5)  # type: ignore[index]
    assert searcher_ops.events_after(s, exp_id, 298) == [(299, '["e298"]'), (300, '["e299"]')]
    s.close()


def test_a_start_time_is_the_first_runs() -> None:
    s = open_storage(":memory:")
    trial = add_trial(s, add_experiment(s))
    trial_ops.start_run(s, trial, 1, "{}", "first", ("a1",))
    trial_ops.start_run(s, trial, 2, "{}", "second", ("a2", "a3"))
    row = trial_ops.trial(s, trial)
    assert (row["run_id"], row["start_time"]) == (2, "first")  # type: ignore[index]
    assert row["agents"] == "a2,a3"  # type: ignore[index]  # the latest run's, chief first


# SQL as pedl writes it: keywords in capitals (English prose like "select ... from" is not SQL).
SQL = re.compile(
    r"\bINSERT\s+INTO\b|\bSELECT\b.*\bFROM\b|\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b", re.DOTALL
)


def sql_strings(path: Path) -> list[str]:
    """String literals in `path` that read as SQL (implicitly joined literals count as one)."""
    tree = ast.parse(path.read_text(), str(path))
    return [
        f"{path}:{node.lineno}: {node.value[:70]!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value)
    ]


def test_no_sql_outside_the_storage_layer() -> None:
    storage = ROOT / "services" / "scheduler" / "storage"
    sources = [
        p
        for top in ("services", "sdk")
        for p in sorted((ROOT / top).rglob("*.py"))
        if storage not in p.parents and "_pb2" not in p.name
    ]
    assert len(sources) > 100  # the scan sees the code it guards
    assert [hit for p in sources for hit in sql_strings(p)] == []


def test_the_sql_check_sees_statements_split_over_lines_and_not_prose(tmp_path: Path) -> None:
    source = tmp_path / "room.py"
    source.write_text(
        'Q = (\n    "SELECT id "\n    "FROM trials WHERE id = ?"\n)\n'
        'U = "UPDATE trials SET state = ?"\n'
        'DOC = "select the trial from the list; insert into the queue"\n'
    )
    hits = sql_strings(source)
    assert len(hits) == 2 and "SELECT id FROM trials" in hits[0] and "UPDATE trials" in hits[1]


def test_a_server_shutdown_while_a_write_pipeline_is_busy_counts_as_a_lost_connection() -> None:
    """The server ends the session mid-pipeline; leaving the pipeline then fails with a second error
    before psycopg marks the connection broken. Both mean the connection is gone, not a bug to log."""
    import psycopg

    from pedl_scheduler.storage.driver_errors import driver_lost

    try:
        try:
            raise psycopg.errors.AdminShutdown("terminating connection due to administrator command")
        except psycopg.Error:
            raise psycopg.OperationalError("cannot exit pipeline mode while busy") from None
    except psycopg.OperationalError as busy:
        assert driver_lost(busy)
    assert not driver_lost(ValueError("a bug in our own code"))
