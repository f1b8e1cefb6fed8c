"""Time limits on a trial: loading (from the harness's start to its first request for a workload),
and, once loaded, a workload that goes without a result (a hung step: `--trial-idle-timeout`).

A model definition whose import never returns (a blocking call at module level, an endless loop in
`__init__`) would otherwise hold its slots forever with nothing in its logs. The limit covers
importing the code, restoring its checkpoint and building its model and data loaders
(pedl-agent --trial-load-timeout).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

# Minutes, not an hour: in a search, a definition stuck at import holds its slots from every trial.
DEFAULT_LOAD_TIMEOUT = "15m"


async def watch_load(loaded: asyncio.Event, seconds: float, on_timeout: Callable[[str], None]) -> None:
    """Calls `on_timeout(reason)` unless `loaded` is set within `seconds`."""
    try:
        await asyncio.wait_for(loaded.wait(), seconds)
    except asyncio.TimeoutError:
        on_timeout(
            f"the trial did not finish loading (importing its model definition, restoring its checkpoint, "
            f"building its model and data) within {seconds:g} s, this agent's limit "
            "(pedl-agent --trial-load-timeout); the run was killed"
        )


async def watch_idle(
    busy_since: Callable[[], float | None],
    seconds: float,
    on_timeout: Callable[[str], None],
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Calls `on_timeout(reason)` once the workload the harness holds has gone `seconds` without a
    result (`busy_since()`: when it took it, None while it holds none: waiting on the scheduler
    is not the trial's fault). Checks a few times per `seconds`, at least every 5 s."""
    while True:
        await asyncio.sleep(min(5.0, seconds / 4))
        since = busy_since()
        if since is not None and clock() - since >= seconds:
            on_timeout(
                f"the trial reported nothing for {seconds:g} s while running a workload, this agent's limit "
                "(pedl-agent --trial-idle-timeout); the run was killed"
            )
            return
