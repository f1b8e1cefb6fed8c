"""Edits to a recorded checkpoint's own document (`checkpoints.checkpoint_json`), apart from its state."""

from __future__ import annotations

from sqlalchemy import bindparam, update

from pedl_scheduler.storage.connection import Storage
from pedl_scheduler.storage.tables import checkpoints

_SET_JSON = (
    update(checkpoints)
    .where(checkpoints.c.uuid == bindparam("ckpt_uuid"))
    .values(checkpoint_json=bindparam("checkpoint_json"))
)


def set_checkpoint_json(s: Storage, uuid: str, checkpoint_json: str) -> None:
    """Replaces the checkpoint's stored document (its user metadata changed), committed at once."""
    s.run(_SET_JSON, {"ckpt_uuid": uuid, "checkpoint_json": checkpoint_json})
