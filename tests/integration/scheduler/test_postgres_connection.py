"""PostgreSQL connection behaviour: concurrent migration, lost connections, unreachable servers."""

from __future__ import annotations

import socket
import threading

import psycopg
import pytest

from pedl_scheduler.storage import DatabaseUnavailable, Storage, migrate, open_storage
from pedl_scheduler.storage.ops import experiments as experiment_ops
from support import stored
from support.postgres import PASSWORD, postgres_server, stop_server

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def add_experiment(db: Storage) -> int:
    return experiment_ops.create_experiment(
        db,
        config_yaml="",
        config_json="{}",
        model_definition=b"m",
        model_definition_name="m",
        seed=1,
        created_at="now",
        owner="",
    )


def drop_connections(url: str) -> None:
    """Ends the scheduler's server-side session, as a server restart or a network cut would."""
    with psycopg.connect(url, autocommit=True) as admin:
        ended = admin.execute(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "  # waits for the exit
            "WHERE datname = current_database() AND application_name = 'pedl-scheduler'"
        ).fetchall()
    assert ended, "no pedl-scheduler session to end"


def test_schedulers_migrating_one_empty_database_at_once_do_not_collide(postgres_url: str) -> None:
    count = 4
    barrier = threading.Barrier(count)
    opened: list[Storage] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        barrier.wait()
        try:
            opened.append(open_storage(postgres_url))
        except BaseException as e:  # reported below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=open_one) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert stored.rows(opened[0], "SELECT version_num FROM alembic_version") == [
        {"version_num": migrate.head()}
    ]
    for db in opened:
        db.close()


def test_an_idle_connection_the_server_ended_is_replaced_before_use(postgres_url: str) -> None:
    db = open_storage(postgres_url)
    add_experiment(db)
    drop_connections(postgres_url)
    assert len(stored.rows(db, "SELECT id FROM experiments")) == 1  # reconnected, nothing failed
    assert add_experiment(db) > 0
    db.close()


def test_a_connection_lost_mid_transaction_rolls_it_back(postgres_url: str) -> None:
    db = open_storage(postgres_url)
    with pytest.raises(DatabaseUnavailable), db.transaction():
        add_experiment(db)
        drop_connections(postgres_url)
        add_experiment(db)
    assert stored.rows(db, "SELECT id FROM experiments") == []
    db.close()


def test_a_stopped_server_is_reported_not_waited_on() -> None:
    with postgres_server() as server:
        db = open_storage(server.url())
        stop_server(server.process)  # fast shutdown: ends the scheduler's session
        with pytest.raises(DatabaseUnavailable) as lost:
            stored.rows(db, "SELECT id FROM experiments")
        with pytest.raises(DatabaseUnavailable, match="cannot connect") as again:
            stored.rows(db, "SELECT id FROM experiments")
        assert PASSWORD not in str(lost.value) + str(again.value)
        db.close()


def test_an_unreachable_server_fails_at_open_without_showing_the_password() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        with pytest.raises(DatabaseUnavailable, match="cannot connect") as e:
            open_storage(f"postgresql://pedl:{PASSWORD}@127.0.0.1:{port}/pedl")
    assert PASSWORD not in str(e.value) and ":***@" in str(e.value)
