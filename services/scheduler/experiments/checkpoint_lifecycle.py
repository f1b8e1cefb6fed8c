"""Which stored checkpoints an experiment keeps (its save_* policy) and their deletion."""

from __future__ import annotations

import json
from typing import Any

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
            exp.gc = self._load_ledger(exp.id, exp.config)
        # Live trials without a checkpoint have nothing to keep.
        doomed = exp.gc.collect(
            live_trial_ids=set(exp.checkpointed),
            protected={t.latest_checkpoint_uuid for t in exp.checkpointed.values()},
        )
        if doomed:
            self.deleter.delete(doomed)

    def apply_policy(self, exp_id: int, config: Any, dry_run: bool = False) -> list[str]:
        """A changed save_* policy (`det e set gc-policy`), of a live or an ended experiment: a ledger
        under it decides afresh; the uuids it deletes (would delete, with `dry_run`)."""
        exp = self.state.experiments.get(exp_id)
        ledger = self._load_ledger(exp_id, config)
        live = exp.checkpointed if exp is not None else {}
        doomed = ledger.collect(
            live_trial_ids=set(live), protected={t.latest_checkpoint_uuid for t in live.values()}
        )
        if not dry_run:
            if exp is not None:
                exp.gc = ledger
            if doomed:
                self.deleter.delete(doomed)
        return doomed

    def _load_ledger(self, exp_id: int, config: Any) -> CheckpointLedger:
        """The experiment's checkpoints and metrics as stored (once per experiment and scheduler)."""
        ledger = CheckpointLedger(GCPolicy.from_storage(config.checkpoint_storage, config.smaller_is_better))
        metric = config.searcher_metric
        for v in result_ops.experiment_validations(self.db, exp_id):
            ledger.add_metric(v["trial_id"], v["total_batches"], json.loads(v["metrics_json"]).get(metric))
        for r in result_ops.experiment_checkpoints(self.db, exp_id):
            ledger.add_checkpoint(CheckpointRef(r["uuid"], r["trial_id"], r["total_batches"]))
        return ledger

    def mark_deleted(self, uuid: str) -> None:
        """The deleter removed the checkpoint's bytes: the ledger and the row say so."""
        for exp in self.state.experiments.values():
            if exp.gc is not None and exp.gc.deleted(uuid):
                break
        result_ops.mark_checkpoint_deleted(self.db, uuid)
        self.db.flush()
