"""Alembic migrations, both ways, on SQLite and PostgreSQL; a pre-Alembic v5 database upgrades in place.

The v5 fixtures (`fixtures/schema_v5_*.sql`) were written by the hand-kept migration list that
Alembic replaced, with a few rows in every table.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from pedl_scheduler.storage import migrate, open_storage
from pedl_scheduler.storage.engine import make_engine
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import results as result_ops
from pedl_scheduler.storage.ops import searcher as searcher_ops
from pedl_scheduler.storage.ops import trials as trial_ops
from pedl_scheduler.storage.ops import users as user_ops
from pedl_scheduler.storage.tables import metadata

FIXTURES = Path(__file__).with_name("fixtures")
# Every revision file, in order: a new migration is tested both ways without editing this list.
VERSIONS = Path(migrate.__file__).parent / "migrations" / "versions"
REVISIONS = sorted(p.name[1:5] for p in VERSIONS.glob("v[0-9][0-9][0-9][0-9]_*.py"))


def schema_differences(url: str) -> list:
    """How the database's tables differ from `tables.py` (empty: they agree)."""
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return compare_metadata(MigrationContext.configure(connection), metadata)
    finally:
        engine.dispose()


def tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return set(inspect(connection).get_table_names())
    finally:
        engine.dispose()


def test_the_newest_revision_makes_the_tables_as_declared(database_url: str) -> None:
    open_storage(database_url).close()
    assert schema_differences(database_url) == []


def test_each_revision_downgrades_and_upgrades_again(database_url: str) -> None:
    engine = make_engine(database_url)
    try:
        assert migrate.upgrade(engine) == migrate.head() == REVISIONS[-1]
        for previous in reversed(["base", *REVISIONS[:-1]]):
            assert migrate.downgrade(engine, "-1") == previous
        assert tables(database_url) == {"alembic_version"}  # everything a revision made is gone
        for revision in REVISIONS:
            assert migrate.upgrade(engine, "+1") == revision
    finally:
        engine.dispose()
    assert schema_differences(database_url) == []
    s = open_storage(database_url)  # and the scheduler works on the result
    exp_id = experiment_ops.create_experiment(
        s,
        config_yaml="",
        config_json="{}",
        model_definition=b"m",
        model_definition_name="m",
        seed=1,
        created_at="now",
        owner="bob",
    )
    assert experiment_ops.experiment_owner(s, exp_id) == "bob"
    s.close()


def test_a_downgrade_drops_what_its_revision_added(database_url: str) -> None:
    engine = make_engine(database_url)
    try:
        migrate.upgrade(engine)
        migrate.downgrade(engine, "0004")
        assert "searcher_events" not in tables(database_url)
        with engine.connect() as connection:
            columns = {c["name"] for c in inspect(connection).get_columns("experiments")}
        assert "searcher_seq" not in columns and "owner" in columns
    finally:
        engine.dispose()


def test_downgrading_0006_drops_the_warm_start_column(database_url: str) -> None:
    engine = make_engine(database_url)
    try:
        migrate.upgrade(engine)
        migrate.downgrade(engine, "0005")
        with engine.connect() as connection:
            columns = {c["name"] for c in inspect(connection).get_columns("experiments")}
        assert "warm_start_checkpoint_uuid" not in columns and "searcher_seq" in columns
    finally:
        engine.dispose()


def load_v5(url: str, dialect: str) -> None:
    statements = [
        st.strip()
        for st in (FIXTURES / f"schema_v5_{dialect}.sql").read_text().split("\n;")
        if st.strip() and not all(line.startswith("--") for line in st.strip().splitlines())
    ]
    if dialect == "sqlite":
        import sqlite3

        with sqlite3.connect(url) as conn:
            for st in statements:
                conn.execute(st)
        conn.close()
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for st in statements:
            conn.execute(st)


def test_a_database_made_before_alembic_at_v5_upgrades_in_place(database_url: str) -> None:
    dialect = "postgresql" if database_url.startswith("postgresql") else "sqlite"
    load_v5(database_url, dialect)
    s = open_storage(database_url)
    assert "schema_version" not in tables(database_url)
    (exp,) = experiment_ops.live_experiments(s)
    assert (exp["id"], exp["owner"], exp["searcher_seq"]) == (1, "alice", 2)
    assert experiment_ops.model_definition(s, 1)["model_definition"] == b"model"  # type: ignore[index]
    assert [(t["id"], t["parent_trial_id"], t["waiting_on_trial_id"]) for t in trial_ops.trials_of(s, 1)] == [
        (1, None, None),
        (2, 1, 1),
    ]
    assert [r["total_batches"] for r in result_ops.steps_of(s, 1)] == [100, 200]
    assert [r["run_id"] for r in result_ops.steps_of(s, 1)] == [1, 1]  # rows from before run ids: run 1
    assert [r["message"] for r in result_ops.logs_after(s, 1, 0)] == ["hello from v5"]
    assert result_ops.experiment_checkpoints(s, 1) == [{"uuid": "c1", "trial_id": 1, "total_batches": 200}]
    assert searcher_ops.events_after(s, 1, 0) == [(2, '["on_trial_created", "r2"]')]
    assert user_ops.session_user(s, "th")["username"] == "alice"  # type: ignore[index]
    # New rows get ids after the old ones.
    trial_ops.create_trial(s, 1, "r3", "{}", 5, "{}")
    assert trial_ops.newest_trials(s, 1, 1) == [{"id": 3, "request_id": "r3"}]
    s.close()
    s = open_storage(database_url)  # reopening finds it current
    s.close()
    differences = schema_differences(database_url)
    if dialect == "sqlite":
        # The old SQLite schema said DOUBLE PRECISION (stored as REAL, the same 8-byte float) and
        # left its TEXT primary keys nullable, as SQLite allows; neither changes what is stored.
        differences = [
            d
            for [d] in differences
            if not (d[0] == "modify_type" and str(d[5]) == "REAL")
            and not (
                d[0] == "modify_nullable"
                and (d[2], d[3]) in {("checkpoints", "uuid"), ("sessions", "token_hash")}
            )
        ]
    assert differences == []


def test_a_pre_alembic_database_from_a_newer_pedl_is_refused(tmp_path) -> None:
    import sqlite3

    path = tmp_path / "newer.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO schema_version (version) VALUES (6)")
    conn.close()
    with pytest.raises(RuntimeError, match="schema version 6, newer than this scheduler's"):
        open_storage(str(path))


def test_the_command_line_moves_a_database_between_revisions(tmp_path, capsys) -> None:
    url = str(tmp_path / "cli.db")
    migrate.main(["--db", url, "upgrade"])
    migrate.main(["--db", url, "downgrade", "0003"])
    migrate.main(["--db", url, "current"])
    assert capsys.readouterr().out.split() == [migrate.head(), "0003", "0003"]
