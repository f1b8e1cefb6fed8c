"""Turning a `--db` URL into a SQLAlchemy engine: SQLite (WAL) or PostgreSQL through psycopg 3.

SQLite: the standard library's driver in autocommit mode, with `BEGIN` sent when SQLAlchemy opens a
transaction (SQLAlchemy's recipe for real SQLite transactions); WAL with synchronous=NORMAL, so a
commit survives a crash of the scheduler and only an OS crash can lose the last ones.

PostgreSQL: libpq keepalives and a TCP user timeout bound how long a dead server or network can
block a call (the URL's own settings win); a pooled connection is pinged when it is checked out
(the scheduler's reconnects), so a restart of the server never hands back a dead one. Each commit
waits for the WAL flush, which bounds transactions to the disk's fsync rate; the scheduler commits
each batch of agent messages as one transaction. `?options=-c%20synchronous_commit%3Doff` in the
URL trades the last few hundred milliseconds of commits on a PostgreSQL crash (never consistency)
for no flush wait.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.pool import StaticPool

# Bounds on how long an unreachable server can block a call; the URL's own settings win.
POSTGRES_CONNECTION_DEFAULTS = {
    "connect_timeout": "10",
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
    "tcp_user_timeout": "30000",  # ms: unacknowledged writes fail after this
    "application_name": "pedl-scheduler",
}

# Seconds a SQLite statement waits for another process's lock on the file before it gives up.
SQLITE_BUSY_TIMEOUT = 5.0


def is_postgres(url: str) -> bool:
    return url.startswith(("postgres://", "postgresql://", "postgresql+psycopg://"))


def redact(url: str) -> str:
    """`url` without its password, for logs and error messages."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        userinfo, _, hostport = netloc.rpartition("@")
        netloc = f"{userinfo.split(':', 1)[0]}:***@{hostport}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k != "password"])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def make_engine(url: str) -> Engine:
    """`url` is `postgresql://` / `postgres://`, a file path, `sqlite:///path`, or `:memory:`."""
    if is_postgres(url):
        return _postgres_engine(url)
    return _sqlite_engine(url)


def _postgres_engine(url: str) -> Engine:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    connect_args: dict[str, Any] = {k: v for k, v in POSTGRES_CONNECTION_DEFAULTS.items() if k not in query}
    sa_url = urlunsplit(("postgresql+psycopg", parts.netloc, parts.path, parts.query, parts.fragment))
    engine = create_engine(sa_url, connect_args=connect_args, pool_size=1, max_overflow=2, pool_pre_ping=True)
    # Many rows of one INSERT go as multi-row statements (SQLAlchemy's insertmanyvalues) even without
    # RETURNING: psycopg's executemany costs a pipeline message and Python work per row.
    engine.dialect.use_insertmanyvalues_wo_returning = True
    return engine


def _sqlite_engine(url: str) -> Engine:
    path = url.removeprefix("sqlite:///").removeprefix("sqlite://")
    if path in (":memory:", ""):
        engine = create_engine("sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False})
    else:
        file = Path(path).expanduser()
        file.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            f"sqlite:///{file}", connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT}
        )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # no implicit transactions: `begin` below opens them
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        # On the driver's connection: through SQLAlchemy's statement machinery this costs a
        # transaction more than all of its deferred writes.
        connection.connection.driver_connection.execute("BEGIN")

    return engine
