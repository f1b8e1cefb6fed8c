"""Deletes checkpoints through the checkpoint store in the scheduler's three steps, off the event loop.

Every deletion (garbage collection, `pedl checkpoint delete`, the reconciler) goes: the row is marked
DELETING and committed, and a GC task is opened per experiment (`gc_tasks.py`, listed as Determined
lists its "Checkpoint GC" tasks); the store deletes the bytes (with the cluster secret: users cannot
delete at the store), a deletion's tasks one after another; the row is marked DELETED; the task
ends. Only rows the first step moved reach the store: a checkpoint whose result is not written yet is
left alone (garbage collection offers it again later), so a row never turns up COMPLETED after its
bytes were deleted.
A scheduler killed between steps leaves DELETING rows, which the reconciler finishes at its next start
(`checkpoint_reconciler.py`); a store that is briefly away leaves them DELETING too, and the next
collection or reconciliation tries again.

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
from pedl_scheduler.gc_tasks import GcTask, GcTasks

log = structlog.get_logger(component="checkpoint_gc")

CRASH_ENV = "PEDL_SCHEDULER_CRASH_AT"
# A checkpoint row's states; listings show COMPLETED ones only. MISSING: the store lost its bytes.
# PARTIALLY_DELETED: a user removed some of its files (`checkpoints/rm`); the rest are stored.
COMPLETED, DELETING, DELETED, MISSING = "COMPLETED", "DELETING", "DELETED", "MISSING"
PARTIALLY_DELETED = "PARTIALLY_DELETED"

# mark(uuids, state): moves the rows whose state `state` may follow and commits (telling the GC
# ledgers); returns the uuids moved.
Mark = Callable[[list[str], str], list[str]]
# experiment_of(uuids): each checkpoint's experiment id (0 where its experiment is gone).
ExperimentOf = Callable[[list[str]], dict[str, int]]


def crash_point(step: str) -> None:
    """Fault injection for tests: dies like `kill -9` when CRASH_ENV names this step."""
    if os.environ.get(CRASH_ENV) == step:
        log.warning("fault injection: killing the scheduler", step=step)
        os.kill(os.getpid(), signal.SIGKILL)


class CheckpointDeleter:
    def __init__(self, store_address: str, mark: Mark, experiment_of: ExperimentOf) -> None:
        self._address = store_address
        self._mark = mark
        self._experiment_of = experiment_of
        self._pending: set[str] = set()
        self._client: CheckpointStoreClient | None = None
        self.tasks = GcTasks()

    def delete(self, uuids: list[str]) -> None:
        """In the background (garbage collection): failures are logged and retried later."""
        fresh = [u for u in uuids if u not in self._pending]
        if fresh:
            self._pending.update(fresh)
            asyncio.get_running_loop().create_task(self._background(fresh, None))

    def start(self, uuids: list[str]) -> None:
        """Marks the checkpoints DELETING and opens their GC tasks now, which delete them in the
        background (a user's delete as Determined's master does it); a store failure is logged and the
        rows stay DELETING for the next collection or the reconciler."""
        uuids = [u for u in dict.fromkeys(uuids) if u not in self._pending]
        if not uuids:
            return
        self._pending.update(uuids)
        try:
            tasks = self._open(uuids)
        except BaseException:
            self._pending.difference_update(uuids)
            raise
        asyncio.get_running_loop().create_task(self._background(uuids, tasks))

    async def _background(self, uuids: list[str], tasks: list[GcTask] | None) -> None:
        """Runs the tasks (opening them first when None); ends with the uuids no longer pending."""
        try:
            for task in self._open(uuids) if tasks is None else tasks:
                await self._run(task, give_up=False)
        finally:
            self._pending.difference_update(uuids)

    async def delete_now(self, uuids: list[str]) -> None:
        """All three steps for each checkpoint (one already being deleted is left to that deletion);
        raises CheckpointError on the first the store fails: it and those after it stay DELETING,
        for a retry or the reconciler."""
        uuids = [u for u in dict.fromkeys(uuids) if u not in self._pending]
        self._pending.update(uuids)
        tasks: list[GcTask] = []
        try:
            tasks = self._open(uuids)
            for task in tasks:
                await self._run(task, give_up=True)
        finally:
            for task in tasks:
                self.tasks.end(task)
            self._pending.difference_update(uuids)

    def _open(self, uuids: list[str]) -> list[GcTask]:
        """Step one (rows DELETING, committed), and a GC task per experiment for the rows it moved."""
        if not uuids:
            return []
        marked = set(self._mark(uuids, DELETING))
        unrecorded = [u for u in uuids if u not in marked]
        if unrecorded:
            # Its result is not written yet (or never will be: the reconciler's orphan rules decide):
            # deleting its bytes now would leave the row that arrives later COMPLETED without them.
            log.warning("checkpoint not deleted: the scheduler has not recorded it", uuids=unrecorded)
        crash_point("checkpoint-deleting")
        moved = [u for u in uuids if u in marked]
        by_experiment: dict[int, list[str]] = {}
        for uuid, exp_id in self._experiment_of(moved).items():
            by_experiment.setdefault(exp_id, []).append(uuid)
        return self.tasks.open(by_experiment)

    async def _run(self, task: GcTask, give_up: bool) -> None:
        """Steps two and three for the task's checkpoints; ends the task. A deletion runs its tasks one
        after another (those not yet running wait); separate deletions run side by side. A store
        failure raises with `give_up`, else is logged and the next checkpoint is tried."""
        task.running = True
        try:
            for uuid in task.checkpoint_uuids:
                try:
                    await self._delete_bytes(uuid)
                except CheckpointError as e:
                    if give_up:
                        raise
                    log.warning("checkpoint deletion failed; will retry", uuid=uuid, error=str(e))
                    continue
                crash_point("checkpoint-store-deleted")
                self._mark([uuid], DELETED)
                log.info("checkpoint deleted", uuid=uuid, gc_task=task.task_id)
        finally:
            self.tasks.end(task)

    async def _delete_bytes(self, uuid: str) -> None:
        try:
            await asyncio.to_thread(self.store().delete, uuid)
        except CheckpointNotFound:
            pass  # gone already: an earlier attempt got this far, or the store lost it

    def store(self) -> CheckpointStoreClient:
        if self._client is None:
            self._client = CheckpointStoreClient(self._address)
        return self._client
