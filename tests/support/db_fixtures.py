"""pytest fixtures for scheduler databases: one PostgreSQL server per session, a fresh database per test.

Use them from a conftest or test module with `from support.db_fixtures import *  # noqa: F403`
(or `pytest_plugins = ["support.db_fixtures"]` in the root conftest).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from support.postgres import PostgresServer, PostgresUnavailable, postgres_server

__all__ = ["database_url", "pg_server", "postgres_url"]

_counter = itertools.count(1)


def own_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server of the caller's own (one it may stop and start again), for a fixture to
    yield from; the test skips when PostgreSQL or psycopg is missing."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed (pip install 'psycopg[binary]')")
    try:
        with postgres_server() as server:
            yield server
    except PostgresUnavailable as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the whole session."""
    yield from own_server()


@pytest.fixture
def postgres_url(pg_server: PostgresServer) -> Iterator[str]:
    """The URL of an empty database created for this test and dropped after it."""
    import psycopg

    name = f"test_{next(_counter)}"
    with psycopg.connect(pg_server.url(), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield pg_server.url(name)
    finally:
        with psycopg.connect(pg_server.url(), autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """A fresh database URL on each backend in turn."""
    if request.param == "sqlite":
        return str(tmp_path / "pedl.db")
    return request.getfixturevalue("postgres_url")
