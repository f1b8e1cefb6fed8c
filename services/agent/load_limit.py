"""A time limit on loading a trial: from the harness's start to its first request for a workload.

A model definition whose import never returns (a blocking call at module level, an endless loop in
`__init__`) would otherwise hold its slots forever with nothing in its logs. The limit covers
importing the code, restoring its checkpoint and building its model and data loaders
(pedl-agent --trial-load-timeout).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

DEFAULT_LOAD_TIMEOUT = "1h"


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
