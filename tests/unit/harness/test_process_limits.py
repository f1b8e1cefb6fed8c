"""`pedl-agent --trial-pids-limit`: the harness lowers RLIMIT_NPROC before trial code runs, so a trial
that forks without end gets EAGAIN instead of filling the machine, and cannot raise it back."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pedl.harness.process_limits import PIDS_LIMIT_ENV, apply_pids_limit

FORKER = """
import os, resource, sys, time
from pedl.harness.process_limits import apply_pids_limit
# Processes and threads the user has now: the limit is theirs and 4 more.
mine = sum(len(os.listdir(f"/proc/{p}/task")) for p in os.listdir("/proc")
           if p.isdigit() and os.path.exists(f"/proc/{p}") and os.stat(f"/proc/{p}").st_uid == os.getuid())
os.environ["PEDL_TRIAL_PIDS_LIMIT"] = str(mine + 4)
apply_pids_limit()
try:
    resource.setrlimit(resource.RLIMIT_NPROC, (10**6, 10**6))
    print("raised")
except ValueError:
    pass
children = []
try:
    for _ in range(40):
        pid = os.fork()
        if pid == 0:
            time.sleep(5)
            os._exit(0)
        children.append(pid)
    print("forked all")
except BlockingIOError:
    print(f"EAGAIN after {len(children)}")
for pid in children:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
"""


def test_no_limit_asked_leaves_the_process_as_it_is() -> None:
    assert apply_pids_limit({}) == 0 and apply_pids_limit({PIDS_LIMIT_ENV: "0"}) == 0


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_NPROC as Linux counts it")
def test_a_trial_forking_without_end_gets_eagain_and_cannot_raise_its_limit(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", FORKER]
    if os.geteuid() == 0:  # root is exempt from RLIMIT_NPROC: run as a trial user, as a root agent does
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("setpriv is needed to run the check as an unprivileged user")
        argv = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "raised" not in out.stdout
    assert out.stdout.startswith("EAGAIN after "), out.stdout
    assert int(out.stdout.split()[-1]) <= 4
