"""`pedl experiment activate` of an experiment that ended ERROR because the infrastructure failed it.

Since fault budgets, the infrastructure never ends a trial (it waits for it), but an older pedl did:
its trials spent their `max_restarts` on a store outage or a lost agent and ended ERROR, and with
them the experiment. Activating such an experiment revives it: each trial the infrastructure ended
is live again (its restarts unspent) and resumes from its latest checkpoint, and its searcher hears
`on_trial_revived`, which takes the trial's early exit back (a journaled event, so a restarted
scheduler replays it). Trials that failed in their own code stay ERROR; an experiment with none
that the infrastructure ended is refused, since activating it would only fail again.
"""

from __future__ import annotations

import structlog

from pedl.searcher import SearcherError
from pedl_scheduler.experiments import machine, recovery
from pedl_scheduler.experiments.effects import Emit, ResumeWaits
from pedl_scheduler.experiments.errors import UserError
from pedl_scheduler.experiments.restart_policy import ended_by_infrastructure
from pedl_scheduler.experiments.state import SchedulerState
from pedl_scheduler.experiments.unit_of_work import UnitOfWork
from pedl_scheduler.runtime import TrialRuntime
from pedl_scheduler.storage import Row
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import results as result_ops
from pedl_scheduler.storage.ops import trials as trial_ops

log = structlog.get_logger(component="experiments")


class Revival:
    def __init__(self, state: SchedulerState, work: UnitOfWork, emit: Emit) -> None:
        self.state = state
        self.work = work
        self.emit = emit  # the searcher taking the revived trials back
        self.db = state.db

    def revive(self, exp_id: int) -> None:
        """Revives the ERROR experiment's infrastructure-ended trials; UserError when it has none."""
        row = experiment_ops.experiment(self.db, exp_id)
        assert row is not None and row["state"] == "ERROR"
        revivable = self._revivable(row)
        with self.work.transaction():
            for t in revivable:
                trial_ops.revive_trial(self.db, t["id"])
            experiment_ops.reopen_experiment(self.db, exp_id)
            self.db.flush()
            reopened = experiment_ops.experiment(self.db, exp_id)
            assert reopened is not None
            exp = recovery.load(self.state, reopened)
            self.emit(exp, [], [ResumeWaits()])
            for t in revivable:
                trial = exp.live[t["request_id"]]
                self._still_stored_checkpoint(trial)
                origin = (
                    f"checkpoint {trial.latest_checkpoint_uuid} (batch {trial.latest_checkpoint_batches})"
                    if trial.latest_checkpoint_uuid
                    else "the beginning"
                )
                self.work.log_line(
                    trial,
                    f"trial {trial.id} revived by activate: it had ended ERROR because the infrastructure "
                    f"failed it ({_last_line(t['error'])}); it resumes from {origin}, its restarts unspent",
                )
                self.emit(
                    exp,
                    [trial],
                    [machine.SearcherDecided(exp.journal.call("on_trial_revived", t["request_id"]))],
                )
        log.info("experiment revived", experiment_id=exp_id, trials=[t["id"] for t in revivable])
        self.state.wake.set()
        self.state.notify()

    def _still_stored_checkpoint(self, trial: TrialRuntime) -> None:
        """The ended experiment's save_* policy may have deleted the trial's latest checkpoint: it goes
        on from its newest one still stored, or from the beginning."""
        stored = [r for r in result_ops.checkpoints_of(self.db, trial.id) if r["state"] == "COMPLETED"]
        if any(c["uuid"] == trial.latest_checkpoint_uuid for c in stored) or not trial.latest_checkpoint_uuid:
            return
        newest = stored[-1] if stored else None
        trial.latest_checkpoint_uuid = newest["uuid"] if newest else ""
        trial.latest_checkpoint_batches = newest["total_batches"] if newest else 0
        trial.latest_checkpoint_step = newest["step_id"] if newest else 0
        if newest is None:
            exp = self.state.experiments.get(trial.experiment_id)
            if exp is not None:
                exp.checkpointed.pop(trial.id, None)
        self.work.save_trial(trial)

    def _revivable(self, row: Row) -> list[Row]:
        """The ERROR trials the infrastructure ended that the searcher can take back (tried on a copy)."""
        exp_id = row["id"]
        failed = [t for t in trial_ops.trials_of(self.db, exp_id) if t["state"] == "ERROR"]
        candidates = [t for t in failed if ended_by_infrastructure(t["end_cause"], t["error"])]
        if not candidates:
            own = failed[0] if failed else None
            why = (
                f"trial {own['id']} failed in its own code ({_last_line(own['error'])})"
                if own
                else f"its search failed ({row['error'] or 'no trial was left'})"
            )
            raise UserError(
                f"experiment {exp_id} ended ERROR because {why}, not because of the infrastructure: "
                "activate revives only an experiment the infrastructure ended; fix the code and create "
                "a new experiment"
            )
        _, journal = recovery.restore_searcher(self.db, row)
        revivable, refused = [], []
        for t in candidates:
            try:
                journal.searcher.on_trial_revived(t["request_id"])
                revivable.append(t)
            except SearcherError as e:
                refused.append(f"trial {t['id']}: {e}")
        if not revivable:
            raise UserError(
                f"experiment {exp_id} ended ERROR through the infrastructure, but its searcher cannot take "
                f"its trials back: {'; '.join(refused)}"
            )
        return revivable


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no error recorded"
