"""A small synchronous SQL layer: connection, migrations, transactions.

Statements use `?` placeholders and the SQL that SQLite and PostgreSQL share. Calls are
short and made from the scheduler's event loop; a batch of agent messages is one transaction.

Writes whose result nobody needs can be deferred (`defer`, and flush hooks that write state
last changed in memory): they run, consecutive identical statements as one `executemany`,
before the next read or write and at commit, so the transaction's outcome is the same as
running them in place while the database sees one batch instead of a round trip each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import groupby
from operator import itemgetter
from typing import Any

from pedl_scheduler.db.driver import Driver, Row, Writes
from pedl_scheduler.db.schema import MIGRATIONS, render

__all__ = ["Database", "Row", "open_database"]


class Database:
    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self._depth = 0
        self.url = driver.url
        self.dialect = driver.dialect
        self._pending: list[tuple[str, tuple[Any, ...]]] = []
        self._flush_hooks: list[Callable[[], None]] = []
        self._flushing = False

    @property
    def in_transaction(self) -> bool:
        return self._depth > 0

    def add_flush_hook(self, hook: Callable[[], None]) -> None:
        """`hook` runs at every flush, first: it `defer`s the writes of state it keeps in memory."""
        self._flush_hooks.append(hook)

    def defer(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Runs a write later in this transaction (at once outside one); see the module docstring."""
        self._pending.append((sql, tuple(params)))
        if self._depth == 0 and not self._flushing:
            self.flush()

    def flush(self) -> None:
        """Runs the deferred writes now (in a transaction of their own when none is open)."""
        writes = self._take_writes()
        if not writes:
            return
        if self._depth:
            self._driver.write(writes)
            return
        self._driver.begin()
        try:
            self._driver.commit(writes)
        except BaseException:
            self._driver.rollback()
            raise

    def _take_writes(self) -> Writes:
        """Runs the flush hooks, then takes the deferred writes, consecutive identical ones grouped."""
        if self._flushing:
            return []
        self._flushing = True
        try:
            for hook in self._flush_hooks:
                hook()
        finally:
            self._flushing = False
        pending, self._pending = self._pending, []
        return [(sql, [params for _, params in group]) for sql, group in groupby(pending, key=itemgetter(0))]

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
            if self._depth == 1:
                # The last deferred writes and the commit go together: one round trip where the
                # backend allows it.
                self._driver.commit(self._take_writes())
        except BaseException:
            if self._depth == 1:
                self._pending.clear()
                self._driver.rollback()
            raise
        finally:
            self._depth -= 1

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Runs a statement; returns the new row id for inserts into tables with an `id` key, else 0."""
        self.flush()
        return self._driver.execute(sql, params)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        self.flush()
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
