"""The scheduler's one database connection: transactions, deferred writes, lost-connection handling.

Calls are short and made from the scheduler's event loop; a batch of agent messages is one
transaction (`transaction()`, nesting joins the outer one). Outside a transaction each call is a
transaction of its own.

Writes whose result nobody needs can be deferred (`defer`, and flush hooks that write state last
changed in memory): they run, consecutive writes of one statement as one executemany, before the
next read or write and at commit, so the transaction's outcome is the same as running them in place
while the database sees one batch instead of a round trip each (on PostgreSQL, many rows of one
INSERT as multi-row statements: SQLAlchemy's insertmanyvalues).

A lost PostgreSQL connection never hangs the scheduler silently: the failed call raises
`DatabaseUnavailable` (the statement may or may not have run; a transaction in progress is rolled
back by the server), and the next call made outside a transaction reconnects, however many
reconnects failed before (a restarted server is picked up by itself). A connection the server
ended while it sat idle (a restart, a crash: the socket is readable with no query out) is
replaced before a unit of work starts on it, and a unit of work whose connection could not be made
is retried a bounded number of times, since neither case ran a statement. `reachable` says whether
the last attempt reached the database (the scheduler's health check reports it).
"""

from __future__ import annotations

import select
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import groupby
from operator import itemgetter
from typing import Any, TypeVar

from sqlalchemy import Connection, CursorResult, Engine, Executable, Insert, RootTransaction, exc, text

from pedl_scheduler.storage.compiled import MultiRowInsert, RawWrite, dialect_class
from pedl_scheduler.storage.driver_errors import broken as _broken
from pedl_scheduler.storage.driver_errors import driver_lost as _driver_lost
from pedl_scheduler.storage.driver_errors import sqlite_locked as _locked
from pedl_scheduler.storage.engine import SQLITE_BUSY_TIMEOUT, redact

# Attempts at a unit of work whose connection could not be made, and the waits between them: short,
# since the scheduler's event loop waits with it.
CONNECT_ATTEMPTS = 3
CONNECT_RETRY_WAIT = 0.1

# PostgreSQL takes at most 65535 parameters in one statement; a few columns times this stays under.
MAX_ROWS_PER_INSERT = 1024

Row = dict[str, Any]
Params = Mapping[str, Any]
T = TypeVar("T")


class DatabaseUnavailable(RuntimeError):
    """The connection to the database server is gone; the statement may or may not have run.

    The failed call raises this at once instead of hanging; the next call outside a
    transaction reconnects (and raises this again while the server stays unreachable).
    """


