"""Alembic migrations of the scheduler's schema (run by `storage.migrate`; no alembic.ini needed)."""
