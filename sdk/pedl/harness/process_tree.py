"""The entrypoint's process tree: started so that it dies with the harness, and killed with everything
it started (a string entrypoint runs under `sh -c`, whose pipelines and `&&` lists are the shell's
children, not the harness's)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
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


# Runs first in the script's process, then execs the script: the script dies with its harness even when
# the harness is SIGKILLed (Linux's parent-death signal survives exec). Not a `preexec_fn`: Python code
# between fork and exec in the harness (which runs gRPC's threads) crashes some children (SIGABRT).
_DIE_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "parent = int(sys.argv[1])\n"
    "try:\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)\n"
    "except (OSError, AttributeError):\n"
    "    pass\n"
    "if os.getppid() != parent:\n"  # the harness died before the signal was armed
    "    os._exit(1)\n"
    "try:\n"
    "    os.execvp(sys.argv[2], sys.argv[2:])\n"
    "except OSError as e:\n"
    "    print(f'pedl.harness: cannot start the entrypoint {sys.argv[2]!r}: {e}', file=sys.stderr)\n"
    "    os._exit(127)\n"
)


def dying_with_this_process(command: list[str]) -> list[str]:
    """`command`, started through a small exec bootstrap that ties it to this process's life (Linux)."""
    if not sys.platform.startswith("linux") or not command:
        return command
    return [sys.executable, "-S", "-c", _DIE_WITH_PARENT, str(os.getpid()), *command]
