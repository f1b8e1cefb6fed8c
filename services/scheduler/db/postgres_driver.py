"""PostgreSQL through psycopg 3: one connection, autocommit outside `begin`/`commit`.

A lost connection never hangs the scheduler silently: libpq keepalives and a TCP user
timeout bound how long a dead server or network can block a call, the failed call raises
`DatabaseUnavailable` (the statement may or may not have run; a transaction in progress is
rolled back by the server), and the next call made outside a transaction reconnects.

Each commit waits for PostgreSQL to flush its WAL, which bounds transactions to the disk's
fsync rate; the scheduler therefore commits each batch of agent messages as one transaction.
`BEGIN` goes out with a transaction's first statement, and its deferred writes (a multi-row
statement per INSERT, executemany for the rest) and `COMMIT` go in one pipeline: a batch costs
one round trip and one flush.
`?options=-c%20synchronous_commit%3Doff` in the URL trades the last few hundred milliseconds of
commits on a PostgreSQL crash (never consistency) for no flush wait.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row

from pedl_scheduler.db.dialect import POSTGRES
from pedl_scheduler.db.driver import Row, Writes
from pedl_scheduler.db.errors import DatabaseUnavailable
from pedl_scheduler.db.sqltext import (
    MAX_PARAMETERS,
    insert_table,
    multi_row_insert,
    numbered_rows,
    qmark_to_format,
)

MIGRATION_LOCK_KEY = 0x7065646C5F6D6967  # "pedl_mig": one key for every pedl scheduler on a database

# Bounds on how long an unreachable server can block a call; the URL's own settings win.
CONNECTION_DEFAULTS = {
    "connect_timeout": "10",
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
    "tcp_user_timeout": "30000",  # ms: unacknowledged writes fail after this
    "application_name": "pedl-scheduler",
}

_ID_TABLES = (
    "SELECT table_name FROM information_schema.columns "
    "WHERE table_schema = current_schema() AND column_name = 'id' AND is_identity = 'YES'"
)


def redact(url: str) -> str:
    """`url` without its password, for logs and error messages."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        userinfo, _, hostport = netloc.rpartition("@")
        netloc = f"{userinfo.split(':', 1)[0]}:***@{hostport}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k != "password"])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


