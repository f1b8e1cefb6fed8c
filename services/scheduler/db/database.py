"""A small synchronous SQL layer: connection, migrations, transactions.

Statements use `?` placeholders and the SQL that SQLite and PostgreSQL share. Calls are
short and made from the scheduler's event loop; a step result is one small transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pedl_scheduler.db.schema import MIGRATIONS

Row = dict[str, Any]


class Database:
    def __init__(self, connection: sqlite3.Connection, url: str) -> None:
        self._conn = connection
        self._depth = 0
        self.url = url

    def migrate(self) -> int:
        """Applies every migration not yet applied; returns the schema version."""
        self._conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = self._conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
        current = row[0] or 0
        if current > len(MIGRATIONS):
            raise RuntimeError(
                f"database {self.url} has schema version {current}, newer than this scheduler's "
                f"{len(MIGRATIONS)}: upgrade pedl"
            )
        for version in range(current + 1, len(MIGRATIONS) + 1):
            with self.transaction():
                for statement in MIGRATIONS[version - 1]:
                    self._conn.execute(statement)
                self._conn.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
        self._conn.commit()
        return len(MIGRATIONS)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Groups statements so that they land together or not at all (nesting joins the outer one)."""
        self._depth += 1
        try:
            if self._depth == 1:
                self._conn.execute("BEGIN")
            yield
        except BaseException:
            if self._depth == 1:
                self._conn.rollback()
            raise
        else:
            if self._depth == 1:
                self._conn.commit()
        finally:
            self._depth -= 1

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Runs a statement; returns the new row id for inserts."""
        cursor = self._conn.execute(sql, tuple(params))
        if self._depth == 0:
            self._conn.commit()
        return cursor.lastrowid or 0

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        cursor = self._conn.execute(sql, tuple(params))
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]

    def query_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None

    def close(self) -> None:
        self._conn.close()


def open_database(url: str) -> Database:
    """`url` is a file path, `sqlite:///path`, or `:memory:`; the schema is brought up to date."""
    if url.startswith(("postgres://", "postgresql://")):
        raise ValueError(f"--db {url}: PostgreSQL support is not part of this build; use a SQLite path")
    path = url.removeprefix("sqlite:///").removeprefix("sqlite://")
    if path != ":memory:":
        Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        path = str(Path(path).expanduser())
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    db = Database(conn, url)
    db.migrate()
    return db
