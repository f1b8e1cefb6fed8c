"""What a scheduler database holds, read with a test's own SQL (named `:params`), on either backend."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text

from pedl_scheduler.storage import Storage


def rows(db: Storage, sql: str, **params: Any) -> list[dict[str, Any]]:
    return db.rows(text(sql), params)


def row(db: Storage, sql: str, **params: Any) -> dict[str, Any] | None:
    found = rows(db, sql, **params)
    return found[0] if found else None


def execute(db: Storage, sql: str, **params: Any) -> None:
    """A change made behind the scheduler's back (what another tool or an older pedl would do)."""
    db.run(text(sql), params)
