"""Bringing a database to the schema this scheduler runs on, with Alembic configured in code.

Revisions live in `migrations/versions`, each with an upgrade and a downgrade. A database made
before Alembic records its version in a `schema_version` table (versions 1-5 of the old hand-kept
list); those versions are revisions 0001-0005 here, so such a database is stamped at its revision
and upgraded in place. Concurrent schedulers on one PostgreSQL database migrate one at a time.

    python -m pedl_scheduler.storage.migrate --db URL upgrade [REVISION]
    python -m pedl_scheduler.storage.migrate --db URL downgrade REVISION   # e.g. 0004, or base
    python -m pedl_scheduler.storage.migrate --db URL current
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, Engine, column, func, inspect, select, table, text

from pedl_scheduler.storage.engine import make_engine, redact

MIGRATIONS = Path(__file__).with_name("migrations")
MIGRATION_LOCK_KEY = 0x7065646C5F6D6967  # "pedl_mig": one key for every pedl scheduler on a database
# The hand-kept list's versions, before Alembic, and the revision each one is.
LEGACY_VERSIONS = {1: "0001", 2: "0002", 3: "0003", 4: "0004", 5: "0005"}

_schema_version = table("schema_version", column("version"))


def _config(connection: Connection) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def head() -> str:
    """The newest revision this scheduler knows."""
    script = ScriptDirectory(str(MIGRATIONS))
    revision = script.get_current_head()
    assert revision is not None
    return revision


def current(connection: Connection) -> str | None:
    """The revision the database is at (None: empty, or made before Alembic)."""
    return MigrationContext.configure(connection).get_current_revision()


@contextmanager
def migration_lock(engine: Engine) -> Iterator[None]:
    """Held while migrating, so concurrent schedulers on one database migrate one at a time."""
    if engine.dialect.name != "postgresql":
        yield
        return
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as lock:
        lock.execute(select(func.pg_advisory_lock(MIGRATION_LOCK_KEY)))
        try:
            yield
        finally:
            lock.execute(select(func.pg_advisory_unlock(MIGRATION_LOCK_KEY)))


def upgrade(engine: Engine, revision: str = "head") -> str:
    """Adopts a pre-Alembic database, refuses one from a newer pedl, then upgrades; returns the revision."""
    with migration_lock(engine), engine.connect() as connection:
        _adopt_legacy(connection, engine)
        at = current(connection)
        connection.commit()
        if at is not None:
            try:
                ScriptDirectory(str(MIGRATIONS)).get_revision(at)
            except CommandError:
                raise RuntimeError(
                    f"database {redact(str(engine.url))} has schema revision {at}, newer than this "
                    f"scheduler's {head()}: upgrade pedl"
                ) from None
        command.upgrade(_config(connection), revision)
        connection.commit()
        return current(connection) or "base"


def downgrade(engine: Engine, revision: str) -> str:
    """Undoes revisions down to `revision` (`base`: an empty database); returns where it ends."""
    with migration_lock(engine), engine.connect() as connection:
        command.downgrade(_config(connection), revision)
        connection.commit()
        return current(connection) or "base"


def _adopt_legacy(connection: Connection, engine: Engine) -> None:
    """A database the hand-kept migration list made: record its version as a revision, once."""
    tables = set(inspect(connection).get_table_names())
    if "schema_version" not in tables or "alembic_version" in tables:
        return
    version = connection.execute(select(func.max(_schema_version.c.version))).scalar() or 0
    if version not in LEGACY_VERSIONS and version != 0:
        raise RuntimeError(
            f"database {redact(str(engine.url))} has schema version {version}, newer than this "
            f"scheduler's {head()}: upgrade pedl"
        )
    connection.commit()
    if version:
        command.stamp(_config(connection), LEGACY_VERSIONS[version])
    with connection.begin():
        connection.execute(text("DROP TABLE schema_version"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Upgrade or downgrade the scheduler's database schema.")
    parser.add_argument(
        "--db", required=True, help="SQLite path or postgresql:// URL, as the scheduler's --db"
    )
    sub = parser.add_subparsers(dest="action", required=True)
    up = sub.add_parser("upgrade")
    up.add_argument("revision", nargs="?", default="head")
    down = sub.add_parser("downgrade")
    down.add_argument("revision", help="the revision to end at, e.g. 0004, or base")
    sub.add_parser("current")
    args = parser.parse_args(argv)
    engine = make_engine(args.db)
    try:
        if args.action == "upgrade":
            print(upgrade(engine, args.revision))
        elif args.action == "downgrade":
            print(downgrade(engine, args.revision))
        else:
            with engine.connect() as connection:
                print(current(connection) or "base")
    finally:
        engine.dispose()


if __name__ == "__main__":
    main()
