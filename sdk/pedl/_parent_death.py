"""Children that die with their parent: no harness (or script) runs on once its agent is gone.

`die_with_parent(pid)` is a `preexec_fn` for `subprocess.Popen` / `asyncio.create_subprocess_exec`:
between fork and exec the child asks the kernel (Linux `prctl(PR_SET_PDEATHSIG, SIGKILL)`) to be
killed when its parent dies, then checks the parent is still the one that forked it, since a parent
killed before the request was made would never send the signal. The signal survives exec (not that
of a setuid program; bubblewrap's own `--die-with-parent` covers the sandboxed harness).

The kernel sends it when the *thread* that forked the child ends, not the process: fork from a
thread that lives as long as the parent (the event loop's, the main thread), never from a pool
thread. libc's `prctl` is looked up here, at import, so the child runs no loader code after fork.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1
# Exit code of a child whose parent was already gone when it started.
ORPHANED_EXIT_CODE = 1

_prctl: Callable[..., int] | None = None
if sys.platform.startswith("linux"):
    try:
        _prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        _prctl = None


def die_with_parent(parent_pid: int | None = None) -> Callable[[], None] | None:
    """The preexec_fn arming the parent-death signal for a child of `parent_pid` (default: this
    process); None where the platform has no such signal."""
    if _prctl is None:
        return None
    parent = os.getpid() if parent_pid is None else parent_pid
    prctl = _prctl
    kill = int(signal.SIGKILL)

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, kill, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(ORPHANED_EXIT_CODE)

    return arm
