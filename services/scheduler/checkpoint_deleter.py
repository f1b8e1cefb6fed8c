"""Deletes garbage-collected checkpoints through the checkpoint store, off the event loop.

A row is marked DELETED only once the store confirms (or says it never had it), so a store
that is briefly away just means the next collection tries again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

from pedl.checkpoints import CheckpointError, CheckpointNotFound, CheckpointStoreClient

log = structlog.get_logger(component="checkpoint_gc")


class CheckpointDeleter:
    def __init__(self, store_address: str, on_deleted: Callable[[str], None]) -> None:
        self._address = store_address
        self._on_deleted = on_deleted
        self._pending: set[str] = set()
        self._client: CheckpointStoreClient | None = None

    def delete(self, uuids: list[str]) -> None:
        fresh = [u for u in uuids if u not in self._pending]
        if fresh:
            self._pending.update(fresh)
            asyncio.get_running_loop().create_task(self._delete(fresh))

    async def _delete(self, uuids: list[str]) -> None:
        for uuid in uuids:
            try:
                await asyncio.to_thread(self._store().delete, uuid)
            except CheckpointNotFound:
                pass
            except CheckpointError as e:
                log.warning("checkpoint deletion failed; will retry", uuid=uuid, error=str(e))
                self._pending.discard(uuid)
                continue
            self._pending.discard(uuid)
            self._on_deleted(uuid)
            log.info("checkpoint deleted", uuid=uuid)

    def _store(self) -> CheckpointStoreClient:
        if self._client is None:
            self._client = CheckpointStoreClient(self._address)
        return self._client
