"""SQLite through the standard library: a file (WAL mode) or `:memory:`."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pedl_scheduler.db.dialect import SQLITE
from pedl_scheduler.db.driver import Row, Writes


class SqliteDriver:
    dialect = SQLITE

    def __init__(self, url: str) -> None:
        """`url` is a file path, `sqlite:///path`, or `:memory:`."""
        self.url = url
        path = url.removeprefix("sqlite:///").removeprefix("sqlite://")
        if path != ":memory:":
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
            path = str(Path(path).expanduser())
        # isolation_level=None: the module opens no implicit transactions; `begin` does it.
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: a commit survives a crash of the scheduler, only an OS crash can lose the last ones.
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA foreign_keys=ON")

    def execute(self, sql: str, params: Sequence[Any]) -> int:
        return self._conn.execute(sql, tuple(params)).lastrowid or 0

    def write(self, writes: Writes) -> None:
        for sql, rows in writes:
            if len(rows) == 1:
                self._conn.execute(sql, tuple(rows[0]))
            else:
                self._conn.executemany(sql, rows)

    def query(self, sql: str, params: Sequence[Any]) -> list[Row]:
        cursor = self._conn.execute(sql, tuple(params))
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]

    def begin(self) -> None:
        self._conn.execute("BEGIN")

    def commit(self, writes: Writes = ()) -> None:
        self.write(writes)
        self._conn.commit()

    def rollback(self) -> None:
        self._conn.rollback()

    @contextmanager
    def migration_lock(self) -> Iterator[None]:
        yield

    def schema_changed(self) -> None:
        pass

    def close(self) -> None:
        self._conn.close()
