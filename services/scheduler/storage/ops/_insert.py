"""INSERT ... ON CONFLICT DO NOTHING in each dialect's own spelling (SQLAlchemy has one per dialect)."""

from __future__ import annotations

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.dml import Insert


def insert_new(table: Table) -> dict[str, Insert]:
    """Per dialect name: an INSERT that keeps the row already stored under the same key."""
    return {
        "sqlite": sqlite.insert(table).on_conflict_do_nothing(),
        "postgresql": postgresql.insert(table).on_conflict_do_nothing(),
    }
