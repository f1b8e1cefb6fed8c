"""The two ends of every upload, streamed or direct: the record that makes a checkpoint visible,
or the removal of everything an upload that failed had stored."""

from __future__ import annotations

from typing import Any

from pedl import _log, _timeutil
from pedl.v1 import common_pb2
from pedl_checkpoint_store import layout
from pedl_checkpoint_store.storage import StorageBackend

log = _log.get_logger(component="checkpoint_store")


def publish_record(
    catalog: StorageBackend, checkpoint: common_pb2.Checkpoint, storage: dict[str, Any]
) -> None:
    """Completes `checkpoint` (its files all stored) and writes its record, atomically: from then on
    it is visible, also to a restarted store. Then drops the incomplete marker."""
    checkpoint.total_size = sum(f.size for f in checkpoint.files)
    checkpoint.state = common_pb2.CHECKPOINT_STATE_COMPLETED
    checkpoint.created_at = _timeutil.utc_now()
    catalog.put_bytes(
        layout.marker_key(checkpoint.uuid, layout.RECORD), layout.encode_record(checkpoint, storage)
    )
    catalog.delete(layout.marker_key(checkpoint.uuid, layout.INCOMPLETE))


def remove_partial(uuid: str, data: StorageBackend, catalog: StorageBackend) -> None:
    """Never raises for storage failures, so the error that caused the abort is the one reported;
    what cannot be removed now keeps its incomplete marker and is removed at the next start-up."""
    try:
        data.delete_prefix(uuid)
        catalog.delete_prefix(uuid)
    except OSError as e:
        log.warning("could not remove an aborted upload yet", uuid=uuid, error=str(e))
