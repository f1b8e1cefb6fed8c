"""Opening the scheduler's database: engine, schema brought up to date, one connection."""

from __future__ import annotations

from typing import TypeVar

from sqlalchemy import exc

from pedl_scheduler.storage import migrate
from pedl_scheduler.storage.connection import DatabaseUnavailable, Storage
from pedl_scheduler.storage.engine import make_engine, redact

S = TypeVar("S", bound=Storage)


def open_storage(url: str, kind: type[S] = Storage) -> S:  # type: ignore[assignment]
    """`url` is `postgresql://` / `postgres://`, a file path, `sqlite:///path`, or `:memory:`.

    The schema is brought up to date (`migrate.upgrade`) before this returns.
    """
    engine = make_engine(url)
    try:
        try:
            migrate.upgrade(engine)
        except exc.DBAPIError as e:
            if e.connection_invalidated or isinstance(e, exc.OperationalError):
                cause = str(e.orig).strip() if e.orig is not None else str(e)
                raise DatabaseUnavailable(f"cannot connect to the database at {redact(url)}: {cause}") from e
            raise
        return kind(engine, url)
    except BaseException:
        engine.dispose()
        raise