class Storage:
    """One connection and its unit-of-work bookkeeping; the operations in `storage.ops` run on it."""

    def __init__(self, engine: Engine, url: str) -> None:
        self.engine = engine
        self.url = redact(url)  # safe to log: no password
        self.dialect = engine.dialect.name  # "sqlite" or "postgresql"
        self.commits = 0  # transactions committed, for tests that count round trips
        self._depth = 0
        self._tx: RootTransaction | None = None
        self._pending: list[tuple[Executable | Positional, Params | tuple[Any, ...]]] = []
        self._flush_hooks: list[Callable[[], None]] = []
        self._flushing = False
        self._closed = False
        self._raw_open = False  # a transaction `_commit_raw` began on the driver's connection
        self._raw_cursor: Any = None  # psycopg.RawCursor, once a multi-row INSERT runs
        self._numbered: Any = None  # the PostgreSQL dialect with `$n` placeholders
        self._positional_dialect: Any = None  # `?` (SQLite) or `%s` (PostgreSQL) placeholders
        self._multi: dict[
            tuple[Insert, tuple[str, ...], int, bool], MultiRowInsert
        ] = {}  # by dict or tuple rows
        self._raw: dict[tuple[Executable | Positional, tuple[str, ...]], RawWrite] = {}
        self.reachable = True  # whether the last attempt reached the database
        # Called with the reason when the database goes away under a transaction that had written (or
        # was to write) state the caller keeps in memory too: memory and database now disagree.
        self.on_lost_writes: Callable[[str], None] | None = None
        self._tx_wrote = False
        self._conn = self._connect()

    # ---- connection ------------------------------------------------------------------------

    def _connect(self) -> Connection:
        try:
            conn = self.engine.connect()
        except exc.DBAPIError as e:
            self.reachable = False
            raise self._unavailable(e, connecting=True) from e
        self.reachable = True
        return conn

    def _usable(self) -> bool:
        """False for a connection closed by a failed reconnect, invalidated, or ended by the server."""
        conn = self._conn
        if conn.closed or conn.invalidated:
            return False
        if self.dialect != "postgresql" or self._raw_open:
            return True
        try:  # an idle PostgreSQL connection receives nothing unless the server is ending it
            fd = _driver(conn).fileno()
            return not select.select([fd], [], [], 0)[0]
        except Exception:  # closed under us
            return False

    def _reconnect_if_lost(self) -> None:
        """Between transactions, replaces a connection that is gone (see `_usable`)."""
        if self._tx is not None or self._closed or self._usable():
            return
        if not self._conn.closed:
            self._conn.invalidate()
            self._conn.close()
        attempt = 1
        while True:
            try:
                self._conn = self._connect()
                return
            except DatabaseUnavailable:
                if attempt >= CONNECT_ATTEMPTS or self._depth:
                    raise
            time.sleep(CONNECT_RETRY_WAIT * attempt)
            attempt += 1

    def ping(self) -> bool:
        """Whether the database answers now (reconnecting when needed); for the health check."""
        if self._depth:
            return self.reachable
        try:
            self.scalar(text("SELECT 1"))
        except DatabaseUnavailable:
            return False
        return True

    def _unavailable(self, e: exc.DBAPIError, connecting: bool = False) -> DatabaseUnavailable:
        cause = str(e.orig).strip() if e.orig is not None else str(e)
        if connecting:
            return DatabaseUnavailable(f"cannot connect to {self._server()} at {self.url}: {cause}")
        return DatabaseUnavailable(
            f"lost the connection to {self._server()} at {self.url} (the statement may not have run): {cause}"
        )

    def _locked(self, e: BaseException | None) -> DatabaseUnavailable:
        return DatabaseUnavailable(
            f"SQLite's file {self.url} stayed locked by another process past the {SQLITE_BUSY_TIMEOUT:g} s "
            f"wait (nothing was written): {e}"
        )

    def _server(self) -> str:
        return "PostgreSQL" if self.dialect == "postgresql" else "SQLite"

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Reconnects a lost connection between transactions; turns a loss into DatabaseUnavailable."""
        self._reconnect_if_lost()
        try:
            yield
        except exc.DBAPIError as e:
            if e.connection_invalidated or self._conn.invalidated:
                self.reachable = False
                raise self._unavailable(e) from e
            if isinstance(e, exc.OperationalError) and self._conn.closed is False and _broken(self._conn):
                self.reachable = False
                raise self._unavailable(e) from e
            if _locked(e.orig):
                raise self._locked(e.orig) from e
            raise
        except Exception as e:  # from the driver itself, on the deferred-write path
            if _locked(e):
                raise self._locked(e) from e
            gone = self.dialect == "postgresql" and (_broken(self._conn) or _driver_lost(e))
            if gone and not self._conn.closed:
                self._conn.invalidate(e)
                self.reachable = False
                raise DatabaseUnavailable(
                    f"lost the connection to PostgreSQL at {self.url} (the statement may not have run): {e}"
                ) from e
            raise

    def _within(self, work: Callable[[Connection], T]) -> T:
        """Runs `work` in the open transaction, or in one of its own."""
        self.flush()
        with self._guard():
            if self._tx is not None:
                return work(self._conn)
            if self._depth:  # the transaction's first statement opens it
                self._tx = self._conn.begin()
                return work(self._conn)
            with self._conn.begin():
                return work(self._conn)

    # ---- statements ------------------------------------------------------------------------

    def rows(self, statement: Executable, params: Params | None = None) -> list[Row]:
        """The rows a query returns, as dicts keyed by column label."""
        return self._within(lambda c: _dicts(c.execute(statement, params or {})))

    def rows_raw(self, statement: Executable, params: Params) -> list[Row]:
        """`rows` through the driver's cursor, for reads of many rows on a hot path (see callers)."""
        raw = self._raw.get((statement, tuple(params)))
        if raw is None:
            raw = self._raw[(statement, tuple(params))] = RawWrite(statement, params, self.engine)

        def read(conn: Connection) -> list[Row]:
            cursor = _driver(conn).cursor()
            cursor.execute(raw.sql, raw.row(params))
            keys = [d[0] for d in cursor.description]
            return [dict(zip(keys, values, strict=True)) for values in cursor.fetchall()]

        return self._within(read)

    def row(self, statement: Executable, params: Params | None = None) -> Row | None:
        found = self.rows(statement, params)
        return found[0] if found else None

    def scalar(self, statement: Executable, params: Params | None = None) -> Any:
        """The first column of the first row (None when there is no row): counts, and ids RETURNING gives."""
        return self._within(lambda c: c.execute(statement, params or {}).scalar())

    def run(self, statement: Executable, params: Params | Sequence[Params] | None = None) -> None:
        """A write whose outcome the caller needs before going on (use `defer` otherwise)."""
        self._tx_wrote = self._tx_wrote or self._depth > 0
        self._within(lambda c: c.execute(statement, params or {}))

    def will_write(self) -> None:
        """Marks the open transaction as one that carries writes (an agent's results) even before it
        makes them: losing the database under it loses them (see `on_lost_writes`)."""
        self._tx_wrote = self._depth > 0

    def defer(self, statement: Executable | Positional, params: Params | tuple[Any, ...]) -> None:
        """Runs a write later in this transaction (at once outside one); see the module docstring.

        A `Positional` statement takes its row as a tuple in its `keys` order."""
        self._pending.append((statement, params))
        if self._depth == 0 and not self._flushing:
            self.flush()

    def add_flush_hook(self, hook: Callable[[], None]) -> None:
        """`hook` runs at every flush, first: it `defer`s the writes of state it keeps in memory."""
        self._flush_hooks.append(hook)

    # ---- transactions ----------------------------------------------------------------------

    @property
    def in_transaction(self) -> bool:
        return self._depth > 0

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Groups statements so that they land together or not at all (nesting joins the outer one)."""
        self._depth += 1
        if self._depth == 1:
            self._tx_wrote = False
        try:
            yield
            if self._depth == 1:
                # The last deferred writes and the commit go together: one round trip on PostgreSQL.
                self._commit(self._take_writes())
        except BaseException as e:
            if self._depth == 1:
                lost = isinstance(e, DatabaseUnavailable) and (self._tx_wrote or bool(self._take_writes()))
                self._pending.clear()
                self._rollback()
                if lost and self.on_lost_writes is not None:
                    self.on_lost_writes(str(e))
            raise
        finally:
            self._depth -= 1

    def flush(self) -> None:
        """Runs the deferred writes now (in a transaction of their own when none is open)."""
        writes = self._take_writes()
        if not writes:
            return
        if self._depth:
            with self._guard():
                if self._tx is None:
                    self._tx = self._conn.begin()
                self._write(writes)
            return
        try:
            self._commit(writes)
        except BaseException:
            self._rollback()
            raise

    def _take_writes(self) -> list[tuple[Executable | Positional, list[Any]]]:
        """Runs the flush hooks, then takes the deferred writes, consecutive ones of a statement grouped."""
        if self._flushing:
            return []
        self._flushing = True
        try:
            for hook in self._flush_hooks:
                hook()
        finally:
            self._flushing = False
        pending, self._pending = self._pending, []
        self._tx_wrote = self._tx_wrote or (self._depth > 0 and bool(pending))
        return [
            (stmt, [params for _, params in group]) for stmt, group in groupby(pending, key=itemgetter(0))
        ]

    def _write(self, writes: Sequence[tuple[Executable | Positional, list[Any]]]) -> None:
        """Deferred writes go to the DBAPI cursor directly, as SQL SQLAlchemy compiled once per statement.

        Through `Connection.execute` they cost the results-ingest benchmark (10,000 results, 16 per
        transaction) 29 -> 48 us of scheduler CPU per result on SQLite and 50 -> 90 on PostgreSQL:
        SQLAlchemy's per-call and per-row bookkeeping, for statements whose results nobody reads.
        """
        cursor = _driver(self._conn).cursor()
        for statement, params in writes:
            if isinstance(statement, Positional):
                if not (len(params) > 1 and self._positional_rows(cursor, statement, params)):
                    self._write_positional(cursor, statement, params)
                continue
            raw = self._raw.get((statement, tuple(params[0])))
            if raw is None:
                raw = self._raw[(statement, tuple(params[0]))] = RawWrite(statement, params[0], self.engine)
            if len(params) == 1:
                cursor.execute(raw.sql, raw.row(params[0]))
            elif self.dialect == "postgresql" and isinstance(statement, Insert) and not raw.processors:
                self._insert_rows(cursor, statement, params)
            else:
                cursor.executemany(raw.sql, [raw.row(p) for p in params])

    def _positional_rows(self, cursor: Any, statement: Positional, rows: list[tuple[Any, ...]]) -> bool:
        """Many tuples of one INSERT on PostgreSQL as multi-row statements; False where not possible."""
        insert = statement.statement
        if self.dialect != "postgresql" or not isinstance(insert, Insert):
            return False
        raw = self._raw.get((insert, statement.keys))
        if raw is None:
            sample = dict(zip(statement.keys, rows[0], strict=True))
            raw = self._raw[(insert, statement.keys)] = RawWrite(insert, sample, self.engine)
        if raw.processors:
            return False
        self._insert_rows(cursor, insert, rows, statement.keys)
        return True

    def _write_positional(self, cursor: Any, statement: Positional, rows: list[tuple[Any, ...]]) -> None:
        """Tuples in the `?`s' (`%s`'s on PostgreSQL) order go to the cursor as they are (reordered and
        type-processed only where the compiled statement needs it)."""
        raw = self._raw.get((statement, statement.keys))
        if raw is None:
            if self._positional_dialect is None:
                self._positional_dialect = (
                    dialect_class(self.engine)(paramstyle="format")
                    if self.dialect == "postgresql"
                    else self.engine.dialect
                )
            sample = dict(zip(statement.keys, rows[0], strict=True))
            raw = RawWrite(statement.statement, sample, self.engine, self._positional_dialect)
            raw.positional_order(statement.keys)
            self._raw[(statement, statement.keys)] = raw
        if raw.as_is:
            if len(rows) == 1:
                cursor.execute(raw.sql, rows[0])
            else:
                cursor.executemany(raw.sql, rows)
        else:
            cursor.executemany(raw.sql, [raw.from_tuple(r) for r in rows])

    def _insert_rows(
        self, cursor: Any, statement: Insert, params: Sequence[Any], keys: tuple[str, ...] | None = None
    ) -> None:
        """Many rows of one INSERT on PostgreSQL as multi-row statements of 2^k rows (a bounded set
        of statements per INSERT, each compiled once): psycopg's executemany costs a pipeline
        message and Python work per row, +25% scheduler CPU per result in the ingest benchmark."""
        if self._raw_cursor is None:
            import psycopg  # only on PostgreSQL

            self._numbered = dialect_class(self.engine)(paramstyle="numeric_dollar")
            self._raw_cursor = psycopg.RawCursor
        cursor = self._raw_cursor(_driver(self._conn))
        first = 0
        while first < len(params):
            size = min(MAX_ROWS_PER_INSERT, 1 << ((len(params) - first).bit_length() - 1))
            columns = keys or tuple(params[first])  # tuples (`Positional`) in `keys` order, or dicts
            key = (statement, columns, size, keys is not None)
            multi = self._multi.get(key)
            if multi is None:
                multi = self._multi[key] = MultiRowInsert(statement, list(columns), size, self._numbered)
                if keys is not None:
                    multi.places = [(i, keys.index(k)) for i, k in multi.places]
            cursor.execute(multi.sql, multi.params(params[first : first + size]))
            first += size

    def _commit(self, writes: Sequence[tuple[Executable | Positional, list[Any]]]) -> None:
        """Runs `writes` and commits; on failure the transaction is left for `_rollback`."""
        with self._guard():
            if self._tx is None:
                if not writes:
                    return
                self._commit_raw(writes)
            else:
                if self.dialect == "postgresql" and writes:
                    # The writes and COMMIT in one round trip; SQLAlchemy's commit after it finds the
                    # transaction closed and sends nothing.
                    dbapi = _driver(self._conn)
                    with dbapi.pipeline():
                        self._write(writes)
                        dbapi.execute("COMMIT")
                else:
                    self._write(writes)
                self._tx.commit()
        self._tx = None
        self.commits += 1

    def _commit_raw(self, writes: Sequence[tuple[Executable | Positional, list[Any]]]) -> None:
        """A transaction of deferred writes only (most batches of agent messages) on the driver's
        connection: SQLAlchemy's Transaction objects around it cost the results-ingest benchmark
        about 4 us of scheduler CPU per result (of 37) on SQLite. On PostgreSQL, BEGIN, the writes
        and COMMIT go in one pipeline: one round trip, one WAL flush."""
        dbapi = _driver(self._conn)
        self._raw_open = True
        if self.dialect == "postgresql":
            with dbapi.pipeline():
                self._write(writes)
                dbapi.execute("COMMIT")
        else:
            dbapi.execute("BEGIN")
            self._write(writes)
            dbapi.commit()
        self._raw_open = False

    def _rollback(self) -> None:
        """Never raises for a connection that is already gone: the caller is raising a better error."""
        tx, self._tx = self._tx, None
        try:
            if self._raw_open:
                self._raw_open = False
                if not self._conn.invalidated:
                    _driver(self._conn).rollback()
            if tx is not None:
                tx.rollback()
        except Exception:
            pass  # the connection died under us; the server rolls back on its side

    def close(self) -> None:
        self._closed = True
        self._conn.close()
        self.engine.dispose()


class Positional:
    """A write whose deferred rows are tuples in `keys` order rather than dicts.

    For the hottest writes (a step and a trial save per result, a row per trial created): building
    a dict per row and taking it apart again cost 0.5-0.7 us a row. Results ingest
    (benchmarks/results_ingest.py, 10,000 results, 16 per transaction, SQLite), scheduler CPU per
    result in one run: 28-33 us with dicts, 27-28 with tuples, 26-28 before the storage layer.
    The tuple goes to the cursor as it is (SQLite's `?`s, `%s` on PostgreSQL, where many rows of one
    INSERT go as multi-row statements)."""

    __slots__ = ("statement", "keys")

    def __init__(self, statement: Executable, keys: tuple[str, ...]) -> None:
        self.statement = statement
        self.keys = keys


def _driver(conn: Connection) -> Any:
    """The driver's own connection under `conn` (psycopg's or sqlite3's)."""
    return conn.connection.driver_connection


def _dicts(result: CursorResult) -> list[Row]:
    """Rows as dicts: zipped with the keys, 3x faster than `result.mappings()` (10,000 trial ids)."""
    keys = list(result.keys())
    return [dict(zip(keys, row, strict=True)) for row in result]
