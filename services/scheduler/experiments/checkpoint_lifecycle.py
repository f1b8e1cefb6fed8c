"""Which stored checkpoints an experiment keeps (its save_* policy), and every checkpoint deletion:
garbage collection and users' deletes both go DELETING -> the store -> DELETED (`CheckpointDeleter`)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from google.protobuf import json_format

from pedl.v1 import common_pb2
from pedl_scheduler.checkpoint_deleter import (
    COMPLETED,
    DELETED,
    MISSING,
    PARTIALLY_DELETED,
    CheckpointDeleter,
)
from pedl_scheduler.checkpoint_gc import CheckpointLedger, CheckpointRef, GCPolicy
from pedl_scheduler.experiments.checkpoint_needs import needed_by
from pedl_scheduler.experiments.errors import NotFound, UserError
from pedl_scheduler.experiments.state import SchedulerState
from pedl_scheduler.experiments.unit_of_work import UnitOfWork
from pedl_scheduler.runtime import ExperimentRuntime, TrialRuntime
from pedl_scheduler.storage.connection import Row
from pedl_scheduler.storage.ops import results as result_ops


class CheckpointLifecycle:
    def __init__(self, state: SchedulerState, work: UnitOfWork) -> None:
        self.state = state
        self.work = work
        self.db = state.db
        self.deleter = CheckpointDeleter(state.checkpoint_store_address, self.mark, self.experiment_of)

    def collect_garbage(self, exp: ExperimentRuntime) -> None:
        """Applies the experiment's save_* policy to its stored checkpoints."""
        if exp.gc is None:
            exp.gc = self._load_ledger(exp.id, exp.config)
        doomed = exp.gc.collect(
            live_trial_ids=set(exp.checkpointed), protected=self._protected(exp.checkpointed)
        )
        if doomed:
            # Once the rows this transaction writes are committed (a checkpoint it records among them).
            self.work.after_commit(lambda: self.deleter.delete(doomed))

    def apply_policy(self, exp_id: int, config: Any, dry_run: bool = False) -> list[str]:
        """A changed save_* policy (`det e set gc-policy`), of a live or an ended experiment: a ledger
        under it decides afresh; the uuids it deletes (would delete, with `dry_run`)."""
        exp = self.state.experiments.get(exp_id)
        ledger = self._load_ledger(exp_id, config)
        live = exp.checkpointed if exp is not None else {}
        doomed = ledger.collect(live_trial_ids=set(live), protected=self._protected(live))
        if not dry_run:
            if exp is not None:
                exp.gc = ledger
            if doomed:
                self.work.after_commit(lambda: self.deleter.delete(doomed))
        return doomed

    def _protected(self, live: dict[int, TrialRuntime]) -> set[str]:
        """Kept whatever the policy says: live trials' latest checkpoints (live trials without one have
        nothing to keep) and the warm-start sources of live experiments (maybe this one's)."""
        protected = {t.latest_checkpoint_uuid for t in live.values()}
        protected.update(e.warm_start_uuid for e in self.state.experiments.values() if e.warm_start_uuid)
        return protected

    def _load_ledger(self, exp_id: int, config: Any) -> CheckpointLedger:
        """The experiment's checkpoints and metrics as stored (once per experiment and scheduler)."""
        ledger = CheckpointLedger(GCPolicy.of(config.checkpoint_storage, config.smaller_is_better))
        metric = config.searcher_metric
        for v in result_ops.experiment_validations(self.db, exp_id):
            ledger.add_metric(v["trial_id"], v["total_batches"], json.loads(v["metrics_json"]).get(metric))
        for r in result_ops.experiment_checkpoints(self.db, exp_id):
            ledger.add_checkpoint(CheckpointRef(r["uuid"], r["trial_id"], r["total_batches"]))
        return ledger

    def rows(self, uuids: list[str]) -> list[Row]:
        """The checkpoints' rows (NotFound for one unknown or already deleted)."""
        rows = []
        for uuid in dict.fromkeys(uuids):
            row = result_ops.checkpoint_source(self.db, uuid)
            if row is None or row["state"] == DELETED:
                raise NotFound(f"checkpoint {uuid} not found" + (" (already deleted)" if row else ""))
            rows.append(row)
        return rows

    def refuse_if_needed(self, rows: list[Row]) -> None:
        """UserError naming what still needs one of these checkpoints."""
        for row in rows:
            if row["state"] in (COMPLETED, PARTIALLY_DELETED):
                reason = needed_by(self.state, row)
                if reason is not None:
                    raise UserError(f"checkpoint {row['uuid']} cannot be deleted now: {reason}")

    async def delete(self, uuids: list[str]) -> None:
        """A user's delete, after the owner check and `refuse_if_needed` (CheckpointError: store failed)."""
        await self.deleter.delete_now(uuids)

    def start_delete(self, uuids: list[str]) -> None:
        """A user's delete as Determined's master does it: the rows are DELETING (listed as deleted)
        and their GC tasks open when this returns; the tasks delete the files in the background."""
        self.deleter.start(uuids)

    def experiment_of(self, uuids: list[str]) -> dict[str, int]:
        """Each checkpoint's experiment id (0 where its row or experiment is gone)."""
        rows = {u: result_ops.checkpoint_source(self.db, u) for u in uuids}
        return {u: int(r["experiment_id"]) if r is not None else 0 for u, r in rows.items()}

    async def remove_files(self, uuid: str, globs: list[str]) -> str:
        """A user's `checkpoints/rm` of one checkpoint, after the owner check and `refuse_if_needed`:
        the store removes the files (CheckpointError: it failed or refused a glob), then the row
        records what is left as PARTIALLY_DELETED; a checkpoint left with no files is deleted as
        any other. The row's state now."""
        store = self.deleter.store()
        kept, removed = await asyncio.to_thread(store.remove_files, uuid, globs)
        if not kept.files:
            await self.deleter.delete_now([uuid])
            return DELETED
        row = result_ops.checkpoint_source(self.db, uuid)
        if row is None:  # deleted with its experiment meanwhile
            return DELETED
        if removed:
            recorded = common_pb2.Checkpoint()  # the scheduler's record keeps the user's metadata
            json_format.Parse(row["checkpoint_json"], recorded)
            del recorded.files[:]
            recorded.files.extend(kept.files)
            recorded.total_size = kept.total_size
            as_json = json_format.MessageToJson(recorded, indent=None)
            if result_ops.record_partial_deletion(self.db, uuid, as_json):
                return PARTIALLY_DELETED
            row = result_ops.checkpoint_source(self.db, uuid)
        return str(row["state"]) if row is not None else DELETED

    def mark(self, uuids: list[str], state: str) -> list[str]:
        """Moves the checkpoints' rows to `state` where it may follow theirs (`move_checkpoints`) and
        commits; the uuids moved. A deleted one leaves its experiment's ledger."""
        moved = result_ops.move_checkpoints(self.db, uuids, state)
        if state == DELETED:
            for uuid in uuids:  # its bytes are gone, whatever its row said
                for exp in self.state.experiments.values():
                    if exp.gc is not None and exp.gc.discard(uuid):
                        break
        if state == MISSING:
            self.state.lost_checkpoints.update(moved)
        elif state == COMPLETED:
            self.state.lost_checkpoints.difference_update(moved)
        return moved

    def load_lost(self) -> None:
        """At start-up: the checkpoints an earlier run found missing from the store."""
        self.state.lost_checkpoints = set(result_ops.checkpoints_in_state(self.db, MISSING))


def usable_checkpoint(state: SchedulerState, work: UnitOfWork, trial: TrialRuntime) -> None:
    """A trial whose latest checkpoint the store lost resumes from its newest one still stored,
    or from scratch, never from the lost one."""
    lost = trial.latest_checkpoint_uuid
    if lost not in state.lost_checkpoints:
        return
    own = [r for r in result_ops.checkpoints_of(state.db, trial.id) if r["state"] == COMPLETED]  # whole
    if own:
        row = own[-1]
        trial.latest_checkpoint_uuid = row["uuid"]
        trial.latest_checkpoint_batches = row["total_batches"]
        trial.latest_checkpoint_step = row["step_id"]
    else:
        trial.latest_checkpoint_uuid = ""
        trial.latest_checkpoint_batches = trial.latest_checkpoint_step = 0
        exp = state.experiments.get(trial.experiment_id)
        if exp is not None:
            exp.checkpointed.pop(trial.id, None)
    where = f"checkpoint {trial.latest_checkpoint_uuid}" if own else "scratch"
    work.log_line(trial, f"checkpoint {lost} is gone from the store: trial {trial.id} resumes from {where}")
    work.save_trial(trial)
