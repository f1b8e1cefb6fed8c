"""The versioned schema and SQL layer behave the same on SQLite and PostgreSQL.

Fresh databases migrate, newer ones are refused, transactions roll back together, inserts
return their ids, bytes round-trip, and `?` placeholders work on both backends.
"""

import pytest

from pedl_scheduler.db import open_database
from pedl_scheduler.db.schema import MIGRATIONS
from pedl_scheduler.db.sqltext import insert_table, multi_row_insert, numbered_rows, qmark_to_format

EXPERIMENT = (
    "INSERT INTO experiments (state, config_yaml, config_json, model_definition, "
    "model_definition_name, seed, created_at) VALUES ('ACTIVE', '', '{}', ?, 'm', 1, 'now')"
)
TRIAL = (
    "INSERT INTO trials (experiment_id, request_id, state, hparams_json, seed, sequencer_json) "
    "VALUES (?, ?, 'ACTIVE', '{}', 1, '{}')"
)
STEP = (
    "INSERT INTO steps (trial_id, step_id, total_batches, num_batches, metrics_json, end_time) "
    "VALUES (?, ?, ?, 100, '{}', 'now') ON CONFLICT DO NOTHING"
)


def test_a_fresh_database_gets_the_latest_schema_and_reopens(database_url: str) -> None:
    open_database(database_url).close()
    db = open_database(database_url)
    assert db.query_one("SELECT MAX(version) AS v FROM schema_version")["v"] == len(MIGRATIONS)
    assert db.query("SELECT version FROM schema_version") == [
        {"version": v} for v in range(1, len(MIGRATIONS) + 1)
    ]


def test_a_sqlite_url_and_a_path_open_the_same_file(tmp_path) -> None:
    path = tmp_path / "nested" / "pedl.db"
    db = open_database(str(path))
    db.execute(EXPERIMENT, (b"x",))
    db.close()
    assert len(open_database(f"sqlite:///{path}").query("SELECT id FROM experiments")) == 1


def test_a_database_from_a_newer_pedl_is_refused(database_url: str) -> None:
    db = open_database(database_url)
    db.execute("INSERT INTO schema_version (version) VALUES (999)")
    db.close()
    with pytest.raises(RuntimeError, match="newer than this scheduler"):
        open_database(database_url)


def test_transactions_roll_back_together(database_url: str) -> None:
    db = open_database(database_url)
    with pytest.raises(ZeroDivisionError), db.transaction():
        db.execute(EXPERIMENT, (b"x",))
        with db.transaction():  # nested: joins the outer one
            db.execute(EXPERIMENT, (b"y",))
        raise ZeroDivisionError
    assert db.query("SELECT * FROM experiments") == []
    with db.transaction():
        db.execute(EXPERIMENT, (b"z",))
    assert len(db.query("SELECT * FROM experiments")) == 1


def test_inserts_return_the_new_id(database_url: str) -> None:
    db = open_database(database_url)
    first = db.execute(EXPERIMENT, (b"a",))
    second = db.execute(EXPERIMENT, (b"b",))
    assert first > 0 and second > first
    trial = db.execute(TRIAL, (second, "r1"))
    row = db.query_one("SELECT experiment_id FROM trials WHERE id = ?", (trial,))
    assert row == {"experiment_id": second}


def test_on_conflict_do_nothing_keeps_the_first_row(database_url: str) -> None:
    db = open_database(database_url)
    trial = db.execute(TRIAL, (db.execute(EXPERIMENT, (b"a",)), "r1"))
    with db.transaction():
        db.execute(STEP, (trial, 1, 100))
        db.execute(STEP, (trial, 1, 100))
    assert db.query("SELECT step_id FROM steps WHERE trial_id = ?", (trial,)) == [{"step_id": 1}]


def test_deferred_writes_land_with_their_transaction_in_order_and_are_seen_by_its_reads(
    database_url: str,
) -> None:
    db = open_database(database_url)
    trial = db.execute(TRIAL, (db.execute(EXPERIMENT, (b"a",)), "r1"))
    with db.transaction():
        for step in range(1, 6):  # one executemany
            db.defer(STEP, (trial, step, 100 * step))
        db.defer("UPDATE trials SET total_batches = ? WHERE id = ?", (500, trial))
        assert db.query_one("SELECT COUNT(*) AS n FROM steps")["n"] == 5  # flushed before the read
        db.defer(STEP, (trial, 6, 600))
    assert [r["total_batches"] for r in db.query("SELECT total_batches FROM steps ORDER BY step_id")] == [
        100 * s for s in range(1, 7)
    ]
    assert db.query_one("SELECT total_batches FROM trials")["total_batches"] == 500
    with pytest.raises(ZeroDivisionError), db.transaction():
        db.defer(STEP, (trial, 7, 700))
        raise ZeroDivisionError
    assert db.query_one("SELECT COUNT(*) AS n FROM steps")["n"] == 6
    db.defer(STEP, (trial, 8, 800))  # outside a transaction: written at once
    assert db.query_one("SELECT COUNT(*) AS n FROM steps")["n"] == 7


