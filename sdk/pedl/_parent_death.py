"""No harness outlives its agent: two independent ways for a harness to learn that its agent died.

1. A lifeline pipe. The agent opens a pipe per harness it spawns (`Lifeline`), keeps the write end and
   hands the read end to the harness (inherited, named by `PEDL_LIFELINE_FD`). Nothing is ever
   written: when the agent dies, however it dies, the kernel closes its end and the harness's read
   returns EOF; the harness then kills its process group (itself, its ranks on this machine, its
   data-loader workers and scripts). It works through a `--harness-command` wrapper and through the
   bubblewrap sandbox, and there is no window: the pipe exists before the harness does.
2. The parent-death signal. The harness asks the kernel (Linux `prctl(PR_SET_PDEATHSIG, SIGKILL)`)
   to be killed when its parent dies: that needs no Python thread to run, so a harness stuck in C
   code holding the GIL dies too. Under bubblewrap the parent is bwrap, which `--die-with-parent`
   ties to the agent the same way.

Neither uses a `preexec_fn`: Python code run between fork and exec in a process with gRPC's threads
runs gRPC's fork handlers and crashes a few children in a hundred (measured: SIGSEGV/SIGABRT).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading

LIFELINE_ENV = "PEDL_LIFELINE_FD"
PR_SET_PDEATHSIG = 1


class Lifeline:
    """The agent's side: one pipe per harness process; `close()` once that process has exited."""

    def __init__(self) -> None:
        self.read_fd, self._write_fd = os.pipe()  # both non-inheritable; pass_fds makes read_fd inherited
        self._open = True

    def env(self) -> dict[str, str]:
        return {LIFELINE_ENV: str(self.read_fd)}

    def spawned(self) -> None:
        """The child holds its copy of the read end; ours would only keep the pipe from breaking."""
        if self.read_fd >= 0:
            os.close(self.read_fd)
            self.read_fd = -1

    def close(self) -> None:
        self.spawned()
        if self._open:
            os.close(self._write_fd)
            self._open = False


def die_with_agent() -> None:
    """The harness's side, first thing at start: arm the parent-death signal and watch the lifeline."""
    _arm_parent_death_signal()
    text = os.environ.pop(LIFELINE_ENV, "")
    if not text:
        return
    try:
        fd = int(text)
        os.set_inheritable(fd, False)  # the harness's own children (scripts, workers) do not hold it
    except (ValueError, OSError):
        print(f"pedl.harness: {LIFELINE_ENV}={text!r} is not an open file descriptor", file=sys.stderr)
        return
    threading.Thread(target=_watch, args=(fd,), name="agent-lifeline", daemon=True).start()


def _watch(fd: int) -> None:
    try:
        while os.read(fd, 1):
            pass
    except OSError:
        pass
    try:  # likely unread (the agent read our stderr): a broken pipe must not stop the exit
        print("pedl.harness: the agent that started this harness is gone; exiting", file=sys.stderr)
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 (exiting regardless)
        pass
    try:
        os.killpg(os.getpgrp(), signal.SIGKILL)
    finally:
        os._exit(1)


def _arm_parent_death_signal() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass
