"""What every room of the experiment manager reads and changes: the live experiments and trials,
the indexes the hot paths use, and the events that wake the scheduling loop and the API."""

from __future__ import annotations

import asyncio

import structlog

from pedl.config.image_environments import ImageRule
from pedl_scheduler.cluster import AgentHandle, Cluster
from pedl_scheduler.experiments.restart_policy import RestartBackoff
from pedl_scheduler.request_limits import RequestLimits
from pedl_scheduler.runtime import ExperimentRuntime, TrialRuntime
from pedl_scheduler.storage import Storage
from pedl_server_auth import trial_token

log = structlog.get_logger(component="experiments")


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
        image_rules: tuple[ImageRule, ...] = (),
    ) -> None:
        self.db = db
        self.cluster = cluster
        self.checkpoint_store_address = checkpoint_store_address
        self.model_definition_limit = model_definition_limit
        self.reconnect_grace = reconnect_grace
        self.restart_backoff = restart_backoff or RestartBackoff()
        self.request_limits = request_limits or RequestLimits()
        # Determined image names mapped to agents' environments (--image-environment).
        self.image_rules = image_rules
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
        if self._notifying:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # called outside the loop (a test driving the manager synchronously)
            try:
                loop = asyncio.get_event_loop_policy().get_event_loop()
            except RuntimeError:
                return  # no loop at all, so no follower waits on one
        if loop.is_closed():
            return
        self._notifying = True
        loop.create_task(self._notify_all())

    async def _notify_all(self) -> None:
        self._notifying = False
        async with self.changed:
            self.changed.notify_all()

    # ---- the indexes, kept by every room that changes what they index ------------------------

    def current_run(self, agent: AgentHandle, trial_id: int, run_id: int) -> TrialRuntime | None:
        """The trial if a message is from its current run on this agent; stale messages are dropped."""
        trial = self.trials.get(trial_id)
        if trial is None or trial.run_id != run_id or agent.id not in trial.gang_agents():
            log.info("dropped message from a stale run", trial_id=trial_id, run_id=run_id, agent_id=agent.id)
            return None
        return trial

    def wait_for(self, child: TrialRuntime, parent_id: int | None) -> None:
        """Sets (or clears) the trial whose checkpoint the child waits for, keeping the index."""
        if child.waiting_on is not None:
            waiting = self.children.get(child.waiting_on, set())
            waiting.discard(child.id)
            if not waiting:
                self.children.pop(child.waiting_on, None)
        child.waiting_on = parent_id
        if parent_id is not None:
            self.children.setdefault(parent_id, set()).add(child.id)

    def waiting_children(self, parent_id: int) -> list[TrialRuntime]:
        return [self.trials[c] for c in sorted(self.children.get(parent_id, ())) if c in self.trials]

    def holds_checkpoint(self, trial: TrialRuntime) -> None:
        """Indexes the trial among its experiment's trials holding a checkpoint (GC keeps theirs)."""
        exp = self.experiments.get(trial.experiment_id)
        if exp is not None and trial.latest_checkpoint_uuid:
            exp.checkpointed[trial.id] = trial
