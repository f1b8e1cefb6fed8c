"""Warm starts (`searcher.source_checkpoint_uuid` / `source_trial_id`): which checkpoint every trial of a
new experiment starts from, resolved once at create so that a later checkpoint of the source trial
does not change what the experiment's trials began with."""

from __future__ import annotations

from typing import Any

from pedl_scheduler.experiments.errors import UserError
from pedl_scheduler.storage.connection import Storage
from pedl_scheduler.storage.ops import results as result_ops
from pedl_server_auth import Principal, authz


def resolve_source(db: Storage, config: Any, requester: Principal) -> str:
    """The uuid of the checkpoint the config warm-starts from ("" for none), after checking that it
    exists and that `requester` owns its experiment (or is an admin)."""
    uuid = config.searcher.source_checkpoint_uuid
    trial_id = config.searcher.source_trial_id
    if uuid:
        row = result_ops.checkpoint_source(db, uuid)
        if row is None or row["state"] != "COMPLETED":
            state = "" if row is None else f" (it is {row['state']})"
            raise UserError(
                f"searcher.source_checkpoint_uuid: checkpoint {uuid} does not exist{state}; "
                "`pedl checkpoint list` shows the stored ones"
            )
        what = f"checkpoint {uuid}"
    elif trial_id is not None:
        row = result_ops.trial_source(db, int(trial_id))
        if row is None:
            raise UserError(f"searcher.source_trial_id: trial {trial_id} does not exist")
        latest = result_ops.checkpoint_source(db, row["uuid"]) if row["uuid"] else None
        if latest is None or latest["state"] != "COMPLETED":
            raise UserError(f"searcher.source_trial_id: trial {trial_id} has no checkpoint to start from")
        what = f"trial {trial_id}"
    else:
        return ""
    if not authz.may(requester, authz.Access.MANAGE, row["owner"], private=True):
        owner = f"user {row['owner']!r}" if row["owner"] else "no user"
        raise UserError(
            f"searcher: {what} belongs to experiment {row['experiment_id']} of {owner}: only its owner or "
            "an admin may warm-start from it"
        )
    return str(row["uuid"])
