"""The scheduler's durable state: a SQL database (SQLite or PostgreSQL) behind a versioned schema."""

from pedl_scheduler.db.database import Database, open_database
from pedl_scheduler.db.errors import DatabaseUnavailable

__all__ = ["Database", "DatabaseUnavailable", "open_database"]
