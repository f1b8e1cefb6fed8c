"""The harness's part of a trial's timeline: phases it times, handed to the agent with each result.

A process-wide list, because the phases happen in code that knows nothing of the agent (loading the
model definition, building data loaders); `drain()` hands what was recorded to the next
CompleteWorkload. Off a cluster (local mode) nobody drains it and it stays a few entries long.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator

from pedl.v1 import common_pb2

# Seconds since the epoch at which the agent started (or forked) this process: the start of "imports".
T0_ENV = "PEDL_TIMELINE_T0"
# Kept short: a process that is never drained (local mode, a test) must not grow without bound.
MAX_PENDING = 1000

_pending: list[common_pb2.TimelinePhase] = []


def record(name: str, start: float, end: float | None = None) -> None:
    if len(_pending) < MAX_PENDING:
        _pending.append(
            common_pb2.TimelinePhase(
                name=name, start=start, end=time.time() if end is None else end, source="harness"
            )
        )


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Times the block as phase `name` (also when it raises: a failed restore took that long too)."""
    start = time.time()
    try:
        yield
    finally:
        record(name, start)


def process_started() -> float | None:
    """When the agent started this process ($PEDL_TIMELINE_T0), if it said."""
    raw = os.environ.get(T0_ENV, "")
    try:
        return float(raw) if raw else None
    except ValueError:
        return None


def drain() -> list[common_pb2.TimelinePhase]:
    out = list(_pending)
    _pending.clear()
    return out
