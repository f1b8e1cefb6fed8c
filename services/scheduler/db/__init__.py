"""TRANSITIONAL: the old import path of the scheduler's database, kept while experiments.py still
imports it; everything lives in `pedl_scheduler.storage` (see `storage/transitional.py`)."""

from pedl_scheduler.storage.connection import DatabaseUnavailable
from pedl_scheduler.storage.open import open_storage
from pedl_scheduler.storage.transitional import Database


def open_database(url: str) -> Database:
    """The scheduler's database at `url`, schema up to date, answering experiments.py's statements."""
    return open_storage(url, Database)


__all__ = ["Database", "DatabaseUnavailable", "open_database"]
