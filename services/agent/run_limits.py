"""What a started run may use on this agent: disk (disk.py), time to load and time without a result
(load_limit.py).

A run past a limit is killed by the agent (not the scheduler) with one clear reason; the reason is
also its last log line, and a run over its disk limit has its directory removed at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from .disk import over_limit_message, watch_usage
from .load_limit import watch_idle, watch_load


@dataclass
class RunLimits:
    disk_limit_bytes: int
    disk_poll_seconds: float
    load_timeout_seconds: float
    kill: Callable[[str], None]  # kills the run (by the agent) with the reason
    idle_timeout_seconds: float = 0.0
    busy_since: Callable[[], float | None] = lambda: None  # kills the run (by the agent) with the reason
    reason: str = ""  # why a limit killed the run; "" while none has
    over_disk: bool = False
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def start(self, trial_dir: Path, loaded: asyncio.Event, shm: Path | None = None) -> None:
        """`shm`: the run's /dev/shm (its sandbox's), counted with its directory against the disk limit."""
        if self.disk_limit_bytes:
            roots = [trial_dir] if shm is None else [trial_dir, shm]
            usage = watch_usage(roots, self.disk_limit_bytes, self._disk, self.disk_poll_seconds)
            self._tasks.append(asyncio.ensure_future(usage))
        if self.load_timeout_seconds:
            self._tasks.append(
                asyncio.ensure_future(watch_load(loaded, self.load_timeout_seconds, self._hit))
            )
        if self.idle_timeout_seconds:
            idle = watch_idle(self.busy_since, self.idle_timeout_seconds, self._hit)
            self._tasks.append(asyncio.ensure_future(idle))

    def stop(self) -> None:
        for task in self._tasks:
            task.cancel()

    def _disk(self, used: int) -> None:
        self.over_disk = True
        self._hit(over_limit_message(used, self.disk_limit_bytes))

    def _hit(self, reason: str) -> None:
        structlog.get_logger().warning("trial run over an agent limit", reason=reason)
        self.reason = reason
        self.kill(reason)
