"""The scheduler's durable state: every SQL statement pedl runs, on SQLAlchemy Core and Alembic.

`tables` declares the schema once; `engine` turns a `--db` URL into an engine (SQLite or
PostgreSQL); `connection.Storage` is the one connection with its transactions and deferred writes;
`migrate` brings a database to the newest revision in `migrations/versions`; `ops` holds the named
operations the scheduler calls, grouped by what they hold.
"""

from pedl_scheduler.storage.connection import DatabaseUnavailable, Row, Storage
from pedl_scheduler.storage.open import open_storage

__all__ = ["DatabaseUnavailable", "Row", "Storage", "open_storage"]