class PostgresDriver:
    dialect = POSTGRES

    def __init__(self, url: str) -> None:
        self.url = redact(url)
        self._params: dict[str, Any] = {**CONNECTION_DEFAULTS, **conninfo_to_dict(url)}
        self._in_transaction = False
        self._begun = False  # BEGIN was sent for the current transaction
        self._closed = False
        self._statements: dict[str, tuple[str, bool]] = {}  # `?` SQL -> (psycopg SQL, returns an id)
        self._plain_statements: dict[str, str] = {}  # `?` SQL -> psycopg SQL, never RETURNING
        # `?` INSERT -> (head, row, tail) for multi-row statements, or None when it is not one
        self._multi_row: dict[str, tuple[str, str, str] | None] = {}
        self._multi_row_text: dict[tuple[str, int], str] = {}
        self._id_tables: set[str] | None = None
        self._conn = self._connect()

    def _connect(self) -> psycopg.Connection:
        try:
            return psycopg.connect(**self._params, autocommit=True)
        except psycopg.OperationalError as e:
            raise DatabaseUnavailable(f"cannot connect to PostgreSQL at {self.url}: {e}") from e

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Reconnects a lost connection between transactions; turns a loss into DatabaseUnavailable."""
        if self._conn.broken and not self._closed:
            if self._begun:
                raise DatabaseUnavailable(f"lost the connection to PostgreSQL at {self.url} mid-transaction")
            self._conn.close()
            self._conn = self._connect()
        try:
            yield
        except psycopg.OperationalError as e:
            if self._conn.broken:
                raise DatabaseUnavailable(
                    f"lost the connection to PostgreSQL at {self.url} (the statement may not have run): {e}"
                ) from e
            raise

    def _statement(self, sql: str) -> tuple[str, bool]:
        cached = self._statements.get(sql)
        if cached is None:
            text = qmark_to_format(sql)
            table = insert_table(sql)
            returning = table is not None and table in self._tables_with_ids()
            if returning:
                text = text.rstrip().rstrip(";") + " RETURNING id"
            cached = self._statements[sql] = (text, returning)
        return cached

    def _tables_with_ids(self) -> set[str]:
        if self._id_tables is None:
            with self._guard():
                rows = self._conn.execute(_ID_TABLES).fetchall()
            self._id_tables = {name for (name,) in rows}
        return self._id_tables

    def execute(self, sql: str, params: Sequence[Any]) -> int:
        text, returning = self._statement(sql)
        self._ensure_begun()
        with self._guard():
            cursor = self._conn.execute(text, tuple(params))
            if returning:
                row = cursor.fetchone()
                return int(row[0]) if row else 0  # ON CONFLICT DO NOTHING may insert nothing
        return 0

    def query(self, sql: str, params: Sequence[Any]) -> list[Row]:
        text, _ = self._statement(sql)
        self._ensure_begun()
        with self._guard():
            cursor = self._conn.cursor(row_factory=dict_row)
            cursor.execute(text, tuple(params))
            return cursor.fetchall()

    def write(self, writes: Writes) -> None:
        self._pipeline(writes, commit=False)

    def begin(self) -> None:
        """Opens the transaction; BEGIN itself goes out with its first statement."""
        self._in_transaction = True
        self._begun = False

    def commit(self, writes: Writes = ()) -> None:
        try:
            if writes or self._begun:
                self._pipeline(writes, commit=True)
        finally:
            self._in_transaction = self._begun = False

    def rollback(self) -> None:
        try:
            if self._begun and not self._conn.broken:
                self._conn.execute("ROLLBACK")
        except psycopg.Error:
            pass  # the connection died under us; the server rolls back on its side
        finally:
            self._in_transaction = self._begun = False

    def _ensure_begun(self) -> None:
        if self._in_transaction and not self._begun:
            with self._guard():
                self._conn.execute("BEGIN")
            self._begun = True

    def _pipeline(self, writes: Writes, commit: bool) -> None:
        """BEGIN (if not sent yet), the writes and COMMIT (if asked) in one round trip."""
        with self._guard(), self._conn.pipeline():
            if self._in_transaction and not self._begun:
                self._conn.execute("BEGIN")
                self._begun = True
            cursor, raw = self._conn.cursor(), psycopg.RawCursor(self._conn)
            for sql, rows in writes:
                self._write(cursor, raw, sql, rows)
            if commit:
                self._conn.execute("COMMIT")

    def _write(
        self, cursor: psycopg.Cursor, raw: psycopg.RawCursor, sql: str, rows: Sequence[Sequence[Any]]
    ) -> None:
        """Many rows of one INSERT go as multi-row statements (on a raw cursor: `$n` placeholders,
        nothing parsed per call): psycopg's executemany costs a pipeline message and Python work per
        row, which is most of a batch's CPU at high rates."""
        shape = self._multi_row.get(sql, False)
        if shape is False:
            shape = self._multi_row[sql] = multi_row_insert(sql)
        if len(rows) < 2 or shape is None:
            cursor.executemany(self._plain(sql), rows)
            return
        per_statement = max(MAX_PARAMETERS // max(len(rows[0]), 1), 1)
        for first in range(0, len(rows), per_statement):
            chunk = rows[first : first + per_statement]
            key = (sql, len(chunk))
            text = self._multi_row_text.get(key)
            if text is None:
                text = self._multi_row_text[key] = numbered_rows(*shape, len(chunk))
            raw.execute(text, [value for r in chunk for value in r])

    def _plain(self, sql: str) -> str:
        """The psycopg form of `sql`, never with RETURNING (deferred writes need no ids)."""
        text = self._plain_statements.get(sql)
        if text is None:
            text = self._plain_statements[sql] = qmark_to_format(sql)
        return text

    @contextmanager
    def migration_lock(self) -> Iterator[None]:
        with self._guard():
            self._conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
        try:
            yield
        finally:
            if not self._conn.broken:
                self._conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))

    def schema_changed(self) -> None:
        self._statements.clear()
        self._plain_statements.clear()
        self._multi_row.clear()
        self._multi_row_text.clear()
        self._id_tables = None

    def close(self) -> None:
        self._closed = True
        self._conn.close()