def test_flush_hooks_write_state_kept_in_memory_last_and_once(database_url: str) -> None:
    db = open_database(database_url)
    trial = db.execute(TRIAL, (db.execute(EXPERIMENT, (b"a",)), "r1"))
    state = {"batches": 0, "dirty": False}

    def hook() -> None:
        if state["dirty"]:
            state["dirty"] = False
            db.defer("UPDATE trials SET total_batches = ? WHERE id = ?", (state["batches"], trial))

    db.add_flush_hook(hook)
    with db.transaction():
        for batches in (10, 20, 30):
            state["batches"], state["dirty"] = batches, True
    assert db.query_one("SELECT total_batches FROM trials")["total_batches"] == 30


def test_bytes_round_trip(database_url: str) -> None:
    payload = bytes(range(256)) * 1000
    db = open_database(database_url)
    exp_id = db.execute(EXPERIMENT, (payload,))
    row = db.query_one("SELECT model_definition FROM experiments WHERE id = ?", (exp_id,))
    assert bytes(row["model_definition"]) == payload


def test_values_keep_their_types(database_url: str) -> None:
    db = open_database(database_url)
    trial = db.execute(TRIAL, (db.execute(EXPERIMENT, (b"a",)), "r1"))
    db.execute("UPDATE trials SET best_validation = ?, total_batches = ? WHERE id = ?", (0.25, 2**40, trial))
    row = db.query_one(
        "SELECT best_validation, total_batches, (SELECT COUNT(*) FROM steps) AS n, "
        "CASE WHEN start_time = '' THEN ? ELSE start_time END AS started FROM trials WHERE id = ?",
        ("now", trial),
    )
    assert row == {"best_validation": 0.25, "total_batches": 2**40, "n": 0, "started": "now"}
    db.execute("UPDATE trials SET best_validation = ? WHERE id = ?", (None, trial))
    assert db.query_one("SELECT best_validation FROM trials")["best_validation"] is None


def test_question_marks_and_percents_in_literals_are_left_alone(database_url: str) -> None:
    db = open_database(database_url)
    row = db.query_one("SELECT '?' AS q, 'a%b' AS p, ? AS v", ("x",))
    assert row == {"q": "?", "p": "a%b", "v": "x"}


def test_placeholders_are_rewritten_outside_literals_only() -> None:
    assert qmark_to_format("SELECT ? WHERE a = '?%' AND \"b?\" LIKE 'x%' -- ?%\n AND c % ?") == (
        "SELECT %s WHERE a = '?%%' AND \"b?\" LIKE 'x%%' -- ?%%\n AND c %% %s"
    )
    assert qmark_to_format("SELECT 'it''s ?', ?") == "SELECT 'it''s ?', %s"


def test_the_insert_target_is_found_unless_returning_is_given() -> None:
    assert insert_table("  insert into Trials (a) VALUES (?)") == "trials"
    assert insert_table("INSERT INTO steps (a) VALUES (?) RETURNING a") is None
    assert insert_table("UPDATE trials SET a = ?") is None


def test_many_deferred_rows_of_one_insert_land_as_given_duplicates_and_all(database_url: str) -> None:
    db = open_database(database_url)
    trial = db.execute(TRIAL, (db.execute(EXPERIMENT, (b"a",)), "r1"))
    # More rows than one PostgreSQL statement takes parameters for (65535 / 3), and repeats that
    # ON CONFLICT DO NOTHING drops, also within one statement.
    steps = [*range(1, 22_001), 5, 21_999]
    with db.transaction():
        for step in steps:
            db.defer(STEP, (trial, step, 10 * step))
    rows = db.query("SELECT step_id, total_batches FROM steps ORDER BY step_id")
    assert len(rows) == 22_000
    assert rows[0] == {"step_id": 1, "total_batches": 10} and rows[-1]["total_batches"] == 220_000


def test_a_multi_row_insert_repeats_its_row_with_numbered_placeholders() -> None:
    shape = multi_row_insert(STEP)
    assert shape is not None
    assert numbered_rows(*shape, 2) == (
        "INSERT INTO steps (trial_id, step_id, total_batches, num_batches, metrics_json, end_time) "
        "VALUES ($1, $2, $3, 100, '{}', 'now'), ($4, $5, $6, 100, '{}', 'now') ON CONFLICT DO NOTHING"
    )
    assert multi_row_insert("UPDATE trials SET a = ? WHERE id = ?") is None
    assert multi_row_insert("INSERT INTO t (a) VALUES ('?', ?)") is None  # a ? in a literal
    assert multi_row_insert("INSERT INTO t (a) SELECT ? WHERE 1 = 1") is None
    assert multi_row_insert("INSERT INTO t (a) VALUES (?) RETURNING id") is None


def test_a_database_at_an_older_version_is_migrated_forward(tmp_path) -> None:
    import sqlite3

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    from pedl_scheduler.db.dialect import SQLITE
    from pedl_scheduler.db.schema import render

    for statement in render(1, SQLITE):
        conn.execute(statement)
    conn.execute("INSERT INTO schema_version (version) VALUES (1)")
    conn.commit()
    conn.close()
    db = open_database(str(path))
    assert db.query_one("SELECT MAX(version) AS v FROM schema_version")["v"] == len(MIGRATIONS)
    db.query("SELECT parent_trial_id FROM trials")
