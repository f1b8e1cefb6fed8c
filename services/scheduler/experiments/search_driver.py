"""Carrying out what the searcher decided (`machine.SearcherDecided` made into effects): new trials,
validation targets, closes; and the
trials that continue another's state (PBT children), which wait for or copy a checkpoint; and the
trials a searcher opens again (an ASHA promotion continues the same trial from its checkpoint)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from pedl.searcher import Close, Create, Operation, ValidateAfter
from pedl.sequencer import TrialSequencer
from pedl_scheduler.experiments.state import SchedulerState
from pedl_scheduler.experiments.trial_rows import trial_from_row
from pedl_scheduler.experiments.unit_of_work import UnitOfWork
from pedl_scheduler.runtime import ExperimentRuntime, TrialRuntime
from pedl_scheduler.storage import Row
from pedl_scheduler.storage.ops import trials as trial_ops


class SearchDriver:
    def __init__(self, state: SchedulerState, work: UnitOfWork) -> None:
        self.state = state
        self.work = work
        self.db = state.db
        self.trials = state.trials
        self.children = state.children

    def set_target(self, exp: ExperimentRuntime, op: ValidateAfter | Close) -> None:
        """The live trial trains on to a new validation target, or is closed."""
        trial = self._by_request(exp, op.request_id)
        if isinstance(op, ValidateAfter):
            trial.sequencer.add_target(op.length)
        else:
            trial.sequencer.close()
        self.work.save_trial(trial)
        self.work.dispatch(trial)

    def create_trials(
        self, exp: ExperimentRuntime, batch: Sequence[tuple[Create, Sequence[Operation]]]
    ) -> list[TrialRuntime]:
        """Inserts the searcher's new trials together (one round trip), each with the targets and close
        decided with it (`machine.CreateTrials`); the trials, for the searcher to hear of."""
        cfg = exp.config
        sequencers = []
        for op, decided in batch:
            sequencer = TrialSequencer.for_config(cfg, op.hparams)
            for d in decided:
                if isinstance(d, ValidateAfter):
                    sequencer.add_target(d.length)
                else:
                    sequencer.close()
            sequencers.append(sequencer)
            self._insert_trial(exp.id, op, sequencer)
        # The experiment's newest rows are these (this scheduler is its only writer, in this transaction).
        ids = {row["request_id"]: row["id"] for row in self._newest_trials(exp.id, len(batch))}
        created = []
        for (op, _), sequencer in zip(batch, sequencers, strict=True):
            trial = TrialRuntime(ids[op.request_id], exp.id, op.request_id, op.hparams, op.seed, sequencer)
            self.trials[trial.id] = trial
            exp.trial_ids.append(trial.id)
            exp.live[op.request_id] = trial
            if op.checkpoint_from:
                self._start_from_parent(exp, trial, op.checkpoint_from)
            created.append(trial)
        self.state.wake.set()
        return created

    def reopen(self, exp: ExperimentRuntime, request_id: str) -> None:
        """The searcher takes back a trial it closed: the same trial runs again from its latest
        checkpoint (kept for it: `resumable_requests`), toward the targets that follow."""
        self.db.flush()  # its row as it ended, should that have been in this transaction
        trial_id = trial_ops.trial_id_of_request(self.db, exp.id, request_id)
        row = None if trial_id is None else trial_ops.trial(self.db, trial_id)
        if row is None:
            raise KeyError(f"experiment {exp.id} has no trial for searcher request {request_id}")
        trial = trial_from_row(row)
        trial.state = "ACTIVE"
        trial.sequencer.reopen(trial.latest_checkpoint_batches, trial.latest_checkpoint_step)
        trial_ops.reopen_trial(self.db, trial.id)
        self.trials[trial.id] = trial
        exp.live[request_id] = trial
        self.state.holds_checkpoint(trial)
        self.work.save_trial(trial)
        origin = (
            f"its checkpoint {trial.latest_checkpoint_uuid} (batch {trial.latest_checkpoint_batches})"
            if trial.latest_checkpoint_uuid
            else "the beginning: it has no stored checkpoint"
        )
        self.work.log_line(trial, f"trial {trial.id} promoted by the searcher: it continues from {origin}")
        self.state.wake.set()

    def _insert_trial(self, exp_id: int, op: Create, sequencer: TrialSequencer) -> None:
        trial_ops.create_trial(
            self.db, exp_id, op.request_id, json.dumps(op.hparams), op.seed, json.dumps(sequencer.to_dict())
        )

    def _newest_trials(self, exp_id: int, count: int) -> list[Row]:
        return trial_ops.newest_trials(self.db, exp_id, count)

    def _start_from_parent(self, exp: ExperimentRuntime, child: TrialRuntime, parent_request: str) -> None:
        """The child resumes from the parent's state: now if it is saved, else after the parent saves it."""
        parent_id = trial_ops.trial_id_of_request(self.db, exp.id, parent_request)
        if parent_id is not None:
            self._record_parent(child.id, parent_id)
        parent = exp.live.get(parent_request)
        if parent is not None and parent.sequencer.checkpoint_due_before_stop():
            parent.sequencer.request_checkpoint()
            self.state.wait_for(child, parent.id)
            self.work.save_trial(child)
            self.work.save_trial(parent)
            self.work.dispatch(parent)
            return
        row = self._parent_checkpoint(exp.id, parent_request)
        if row is None or not row["latest_checkpoint_uuid"] or row["state"] != "COMPLETED":
            self.work.log_line(
                child,
                f"trial {child.id} starts from scratch: the trial it continues has no stored checkpoint",
            )
            return
        self.copy_checkpoint(
            child,
            row["id"],
            row["latest_checkpoint_uuid"],
            row["latest_checkpoint_batches"],
            row["latest_checkpoint_step"],
        )

    def _record_parent(self, child_id: int, parent_id: int) -> None:
        trial_ops.set_parent(self.db, child_id, parent_id)

    def _latest_checkpoint_of(self, trial_id: int) -> Row | None:
        return trial_ops.latest_checkpoint(self.db, trial_id)

    def _parent_checkpoint(self, exp_id: int, parent_request: str) -> Row | None:
        return trial_ops.parent_checkpoint(self.db, exp_id, parent_request)

    def resume_wait_for_parent(self, child: TrialRuntime, parent_id: int) -> None:
        """A child whose parent can no longer save the state it waits for (the parent ended, or its
        request was lost) copies the parent's newest stored checkpoint, or starts from scratch."""
        parent = self.trials.get(parent_id)
        if parent is not None and parent.sequencer.checkpoint_requested:
            self.state.wait_for(child, parent_id)
            return
        row = self._latest_checkpoint_of(parent_id)
        if row and row["latest_checkpoint_uuid"] and row["state"] == "COMPLETED":
            self.copy_checkpoint(
                child,
                parent_id,
                row["latest_checkpoint_uuid"],
                row["latest_checkpoint_batches"],
                row["latest_checkpoint_step"],
            )
            return
        self.state.wait_for(child, None)
        self.work.save_trial(child)
        self.work.log_line(
            child,
            f"trial {child.id} starts from scratch: trial {parent_id} ended without a stored checkpoint",
        )
        self.state.wake.set()

    def copy_checkpoint(
        self, child: TrialRuntime, parent_id: int, uuid: str, batches: int, step: int
    ) -> None:
        child.latest_checkpoint_uuid = uuid
        child.latest_checkpoint_batches = batches
        child.latest_checkpoint_step = step
        child.sequencer.restart_from(batches, step)
        self.state.wait_for(child, None)
        self.state.holds_checkpoint(child)
        self.work.save_trial(child)
        self.work.log_line(
            child, f"trial {child.id} continues from trial {parent_id}'s checkpoint {uuid} (batch {batches})"
        )
        self.state.wake.set()

    def checkpoint_stored(self, parent_id: int, uuid: str, batches: int, step: int) -> None:
        """The parent stored the checkpoint its waiting children asked for: each copies it."""
        for child in self.state.waiting_children(parent_id):
            self.copy_checkpoint(child, parent_id, uuid, batches, step)

    def parent_ended(self, parent_id: int) -> None:
        """The parent ended: its waiting children copy its newest stored checkpoint, or start afresh."""
        for child in self.state.waiting_children(parent_id):
            self.resume_wait_for_parent(child, parent_id)

    def resume_waits(self, exp: ExperimentRuntime) -> None:
        """A loaded experiment's children waiting on a parent look again (the parent may be gone)."""
        for trial_id in exp.trial_ids:
            child = self.trials.get(trial_id)
            if child is not None and child.waiting_on is not None:
                self.resume_wait_for_parent(child, child.waiting_on)

    def _by_request(self, exp: ExperimentRuntime, request_id: str) -> TrialRuntime:
        trial = exp.live.get(request_id)
        if trial is None:
            raise KeyError(f"experiment {exp.id} has no live trial for searcher request {request_id}")
        return trial
