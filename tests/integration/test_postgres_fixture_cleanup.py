"""The PostgreSQL server of the `pg_server` fixture dies with pytest, however pytest dies: killed
(SIGTERM, SIGKILL) it runs no fixture teardown, and the server would keep its port and temp dir."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.postgres import PostgresUnavailable, find_bin_dir

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TESTS = Path(__file__).resolve().parents[1]

# A test run that holds the session's server until it is killed.
HELD = """
import json, os, time
from support.db_fixtures import *  # noqa: F403

def test_holds_the_server(pg_server):
    info = {"pid": pg_server.process.pid, "port": pg_server.port, "workdir": str(pg_server.workdir),
            "watchdog": pg_server.watchdog.process.pid}
    with open(os.environ["INFO"] + ".tmp", "w") as f:
        json.dump(info, f)
    os.rename(os.environ["INFO"] + ".tmp", os.environ["INFO"])
    time.sleep(600)
"""

# The same run, ending normally: the fixture's own teardown stops the server.
FINISHED = HELD.replace("time.sleep(600)", "pass")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (ours not yet reaped, or an orphan about to be) is gone for every purpose here.
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def run_pytest(tmp_path: Path, body: str) -> tuple[subprocess.Popen, Path]:
    try:
        find_bin_dir()
    except PostgresUnavailable as e:
        pytest.skip(str(e))
    test_file = tmp_path / "test_held.py"
    test_file.write_text(body)
    info = tmp_path / "info.json"
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--noconftest", str(test_file)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(TESTS), "INFO": str(info)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return run, info


def wait_for(condition, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_killed_pytest_leaves_no_postgres_server_behind(tmp_path: Path, sig: signal.Signals) -> None:
    run, info_path = run_pytest(tmp_path, HELD)
    try:
        wait_for(lambda: info_path.exists() or run.poll() is not None, 120, "the server did not start")
        assert info_path.exists(), run.communicate()[0].decode(errors="replace")
        info = json.loads(info_path.read_text())
        assert alive(info["pid"]) and accepts(info["port"])

        os.kill(run.pid, sig)  # pytest only: the server and watchdog are in sessions of their own
        run.wait(timeout=30)
        wait_for(lambda: not alive(info["pid"]), 30, "the postmaster outlived pytest")
        wait_for(lambda: not Path(info["workdir"]).exists(), 30, "the server's temp dir outlived pytest")
        assert not accepts(info["port"])
        wait_for(lambda: not alive(info["watchdog"]), 30, "the watchdog did not exit")
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(timeout=30)


def test_a_finished_pytest_stops_its_server_and_its_watchdog(tmp_path: Path) -> None:
    run, info_path = run_pytest(tmp_path, FINISHED)
    out = run.communicate(timeout=150)[0].decode(errors="replace")
    assert run.returncode == 0, out
    info = json.loads(info_path.read_text())
    assert not alive(info["pid"]) and not Path(info["workdir"]).exists()
    wait_for(lambda: not alive(info["watchdog"]), 30, "the watchdog did not exit")
