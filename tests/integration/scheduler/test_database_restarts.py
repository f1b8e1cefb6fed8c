"""A `pedl-scheduler` process outlives its database: PostgreSQL crashed (`kill -9` of the
postmaster), restarted fast, or stopped for a while, under a steady load of calls; and SQLite's file
locked by another process.

Before: after a restart every call failed with `UNKNOWN ... This Connection is closed` until the
scheduler was killed, while its health check still said SERVING.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from pedl import _grpc
from pedl.v1 import scheduler_pb2, scheduler_pb2_grpc
from pedl_scheduler.storage import DatabaseUnavailable, open_storage
from support import processes, stored
from support.db_fixtures import own_server
from support.models import plain_tar, tiny_config
from support.postgres import (
    PostgresServer,
    restart_server,
    start_again,
    stop_server,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


MODEL = plain_tar({"model_def.py": b"x = 1\n"})


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresServer]:
    """A server of this module's own: its tests stop and start it."""
    yield from own_server()


@pytest.fixture(scope="module")
def scheduler(pg: PostgresServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[processes.Service]:
    workdir = tmp_path_factory.mktemp("scheduler")
    port_file = workdir / "scheduler.port"
    args = [
        "pedl-scheduler",
        "--port", "0",
        "--no-auth",
        "--metrics-port", "-1",
        "--db", pg.url(),
        "--db-check-interval", "0.2",
        "--checkpoint-store", "127.0.0.1:1",
        "--port-file", str(port_file),
    ]  # fmt: skip
    service = processes.start("scheduler", args, workdir, port_file)
    try:
        yield service
    finally:
        processes.stop(service.process)


class Load:
    """Lists experiments from a thread, over and over, tallying the status codes."""

    def __init__(self, stub: scheduler_pb2_grpc.SchedulerServiceStub) -> None:
        self.stub = stub
        self.codes: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.stub.ListExperiments(scheduler_pb2.ListExperimentsRequest(), timeout=30)
                self.codes["OK"] += 1
            except grpc.RpcError as e:
                self.codes[e.code().name] += 1
                time.sleep(0.02)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


def _eventually(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout} s: {what}")


def _health(address: str) -> int:
    stub = health_pb2_grpc.HealthStub(_grpc.channel(address))
    return stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=10).status


def _create(stub: scheduler_pb2_grpc.SchedulerServiceStub) -> int:
    request = scheduler_pb2.CreateExperimentRequest(
        config_yaml=tiny_config(), model_definition=MODEL, model_definition_name="model"
    )
    return stub.CreateExperiment(request, timeout=30).experiment.id


def _works(stub: scheduler_pb2_grpc.SchedulerServiceStub) -> bool:
    try:
        _create(stub)
        return True
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.UNAVAILABLE, e.details()
        return False


@pytest.mark.parametrize("crash", [True, False], ids=["kill-9", "fast-restart"])
def test_work_resumes_after_a_postgres_restart_under_load(
    pg: PostgresServer, scheduler: processes.Service, crash: bool
) -> None:
    stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(scheduler.address))
    before = len(stub.ListExperiments(scheduler_pb2.ListExperimentsRequest(), timeout=30).experiments)
    with Load(stub) as load:
        _eventually(lambda: load.codes["OK"] > 5, "the load runs")
        restart_server(pg, crash=crash)
        ok_at_restart = load.codes["OK"]
        _eventually(lambda: load.codes["OK"] > ok_at_restart + 5, "lists succeed again")
    assert set(load.codes) <= {"OK", "UNAVAILABLE"}, load.codes  # never UNKNOWN
    _eventually(lambda: _works(stub), "creates succeed again")
    after = stub.ListExperiments(scheduler_pb2.ListExperimentsRequest(), timeout=30).experiments
    assert len(after) >= before + 1
    assert _health(scheduler.address) == SERVING
    assert scheduler.process.poll() is None


def test_health_is_not_serving_while_postgres_is_down(
    pg: PostgresServer, scheduler: processes.Service
) -> None:
    stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(scheduler.address))
    assert _health(scheduler.address) == SERVING
    stop_server(pg.process)
    try:
        _eventually(lambda: _health(scheduler.address) == NOT_SERVING, "health turns NOT_SERVING")
        with pytest.raises(grpc.RpcError) as refused:
            stub.ListExperiments(scheduler_pb2.ListExperimentsRequest(), timeout=30)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "database is unavailable" in (refused.value.details() or "")
        assert "Traceback" not in (refused.value.details() or "")
    finally:
        start_again(pg)
    _eventually(lambda: _health(scheduler.address) == SERVING, "health turns SERVING again")
    assert _works(stub)


def test_a_briefly_locked_sqlite_file_is_waited_for_and_a_long_lock_reported(tmp_path: Path) -> None:
    path = tmp_path / "pedl.db"
    db = open_storage(str(path))
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)

    def hold(seconds: float) -> threading.Timer:
        other.execute("BEGIN EXCLUSIVE")
        timer = threading.Timer(seconds, lambda: other.execute("COMMIT"))
        timer.start()
        return timer

    stored.execute(db, "CREATE TABLE probe (n INTEGER)")
    hold(0.5)
    stored.execute(db, "INSERT INTO probe VALUES (1)")  # waited for the lock
    held = hold(7.0)  # past the 5 s busy timeout
    with pytest.raises(DatabaseUnavailable, match="locked by another process"):
        stored.execute(db, "INSERT INTO probe VALUES (2)")
    held.join()
    stored.execute(db, "INSERT INTO probe VALUES (3)")
    assert [r["n"] for r in stored.rows(db, "SELECT n FROM probe ORDER BY n")] == [1, 3]
    other.close()
    db.close()
