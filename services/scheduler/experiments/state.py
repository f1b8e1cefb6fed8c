"""What every room of the experiment manager reads and changes: the live experiments and trials,
the indexes the hot paths use, and the events that wake the scheduling loop and the API."""

from __future__ import annotations

import asyncio

from pedl_scheduler.cluster import Cluster
from pedl_scheduler.experiments.restart_policy import RestartBackoff
from pedl_scheduler.request_limits import RequestLimits
from pedl_scheduler.runtime import ExperimentRuntime, TrialRuntime
from pedl_scheduler.storage import Storage
from pedl_server_auth import trial_token


class SchedulerState:
    def __init__(
        self,
        db: Storage,
        cluster: Cluster,
        checkpoint_store_address: str,
        model_definition_limit: int,
        reconnect_grace: float,
        restart_backoff: RestartBackoff | None = None,
        request_limits: RequestLimits | None = None,
    ) -> None:
        self.db = db
        self.cluster = cluster
        self.checkpoint_store_address = checkpoint_store_address
        self.model_definition_limit = model_definition_limit
        self.reconnect_grace = reconnect_grace
        self.restart_backoff = restart_backoff or RestartBackoff()
        self.request_limits = request_limits or RequestLimits()
        # Signs each run's checkpoint-store credential (pedl_server_auth.trial_token); None without auth.
        self.cluster_secret: str | None = None
        self.trial_token_ttl_seconds: float = trial_token.DEFAULT_TTL_SECONDS
        self.experiments: dict[int, ExperimentRuntime] = {}
        self.trials: dict[int, TrialRuntime] = {}
        # Indexes the hot paths use instead of scanning every live trial (a search may queue
        # thousands): the trials holding slots, and the children waiting on each parent's checkpoint.
        self.running: dict[int, TrialRuntime] = {}
        self.children: dict[int, set[int]] = {}
        # Checkpoints whose bytes the store lost (MISSING): a trial never resumes from one.
        self.lost_checkpoints: set[str] = set()
        # Whether the last scheduling pass left trials queued: a run told to terminate then wakes
        # the scheduler, so one of them can take its slots over (a handoff).
        self.trials_waiting = False
        self.wake = asyncio.Event()
        self.changed = asyncio.Condition()
        self._notifying = False

    def notify(self) -> None:
        """Wakes the API's followers (log streams) once per loop turn, however many events it held."""
        if not self._notifying:
            self._notifying = True
            asyncio.get_event_loop().create_task(self._notify_all())

    async def _notify_all(self) -> None:
        self._notifying = False
        async with self.changed:
            self.changed.notify_all()
