"""A process the fork server starts dies with its parent even when the parent was gone before it
could ask to (the gap PR_SET_PDEATHSIG leaves, closed by `pedl.harness.zygote._tie_to_parent`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux parent-death signal")

# The parent forks a child that ties itself to it by pid or by a pipe, at once or after the parent
# exited; the parent prints the child's pid and, unless told to be gone, waits to be killed. Each
# line is one write(2) to the pipe, so the two processes' lines never interleave; but when the child
# ties itself at once, its "tied" may come before or after the parent's pid line.
PARENT = """
import os, sys, time
from pedl.harness import zygote
how, when = sys.argv[1:]
parent = os.getpid()
lifeline, held = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(held)
    while when == "late" and os.getppid() == parent:
        time.sleep(0.01)
    zygote._tie_to_parent(**({"parent": parent} if how == "pid" else {"lifeline": lifeline}))
    os.write(1, b"tied\\n")
    time.sleep(120)
    os._exit(0)
os.write(1, f"{pid}\\n".encode())  # one write: the child's line cannot land inside it
if when == "late":
    os._exit(0)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not _alive(pid)


@pytest.mark.parametrize("how", ["pid", "lifeline"])
def test_a_child_whose_parent_exited_before_it_tied_itself_exits(how: str) -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, how, "late"], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        parent.wait(timeout=30)
        assert _gone_within(child, 30)
        assert parent.stdout.read() == ""  # it never got past the tie
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


@pytest.mark.parametrize("how", ["pid", "lifeline"])
def test_a_tied_child_lives_with_its_parent_and_dies_with_it(how: str) -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, how, "now"], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    # The forked child may run first: its "tied" line can precede the parent's pid line.
    lines = [parent.stdout.readline(), parent.stdout.readline()]
    pids = [int(line) for line in lines if line.strip().isdigit()]
    try:
        assert "tied\n" in lines and len(pids) == 1, lines
        child = pids[0]
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        assert _gone_within(child, 30)
    finally:
        parent.kill()
        parent.wait()
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
