"""A throwaway PostgreSQL server for tests: 127.0.0.1, a free port, a temp dir, stopped by PID.

A `Watchdog` stops it and removes its temp dir if the test process dies first (SIGTERM, SIGKILL).

initdb and postgres refuse to run as root, so as root they run as the `postgres` user in a
directory that user owns.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from support.watchdog import Watchdog

USER = "pedl"
PASSWORD = "pedl-test"


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL binaries (or no way to run them) on this machine; tests skip with this reason."""


@dataclass
class PostgresServer:
    port: int
    workdir: Path
    process: subprocess.Popen
    watchdog: Watchdog
    settings: dict[str, str] = field(default_factory=dict)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{self.port}/{database}"

    def log(self) -> str:
        path = self.workdir / "postgres.log"
        return path.read_text(errors="replace") if path.exists() else ""


def find_bin_dir() -> Path:
    """The PostgreSQL bin directory: $PEDL_PG_BIN, else Debian's newest, else `initdb` on PATH."""
    candidates = [os.environ.get("PEDL_PG_BIN", "")]
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))[::-1]
    on_path = shutil.which("initdb")
    candidates.append(str(Path(on_path).parent) if on_path else "")
    for c in candidates:
        if c and (Path(c) / "initdb").exists() and (Path(c) / "postgres").exists():
            return Path(c)
    raise PostgresUnavailable("PostgreSQL binaries (initdb, postgres) not found; set PEDL_PG_BIN")


def _run_as() -> pwd.struct_passwd | None:
    """The account to run the server as: `postgres` when we are root, else ourselves (None)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("postgres")
    except KeyError as e:
        raise PostgresUnavailable("running as root and there is no `postgres` user to run PostgreSQL") from e


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(server: PostgresServer, bin_dir: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"postgres exited with {server.process.returncode}:\n{server.log()[-3000:]}")
        ready = subprocess.run(
            [str(bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(server.port), "-q"], check=False
        )
        if ready.returncode == 0:
            return
        time.sleep(0.1)
    raise RuntimeError(f"postgres did not accept connections in {timeout}s:\n{server.log()[-3000:]}")


def stop_server(process: subprocess.Popen, grace: float = 20.0) -> None:
    """Fast shutdown (SIGINT) by PID, then SIGKILL of its process group if it lingers."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=10)


def _start(
    bin_dir: Path,
    data: Path,
    workdir: Path,
    user: pwd.struct_passwd | None,
    settings: dict[str, str],
    watchdog: Watchdog,
    port: int | None = None,
) -> PostgresServer:
    as_user = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []} if user else {}
    port = port or _free_port()
    with open(workdir / "postgres.log", "ab") as log:
        process = subprocess.Popen(
            [
                str(bin_dir / "postgres"),
                "-D", str(data),
                "-p", str(port),
                "-h", "127.0.0.1",
                "-k", str(workdir),  # the Unix socket stays in our temp dir, not /var/run
                *[arg for k, v in settings.items() for arg in ("-c", f"{k}={v}")],
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            start_new_session=True,
            **as_user,
        )  # fmt: skip
    watchdog.watch(process.pid)  # its own session: the group is the postmaster's PID
    return PostgresServer(port, workdir, process, watchdog, settings)


def restart_server(server: PostgresServer, crash: bool, timeout: float = 60) -> None:
    """Restarts `server` on its port and data: `crash` is `kill -9` of the postmaster (its backends
    exit when they see it gone; the start recovers from the WAL), else a fast shutdown (SIGINT,
    what `pg_ctl restart -m fast` sends) then a start. `server.process` is the new postmaster."""
    if crash:
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(timeout=10)
    else:
        stop_server(server.process)
    start_again(server, timeout)


def start_again(server: PostgresServer, timeout: float = 60) -> None:
    """Starts a stopped `server` again on its port and data."""
    bin_dir = find_bin_dir()
    deadline = time.monotonic() + timeout
    while True:  # after a crash, the old backends may hold the shared memory for a moment
        data = server.workdir / "data"
        server.process = _start(
            bin_dir, data, server.workdir, _run_as(), server.settings, server.watchdog, server.port
        ).process
        try:
            _wait_ready(server, bin_dir, max(1.0, deadline - time.monotonic()))
            return
        except RuntimeError:
            stop_server(server.process)
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@contextmanager
def postgres_server(settings: dict[str, str] | None = None, timeout: float = 60) -> Iterator[PostgresServer]:
    """Starts an empty PostgreSQL cluster (superuser `pedl`, password auth on TCP) and stops it after.

    `settings` are postgresql.conf parameters (`-c name=value`); the defaults are PostgreSQL's own.
    """
    bin_dir = find_bin_dir()
    user = _run_as()
    workdir = Path(tempfile.mkdtemp(prefix="pedl-pg-"))
    watchdog = Watchdog(workdir)
    server: PostgresServer | None = None
    try:
        data = workdir / "data"
        (workdir / "pwfile").write_text(PASSWORD + "\n")
        if user is not None:
            os.chown(workdir, user.pw_uid, user.pw_gid)
            os.chown(workdir / "pwfile", user.pw_uid, user.pw_gid)
        as_user = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []} if user else {}
        subprocess.run(
            [
                str(bin_dir / "initdb"),
                "-D", str(data),
                "-U", USER,
                "--pwfile", str(workdir / "pwfile"),
                "--auth-host=scram-sha-256",
                "--auth-local=trust",
                "--encoding=UTF8",
                "--no-sync",
            ],
            cwd=workdir,
            check=True,
            capture_output=True,
            **as_user,
        )  # fmt: skip
        for attempt in range(3):  # another process may take the free port before postgres binds it
            server = _start(bin_dir, data, workdir, user, settings or {}, watchdog)
            try:
                _wait_ready(server, bin_dir, timeout)
                break
            except RuntimeError:
                stop_server(server.process)
                if attempt == 2:
                    raise
        assert server is not None
        yield server
    finally:
        if server is not None:
            stop_server(server.process)
        shutil.rmtree(workdir, ignore_errors=True)
        watchdog.close()
