"""Alembic's entry point: runs migrations on the connection `storage.migrate` hands over."""

from __future__ import annotations

from alembic import context

from pedl_scheduler.storage.tables import metadata

connection = context.config.attributes["connection"]
# Batch mode: SQLite rebuilds a table where it cannot ALTER it in place.
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    transaction_per_migration=True,
)
with context.begin_transaction():
    context.run_migrations()
