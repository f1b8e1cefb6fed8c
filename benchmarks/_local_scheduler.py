"""A scheduler process of its own for the benchmarks that measure its API (list_scale, describe_trials,
login_storm): SQLite in `tmp`, authentication on, no checkpoint store, an admin session."""

from __future__ import annotations

import secrets
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from pedl.auth.login import login

BIN = Path(sys.executable).parent


def start_scheduler(
    tmp: Path, extra: Sequence[str] = (), auth_file: Path | None = None
) -> tuple[subprocess.Popen[bytes], str, str]:
    """The process, its address and an admin token; `extra` are more pedl-scheduler flags. Exits the
    benchmark, naming the scheduler's log, if it does not start."""
    password = secrets.token_hex(12)
    (tmp / "secret").write_text(secrets.token_hex(32))
    (tmp / "admin").write_text(password)
    port_file = tmp / "port"
    port_file.unlink(missing_ok=True)  # a restarted scheduler writes it again
    argv = [str(BIN / "pedl-scheduler"), "--db", str(tmp / "pedl.db"), "--port", "0",
            "--port-file", str(port_file), "--cluster-secret-file", str(tmp / "secret"),
            "--admin-password-file", str(tmp / "admin"), "--checkpoint-store", "127.0.0.1:1",
            *extra]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(tmp / "scheduler.log", "wb"))
    deadline = time.monotonic() + 120
    while not (port_file.exists() and port_file.read_text().strip()):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            sys.exit(f"the scheduler did not start: {(tmp / 'scheduler.log').read_text()[-2000:]}")
        time.sleep(0.1)
    master = f"127.0.0.1:{port_file.read_text().strip()}"
    return proc, master, login(master, "admin", password, auth_file).token
