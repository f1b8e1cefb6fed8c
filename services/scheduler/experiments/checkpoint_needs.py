"""Why a checkpoint may not be deleted now: something the scheduler will still start from it.

A live trial restarts from its latest checkpoint after a failure, and a queued (paused, preempted)
one resumes from it; a PBT child copies its parent's (the child waiting for the parent's next one
falls back to the latest); ASHA resumes a stopped trial it promotes from that trial's latest; every
trial of an experiment without a checkpoint of its own warm-starts from the experiment's source.
Reads the scheduler's live state only: an ended experiment needs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from pedl_scheduler.experiments.state import SchedulerState


def needed_by(state: SchedulerState, checkpoint: Mapping) -> str | None:
    """What needs the checkpoint (a `checkpoint_source` row), in words; None when nothing does."""
    uuid = checkpoint["uuid"]
    for exp in state.experiments.values():
        if exp.warm_start_uuid == uuid:
            return f"experiment {exp.id} ({exp.state}) warm-starts its trials from it"
        for trial in exp.live.values():
            if trial.latest_checkpoint_uuid != uuid:
                continue
            if trial.id != checkpoint["trial_id"]:
                return f"trial {trial.id} of experiment {exp.id} continues from it (PBT or ASHA)"
            if trial.running:
                return f"trial {trial.id} is running and restarts from it after a failure"
            return f"trial {trial.id} of experiment {exp.id} ({exp.state}) is queued to resume from it"
    if checkpoint["latest_checkpoint_uuid"] != uuid:
        return None  # only a trial's latest checkpoint is ever copied or promoted from
    parent = checkpoint["trial_id"]
    waiting = sorted(state.children.get(parent, ()))
    if waiting:
        return f"PBT child trial {waiting[0]} waits to copy trial {parent}'s latest checkpoint"
    owner = state.experiments.get(checkpoint["experiment_id"])
    if owner is not None and checkpoint["request_id"] in owner.searcher.resumable_requests():
        return f"experiment {owner.id}'s searcher may still promote trial {parent} and resume it from it"
    return None
