"""Killing a process with everything it started: a string entrypoint runs under `sh -c`, whose
pipelines and `&&` lists are the shell's children, not the harness's."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path


def descendants(pid: int, proc_root: Path = Path("/proc")) -> list[int]:
    """The pids `pid` started, and those they started, ... (Linux's /proc; none elsewhere)."""
    children: dict[int, list[int]] = {}
    try:
        entries = [e for e in os.listdir(proc_root) if e.isdigit()]
    except OSError:
        return []
    for entry in entries:
        try:
            stat = (proc_root / entry / "stat").read_text()
        except OSError:
            continue  # exited meanwhile
        # The command name in parentheses may hold spaces: the parent pid is the 2nd field after it.
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_with_descendants(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILLs `proc`, then what it had started (it first, so that it starts nothing more)."""
    started = descendants(proc.pid)
    proc.kill()
    for pid in started:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
