"""The scheduler's durable state: a SQL database behind a versioned schema."""

from pedl_scheduler.db.database import Database, open_database

__all__ = ["Database", "open_database"]
