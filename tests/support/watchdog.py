"""A server a fixture starts dies with the test process, however that process dies.

A fixture's `finally` stops its server, but pytest killed by SIGTERM or SIGKILL runs no `finally`,
and the server (in its own session, so Ctrl-C does not reach it) would live on, holding its port
and temp dir. A `Watchdog` is a small process that holds the read end of a pipe whose write end
only the test process holds. The fixture announces each server process group it starts; when
the test process dies, however it dies, the kernel closes the write end, the watchdog reads EOF,
stops the last announced group and removes the fixture's directory. A fixture that cleans up
itself says `done` first (`close`), and the watchdog exits without touching anything.

Not PR_SET_PDEATHSIG: it would need a `preexec_fn` (unsafe in a process with threads), it fires
when the forking *thread* exits rather than the process, and the kernel clears it when the child
changes its user (PostgreSQL runs as `postgres` when the tests run as root).

Run as a script (`python watchdog.py [DIRECTORY]`), it is the watchdog process; it imports only
the standard library.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

DONE = b"done"


class Watchdog:
    """The test process's side: start one per server (or per set of servers that die together)."""

    def __init__(self, directory: Path | None = None) -> None:
        read_fd, self._write_fd = os.pipe()  # both non-inheritable: no other child holds the write end
        try:
            self.process = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), *([str(directory)] if directory else [])],
                stdin=read_fd,
                stdout=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C to pytest's group does not end it before pytest's cleanup
            )
        finally:
            os.close(read_fd)

    def watch(self, pgid: int) -> None:
        """From now on, the process group the watchdog stops if the test process dies."""
        os.write(self._write_fd, b"%d\n" % pgid)

    def close(self) -> None:
        """The fixture has cleaned up: the watchdog exits without stopping or removing anything."""
        if self._write_fd < 0:
            return
        try:
            os.write(self._write_fd, DONE + b"\n")
        finally:
            os.close(self._write_fd)
            self._write_fd = -1
        self.process.wait(timeout=30)


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stop_group(pgid: int, grace: float = 5.0) -> None:
    """SIGQUIT to the group's leader (PostgreSQL's immediate shutdown, which still frees its shared
    memory), then SIGKILL to whatever is left of the group."""
    try:
        os.kill(pgid, signal.SIGQUIT)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + grace
    while _alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while _alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watched: int | None = None
    for line in sys.stdin.buffer:  # ends at EOF: the test process closed its end or died
        word = line.strip()
        if word == DONE:
            return 0
        if word:
            watched = int(word)
    if watched is not None:
        _stop_group(watched)
    if len(argv) > 1:
        shutil.rmtree(argv[1], ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
