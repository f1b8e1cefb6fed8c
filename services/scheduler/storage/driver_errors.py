"""What a database driver's exception says about the connection: gone, or SQLite's file locked.

Kept apart from the connection so the classification is readable (and testable) on its own."""

from __future__ import annotations

import sqlite3

from sqlalchemy import Connection, exc


def sqlite_locked(e: BaseException | None) -> bool:
    """SQLite's busy timeout ran out: another process holds the file's write lock."""
    return isinstance(e, sqlite3.OperationalError) and "locked" in str(e)


def driver_lost(e: BaseException) -> bool:
    """psycopg's own OperationalError anywhere in the chain: the server ended the session
    (AdminShutdown) mid-pipeline, and leaving the pipeline then fails with "cannot exit pipeline mode
    while busy" before psycopg marks the connection broken. The connection is unusable either way."""
    import psycopg  # the PostgreSQL driver; only reached on the PostgreSQL path

    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, psycopg.OperationalError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def broken(conn: Connection) -> bool:
    """psycopg marks a connection broken when its socket is gone."""
    try:
        return bool(getattr(conn.connection.driver_connection, "broken", False))
    except exc.ResourceClosedError:
        return True
