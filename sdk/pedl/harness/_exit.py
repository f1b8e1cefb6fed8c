"""The harness's last act, shared by a spawned harness and a forked one."""

from __future__ import annotations

import os
import sys


def flush_and_exit(code: int) -> None:
    """Flushes what the trial printed (a broken pipe must not stop the exit), then exits at once:
    no module teardown, which with torch loaded holds the slot for a good part of a second."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 (exiting regardless)
            pass
    os._exit(code)
