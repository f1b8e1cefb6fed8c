"""A live trial's in-memory state rebuilt from its row: after a scheduler restart, and when the
searcher opens again a trial it had closed (an ASHA promotion continues the same trial)."""

from __future__ import annotations

import json

from pedl.sequencer import TrialSequencer
from pedl_scheduler.runtime import TrialRuntime
from pedl_scheduler.storage import Row


def trial_from_row(t: Row) -> TrialRuntime:
    return TrialRuntime(
        id=t["id"],
        experiment_id=t["experiment_id"],
        request_id=t["request_id"],
        hparams=json.loads(t["hparams_json"]),
        seed=t["seed"],
        sequencer=TrialSequencer.from_dict(json.loads(t["sequencer_json"])),
        run_id=t["run_id"],
        restarts=t["restarts"],
        latest_checkpoint_uuid=t["latest_checkpoint_uuid"],
        latest_checkpoint_batches=t["latest_checkpoint_batches"],
        latest_checkpoint_step=t["latest_checkpoint_step"],
        state=t["state"],
        best_validation=t["best_validation"],
    )
