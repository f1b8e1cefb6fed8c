"""Restarting the scheduler in place after the database went away under a unit of work.

The scheduler keeps its state in memory and writes it at each commit. When the database goes away
mid-transaction, the rows roll back but the memory that produced them does not: a result an agent
reported would be in memory and not in the database (the agent has moved on), so it would be lost
for good once the database is back. A read that fails changes nothing and is simply retried; a
transaction that had written is cured the way a crash is (a restart reloads state from the
database and agents re-synchronise their runs), only without losing the process: the scheduler
says so in one line, waits for the database, then re-executes itself with the same arguments and
port (the pid stays the same, so supervisors and `pedl cluster up` see one process).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence

import structlog

from pedl_scheduler.storage.engine import make_engine

log = structlog.get_logger(component="db_restart")


def restart_argv(argv: Sequence[str], port: int) -> list[str]:
    """`argv` (sys.orig_argv: the interpreter, then its arguments) with `--port` set to the port it
    bound, so that a `--port 0` scheduler comes back where its agents and clients look for it."""
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == "--port" and i + 1 < len(out):
            out[i + 1] = str(port)
            return out
        if arg.startswith("--port="):
            out[i] = f"--port={port}"
            return out
    return [*out, "--port", str(port)]


def reachable(url: str) -> bool:
    engine = make_engine(url)
    try:
        with engine.connect():
            return True
    except Exception:
        return False
    finally:
        engine.dispose()


def wait_then_restart(
    url: str,
    port: int,
    reason: str,
    interval: float,
    check: Callable[[str], bool] = reachable,
    execv: Callable[[str, list[str]], object] = os.execv,
) -> None:
    """Blocks (nothing in this process may act on its stale memory) until `url` answers, then
    re-executes the scheduler; never returns unless `execv` does (tests)."""
    log.warning(
        "database lost during a write: waiting for it, then restarting to reload state from it",
        reason=reason,
    )
    while not check(url):
        time.sleep(interval)
    log.warning("database reachable again: restarting in place")
    sys.stdout.flush()
    sys.stderr.flush()
    argv = restart_argv(sys.orig_argv, port)
    execv(argv[0] if os.path.isabs(argv[0]) else sys.executable, argv)
