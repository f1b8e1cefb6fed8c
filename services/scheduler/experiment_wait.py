"""`WaitExperiment`: answer the moment an experiment ends, so `det e wait` and `--follow` do not
sleep through its end between polls."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

MAX_WAIT_SECONDS = 60.0
# Re-read the state this often even without a change notice (a change made outside the event loop).
RECHECK_SECONDS = 1.0
_TERMINAL = ("COMPLETED", "ERROR", "CANCELED")


async def wait_for_end(
    state_of: Callable[[], str | None], changed: asyncio.Condition, timeout: float
) -> str | None:
    """The experiment's state once it is terminal, or when `timeout` (at most a minute) has passed;
    `changed` is notified on every change the scheduler makes, so each wake re-reads the state."""
    deadline = time.monotonic() + min(max(timeout, 0.0), MAX_WAIT_SECONDS)
    while True:
        state = state_of()
        left = deadline - time.monotonic()
        if state is None or state in _TERMINAL or left <= 0:
            return state
        async with changed:
            try:
                await asyncio.wait_for(changed.wait(), timeout=min(left, RECHECK_SECONDS))
            except asyncio.TimeoutError:
                pass
