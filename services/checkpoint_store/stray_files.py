"""The orphan sweep's second job: bytes under a kept checkpoint's prefix that its record no longer
lists. `CheckpointStore.remove_files` rewrites the record before it deletes the files' bytes, so a
crash in between leaves them in storage, where the whole-prefix sweep never looks (the checkpoint is
claimed). Each pass lists the files of up to `FILE_CHECKS_PER_PASS` visible checkpoints, in uuid
order, going on where the last pass stopped; `orphan_sweep.stray_files` decides what goes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from pedl import _log
from pedl_checkpoint_store import layout
from pedl_checkpoint_store.errors import NotFound, StoreError
from pedl_checkpoint_store.orphan_sweep import FILE_CHECKS_PER_PASS, stray_files
from pedl_checkpoint_store.store import CheckpointStore

log = _log.get_logger(component="checkpoint_store")


@dataclass
class StrayFiles:
    store: CheckpointStore
    grace: timedelta
    per_pass: int = FILE_CHECKS_PER_PASS
    after: str = ""  # the last uuid checked: the next pass goes on past it

    def sweep(self, now: datetime) -> list[str]:
        """Checks the next `per_pass` visible checkpoints; 'uuid/path' of each file removed. `now` is
        taken before any listing: what is written meanwhile only looks younger."""
        uuids = sorted(self.store.claimed())  # uploads in progress among them are not found below
        turn = [u for u in uuids if u > self.after][: self.per_pass]
        if len(turn) < self.per_pass:  # round the end: the first ones again
            turn += [u for u in uuids if u <= self.after][: self.per_pass - len(turn)]
        removed: list[str] = []
        for uuid in turn:
            self.after = uuid
            try:
                removed += [f"{uuid}/{path}" for path in self._check(uuid, now)]
            except (OSError, StoreError) as e:
                log.warning("stray files of a checkpoint not checked; will retry", uuid=uuid, error=str(e))
        return removed

    def _check(self, uuid: str, now: datetime) -> list[str]:
        try:
            record, storage = self.store.record(uuid)
        except NotFound:
            return []  # an upload in progress, or deleted meanwhile
        backend, _ = self.store.resolver.resolve(storage)
        stored = backend.modified_under(layout.data_key(uuid, "").rstrip("/"))
        stray = stray_files(stored, {f.path for f in record.files}, now, self.grace)
        if not stray:
            return []
        try:  # read again: a removal of files meanwhile only adds strays; a delete takes all anyway
            record, _ = self.store.record(uuid)
        except NotFound:
            return []
        listed = {f.path for f in record.files}
        gone = [path for path in stray if path not in listed]
        for path in gone:
            backend.delete(layout.data_key(uuid, path))
            log.warning(
                "stray checkpoint file removed: its record no longer lists it",
                uuid=uuid,
                path=path,
                storage=backend.describe(),
            )
        return gone
