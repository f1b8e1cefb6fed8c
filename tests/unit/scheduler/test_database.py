"""The versioned schema: fresh databases migrate, newer ones are refused, steps are stored once."""

import sqlite3

import pytest

from pedl_scheduler.db import open_database
from pedl_scheduler.db.schema import MIGRATIONS


def test_a_fresh_database_gets_the_latest_schema_and_reopens(tmp_path) -> None:
    path = tmp_path / "pedl.db"
    db = open_database(str(path))
    db.close()
    db = open_database(f"sqlite:///{path}")
    assert db.query_one("SELECT MAX(version) AS v FROM schema_version")["v"] == len(MIGRATIONS)


def test_a_database_from_a_newer_pedl_is_refused(tmp_path) -> None:
    path = tmp_path / "pedl.db"
    open_database(str(path)).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_version (version) VALUES (999)")
    conn.commit()
    conn.close()
    with pytest.raises(RuntimeError, match="newer than this scheduler"):
        open_database(str(path))


def test_transactions_roll_back_together(tmp_path) -> None:
    db = open_database(str(tmp_path / "pedl.db"))
    with pytest.raises(ZeroDivisionError), db.transaction():
        db.execute(
            "INSERT INTO experiments (state, config_yaml, config_json, model_definition, "
            "model_definition_name, seed, created_at) VALUES ('ACTIVE', '', '{}', ?, 'm', 1, 'now')",
            (b"x",),
        )
        raise ZeroDivisionError
    assert db.query("SELECT * FROM experiments") == []
