"""A small synchronous SQL layer: connection, migrations, transactions.

Statements use `?` placeholders and the SQL that SQLite and PostgreSQL share. Calls are
short and made from the scheduler's event loop; a step result is one small transaction.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from pedl_scheduler.db.driver import Driver, Row
from pedl_scheduler.db.schema import MIGRATIONS, render

__all__ = ["Database", "Row", "open_database"]


class Database:
    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self._depth = 0
        self.url = driver.url
        self.dialect = driver.dialect

    def migrate(self) -> int:
        """Applies every migration not yet applied; returns the schema version."""
        with self._driver.migration_lock():
            self.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            current = self.query_one("SELECT MAX(version) AS v FROM schema_version")["v"] or 0
            if current > len(MIGRATIONS):
                raise RuntimeError(
                    f"database {self.url} has schema version {current}, newer than this scheduler's "
                    f"{len(MIGRATIONS)}: upgrade pedl"
                )
            for version in range(current + 1, len(MIGRATIONS) + 1):
                with self.transaction():
                    for statement in render(version, self.dialect):
                        self.execute(statement)
                    self.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
            self._driver.schema_changed()
        return len(MIGRATIONS)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Groups statements so that they land together or not at all (nesting joins the outer one)."""
        self._depth += 1
        try:
            if self._depth == 1:
                self._driver.begin()
            yield
        except BaseException:
            if self._depth == 1:
                self._driver.rollback()
            raise
        else:
            if self._depth == 1:
                self._driver.commit()
        finally:
            self._depth -= 1

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Runs a statement; returns the new row id for inserts into tables with an `id` key, else 0."""
        return self._driver.execute(sql, params)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return self._driver.query(sql, params)

    def query_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None

    def close(self) -> None:
        self._driver.close()


def open_database(url: str) -> Database:
    """`url` is `postgresql://` / `postgres://`, a file path, `sqlite:///path`, or `:memory:`.

    The schema is brought up to date before this returns.
    """
    if url.startswith(("postgres://", "postgresql://")):
        from pedl_scheduler.db.postgres_driver import PostgresDriver  # psycopg only when asked for

        driver: Driver = PostgresDriver(url)
    else:
        from pedl_scheduler.db.sqlite_driver import SqliteDriver

        driver = SqliteDriver(url)
    db = Database(driver)
    try:
        db.migrate()
    except BaseException:
        db.close()
        raise
    return db
