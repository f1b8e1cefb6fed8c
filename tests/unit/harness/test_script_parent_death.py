"""A Core API script started by the harness dies with it, even when the harness is SIGKILLed, and
an entrypoint that cannot start is named in one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pedl.harness.core_api_trial import dying_with_this_process

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux parent-death signal")

PARENT = """
import subprocess, sys, time
from pedl.harness.core_api_trial import dying_with_this_process
child = subprocess.Popen(dying_with_this_process([sys.executable, "-c", "import time; time.sleep(120)"]))
print(child.pid, flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_the_script_dies_when_its_harness_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 30
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child)
    finally:
        parent.kill()
        parent.wait()


def test_the_script_runs_with_its_arguments_environment_and_directory(tmp_path: Path) -> None:
    script = "import os, sys; print(sys.argv[1:], os.environ['MARK'], os.getcwd())"
    out = subprocess.run(
        dying_with_this_process([sys.executable, "-c", script, "a b", "c"]),
        cwd=tmp_path,
        env={**os.environ, "MARK": "m"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == f"['a b', 'c'] m {tmp_path}"


def test_a_program_that_cannot_start_is_named() -> None:
    done = subprocess.run(dying_with_this_process(["./no-such-entrypoint"]), capture_output=True, text=True)
    assert done.returncode == 127
    assert "cannot start the entrypoint './no-such-entrypoint'" in done.stderr
