"""A run that changes user keeps dying with its parent: the kernel clears the parent-death signal on a
change of user (prctl(2)), which let a forked, sandboxed harness outlive a SIGKILLed agent."""

from __future__ import annotations

import os
import signal

import pytest

from pedl.harness import _namespaces


@pytest.mark.skipif(os.geteuid() != 0, reason="changing user needs root")
def test_the_parent_death_signal_survives_dropping_to_the_runs_user() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _namespaces.die_with_parent(signal.SIGKILL)
            _namespaces.drop_all_capabilities(65534, 65534)
            os.write(write, str(_namespaces.parent_death_signal()).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    reported = os.read(read, 16)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert int(reported) == signal.SIGKILL
