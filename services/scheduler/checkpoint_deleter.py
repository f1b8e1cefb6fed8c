"""Deletes checkpoints through the checkpoint store in the scheduler's three steps, off the event loop.

Every deletion (garbage collection, `pedl checkpoint delete`, the reconciler) goes: the row is marked
DELETING and committed; the store deletes the bytes (with the cluster secret: users cannot delete at
the store); the row is marked DELETED. Only rows the first step moved reach the store: a checkpoint
whose result is not written yet is left alone (garbage collection offers it again later), so a row
never turns up COMPLETED after its bytes were deleted. A scheduler killed between steps leaves
DELETING rows, which the reconciler finishes at its next start (`checkpoint_reconciler.py`); a store
that is briefly away leaves them DELETING too, and the next collection or reconciliation tries again.

`PEDL_SCHEDULER_CRASH_AT` names a step after which the process SIGKILLs itself, so tests can crash
the scheduler exactly there: `checkpoint-deleting` (after DELETING committed) or
`checkpoint-store-deleted` (after the store confirmed, before DELETED).
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable

import structlog

from pedl.checkpoints import CheckpointError, CheckpointNotFound, CheckpointStoreClient

log = structlog.get_logger(component="checkpoint_gc")

CRASH_ENV = "PEDL_SCHEDULER_CRASH_AT"
# A checkpoint row's states; listings show COMPLETED ones only. MISSING: the store lost its bytes.
# PARTIALLY_DELETED: a user removed some of its files (`checkpoints/rm`); the rest are stored.
COMPLETED, DELETING, DELETED, MISSING = "COMPLETED", "DELETING", "DELETED", "MISSING"
PARTIALLY_DELETED = "PARTIALLY_DELETED"

# mark(uuids, state): moves the rows whose state `state` may follow and commits (telling the GC
# ledgers); returns the uuids moved.
Mark = Callable[[list[str], str], list[str]]


def crash_point(step: str) -> None:
    """Fault injection for tests: dies like `kill -9` when CRASH_ENV names this step."""
    if os.environ.get(CRASH_ENV) == step:
        log.warning("fault injection: killing the scheduler", step=step)
        os.kill(os.getpid(), signal.SIGKILL)


class CheckpointDeleter:
    def __init__(self, store_address: str, mark: Mark) -> None:
        self._address = store_address
        self._mark = mark
        self._pending: set[str] = set()
        self._client: CheckpointStoreClient | None = None

    def delete(self, uuids: list[str]) -> None:
        """In the background (garbage collection): failures are logged and retried later."""
        fresh = [u for u in uuids if u not in self._pending]
        if fresh:
            self._pending.update(fresh)
            asyncio.get_running_loop().create_task(self._background(fresh))

    async def _background(self, uuids: list[str]) -> None:
        for uuid in uuids:
            try:
                await self._steps([uuid])
            except CheckpointError as e:
                log.warning("checkpoint deletion failed; will retry", uuid=uuid, error=str(e))
            finally:
                self._pending.discard(uuid)

    async def delete_now(self, uuids: list[str]) -> None:
        """All three steps for each checkpoint (one already being deleted is left to that deletion);
        raises CheckpointError on the first the store fails: it and those after it stay DELETING,
        for a retry or the reconciler."""
        uuids = [u for u in dict.fromkeys(uuids) if u not in self._pending]
        self._pending.update(uuids)
        try:
            await self._steps(uuids)
        finally:
            self._pending.difference_update(uuids)

    async def _steps(self, uuids: list[str]) -> None:
        if not uuids:
            return
        marked = set(self._mark(uuids, DELETING))
        unrecorded = [u for u in uuids if u not in marked]
        if unrecorded:
            # Its result is not written yet (or never will be: the reconciler's orphan rules decide):
            # deleting its bytes now would leave the row that arrives later COMPLETED without them.
            log.warning("checkpoint not deleted: the scheduler has not recorded it", uuids=unrecorded)
        crash_point("checkpoint-deleting")
        for uuid in (u for u in uuids if u in marked):
            await self._delete_bytes(uuid)
            crash_point("checkpoint-store-deleted")
            self._mark([uuid], DELETED)
            log.info("checkpoint deleted", uuid=uuid)

    async def _delete_bytes(self, uuid: str) -> None:
        try:
            await asyncio.to_thread(self.store().delete, uuid)
        except CheckpointNotFound:
            pass  # gone already: an earlier attempt got this far, or the store lost it

    def store(self) -> CheckpointStoreClient:
        if self._client is None:
            self._client = CheckpointStoreClient(self._address)
        return self._client
