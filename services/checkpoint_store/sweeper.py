"""The orphan sweep: removes checkpoint bytes from storage that no record and no upload in progress
claims, once they are older than `--orphan-sweep-grace`. Runs at start-up and then every
`--orphan-sweep-interval`.

Orphans are what crashes leave where no marker points: a client still PUTting on presigned URLs
after the store restarted and removed its partial upload, a deletion or an abort whose storage was
down. A direct upload whose client died between its PUTs and FinishUpload (a harness dies with its
agent) is claimed until nothing was written for it for the grace period: it is then aborted. Each
pass also retries the removals that failed before, and removes files under kept checkpoints' prefixes
that their records no longer list (`stray_files.py`). What to remove is decided in `orphan_sweep`;
`CheckpointStore.remove_orphan` checks once more, under the store's lock, that nothing claims it,
and never removes a uuid whose record is on storage.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from pedl import _log
from pedl_checkpoint_store import tensorboard_files
from pedl_checkpoint_store.errors import StoreError
from pedl_checkpoint_store.orphan_sweep import abandoned, orphans
from pedl_checkpoint_store.storage import StorageBackend
from pedl_checkpoint_store.store import CheckpointStore
from pedl_checkpoint_store.stray_files import StrayFiles

log = _log.get_logger(component="checkpoint_store")


@dataclass
class SweepReport:
    storages: int = 0
    removed: list[str] = field(default_factory=list)
    expired_uploads: list[str] = field(default_factory=list)
    abandoned_uploads: list[str] = field(default_factory=list)
    retried_removals: list[str] = field(default_factory=list)
    stray_files: list[str] = field(default_factory=list)  # 'uuid/path' of each
    failed_storages: list[str] = field(default_factory=list)


class OrphanSweeper:
    def __init__(self, store: CheckpointStore, grace_seconds: float) -> None:
        self.store = store
        self.grace = timedelta(seconds=grace_seconds)
        self.stray = StrayFiles(store, self.grace)

    async def run_forever(self, interval: float) -> None:
        """The first pass at once (start-up), then one every `interval` seconds."""
        while True:
            try:
                await asyncio.to_thread(self.sweep_once)
            except Exception:
                log.exception("orphan sweep failed; will retry")
            await asyncio.sleep(interval)

    def sweep_once(self) -> SweepReport:
        report = SweepReport()
        report.expired_uploads = self.store.direct_uploads.sweep()
        report.retried_removals = self.store.retry_unfinished_removals()
        report.stray_files = self.stray.sweep(_now())
        for where, backend in self._storages().items():
            report.storages += 1
            now = _now()  # before listing: what is written meanwhile only looks younger
            # Claimed before the listing or after it: a checkpoint deleted meanwhile is not an orphan.
            # Trials' TensorBoard files are no checkpoint's: never walked (orphans() would keep them too).
            skip = self.store.claimed() | {tensorboard_files.PREFIX}
            try:
                # Direct uploads' writes are listed still: they tell whether the upload is abandoned.
                newest = backend.newest_by_child(skip=skip - set(self.store.direct_uploads.uuids()))
            except (OSError, StoreError) as e:
                log.warning("orphan sweep could not list storage; will retry", storage=where, error=str(e))
                report.failed_storages.append(where)
                continue
            for uuid in abandoned(self.store.direct_uploads.started_in(where), newest, now, self.grace):
                if not self.store.direct_uploads.abort(uuid):
                    continue  # it finished meanwhile
                report.abandoned_uploads.append(uuid)
                log.warning(
                    "direct upload abandoned: nothing written for the grace period; aborted",
                    uuid=uuid,
                    storage=where,
                )
            skip |= self.store.claimed()  # after the listing: an upload begun meanwhile is claimed
            skip |= set(report.abandoned_uploads)  # removed by their abort
            for orphan in orphans(newest, skip, now, self.grace):
                try:
                    removed = self.store.remove_orphan(orphan.uuid, backend)
                except (OSError, StoreError) as e:
                    log.warning(
                        "orphan not removed; will retry", uuid=orphan.uuid, storage=where, error=str(e)
                    )
                    continue
                if removed:
                    report.removed.append(orphan.uuid)
                    log.warning(
                        "orphan checkpoint removed: no record or upload claimed it",
                        uuid=orphan.uuid,
                        storage=where,
                        age_seconds=round(orphan.age_seconds, 1),
                    )
        log.info(  # once a pass: an operator (or a test) sees the sweep runs, and what it did
            "orphan sweep done",
            storages=report.storages,
            removed=len(report.removed),
            expired_uploads=report.expired_uploads,
            abandoned_uploads=report.abandoned_uploads,
            retried_removals=report.retried_removals,
            stray_files=len(report.stray_files),
            failed_storages=report.failed_storages,
        )
        return report

    def _storages(self) -> dict[str, StorageBackend]:
        """Every storage the store has written to, by where it is (a bucket named by two configs with
        different keys is one storage)."""
        configs: dict[str, dict[str, Any]] = {"{}": {}}
        for config in [*self.store.known_storages.all(), *self.store.storage_configs()]:
            configs.setdefault(json.dumps(config, sort_keys=True), config)
        out: dict[str, StorageBackend] = {}
        for config in configs.values():
            try:
                backend, normalized = self.store.resolver.resolve(config)
                self.store.known_storages.note(normalized)  # e.g. named only by records older than the list
            except (OSError, StoreError) as e:
                where = config.get("bucket") or config.get("host_path") or "?"
                log.warning("orphan sweep skips a storage it cannot use", storage=where, error=str(e))
                continue
            out.setdefault(backend.describe(), backend)
        return out


def _now() -> datetime:
    return datetime.now(timezone.utc)
