"""Which stored checkpoints an experiment keeps (its save_* policy) and their deletion."""

from __future__ import annotations

import json

from pedl_scheduler.checkpoint_deleter import CheckpointDeleter
from pedl_scheduler.checkpoint_gc import CheckpointLedger, CheckpointRef, GCPolicy
from pedl_scheduler.experiments.state import SchedulerState
from pedl_scheduler.runtime import ExperimentRuntime
from pedl_scheduler.storage.ops import results as result_ops


class CheckpointLifecycle:
    def __init__(self, state: SchedulerState) -> None:
        self.state = state
        self.db = state.db
        self.deleter = CheckpointDeleter(state.checkpoint_store_address, self.mark_deleted)

    def collect_garbage(self, exp: ExperimentRuntime) -> None:
        """Applies the experiment's save_* policy to its stored checkpoints."""
        if exp.gc is None:
            exp.gc = self._load_ledger(exp)
        # Live trials without a checkpoint have nothing to keep.
        doomed = exp.gc.collect(
            live_trial_ids=set(exp.checkpointed),
            protected={t.latest_checkpoint_uuid for t in exp.checkpointed.values()},
        )
        if doomed:
            self.deleter.delete(doomed)

    def _load_ledger(self, exp: ExperimentRuntime) -> CheckpointLedger:
        """The experiment's checkpoints and metrics as stored (once per experiment and scheduler)."""
        ledger = CheckpointLedger(
            GCPolicy.from_storage(exp.config.checkpoint_storage, exp.config.smaller_is_better)
        )
        metric = exp.config.searcher_metric
        for v in result_ops.experiment_validations(self.db, exp.id):
            ledger.add_metric(v["trial_id"], v["total_batches"], json.loads(v["metrics_json"]).get(metric))
        for r in result_ops.experiment_checkpoints(self.db, exp.id):
            ledger.add_checkpoint(CheckpointRef(r["uuid"], r["trial_id"], r["total_batches"]))
        return ledger

    def mark_deleted(self, uuid: str) -> None:
        """The deleter removed the checkpoint's bytes: the ledger and the row say so."""
        for exp in self.state.experiments.values():
            if exp.gc is not None and exp.gc.deleted(uuid):
                break
        result_ops.mark_checkpoint_deleted(self.db, uuid)
        self.db.flush()
