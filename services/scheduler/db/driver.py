"""The seam between `Database` and one backend's driver: raw statements, no bookkeeping."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from pedl_scheduler.db.dialect import Dialect

Row = dict[str, Any]
# Deferred writes: each `?`-style statement with the parameter rows to run it with, in order.
Writes = Sequence[tuple[str, Sequence[Sequence[Any]]]]


class Driver(Protocol):
    dialect: Dialect
    url: str  # safe to log: no password

    def execute(self, sql: str, params: Sequence[Any]) -> int:
        """Runs `?`-style SQL; returns the new id for inserts into tables with an assigned id, else 0."""
        ...

    def write(self, writes: Writes) -> None:
        """Runs the writes in the open transaction, in as few round trips as the backend allows."""
        ...

    def query(self, sql: str, params: Sequence[Any]) -> list[Row]: ...

    def begin(self) -> None: ...

    def commit(self, writes: Writes = ()) -> None:
        """Runs `writes`, then commits; with PostgreSQL both in one round trip."""
        ...

    def rollback(self) -> None:
        """Must not raise when the connection is already gone: the caller is raising a better error."""
        ...

    def migration_lock(self) -> AbstractContextManager[None]:
        """Held while migrating, so concurrent schedulers on one database migrate one at a time."""
        ...

    def schema_changed(self) -> None:
        """Called after migrations ran: forget anything derived from the old schema."""
        ...

    def close(self) -> None: ...
