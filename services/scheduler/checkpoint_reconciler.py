"""Brings the scheduler's checkpoint records and the store's listing back into agreement: at start-up
(so a deletion a crash interrupted is finished) and then every `--checkpoint-reconcile-interval`.

What to repair is decided in `checkpoint_repair_plan.plan`; here both sides are read (the store's
listing first, then the rows, so a checkpoint recorded in between is never taken for an orphan) and
the repairs go through the same paths as every other change: deletions through `CheckpointDeleter`
(DELETING, the store, DELETED), states through `CheckpointLifecycle.mark`.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from datetime import datetime, timedelta, timezone

import structlog

from pedl.checkpoints import CheckpointError, CheckpointNotFound
from pedl.v1 import common_pb2
from pedl_scheduler.checkpoint_deleter import COMPLETED, MISSING, CheckpointDeleter, Mark
from pedl_scheduler.checkpoint_repair_plan import Plan, Stored, plan, to_check
from pedl_scheduler.storage import Storage
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import results as result_ops

log = structlog.get_logger(component="checkpoint_reconciler")

# Until the first pass succeeds (the store may start after the scheduler), it is retried this often.
FIRST_PASS_RETRY_SECONDS = 5.0
# Listed COMPLETED checkpoints whose files the store checks per pass (one existence check per file):
# at the default 300 s interval 10,000 checkpoints are all checked every 8 hours.
FILE_CHECKS_PER_PASS = 100


class CheckpointReconciler:
    def __init__(self, db: Storage, deleter: CheckpointDeleter, mark: Mark, grace_seconds: float) -> None:
        self.db = db
        self.deleter = deleter
        self.mark = mark
        self.grace = timedelta(seconds=grace_seconds)
        self._checked_up_to = ""  # the last uuid whose files were checked: the next pass goes on after it
        self._suspects: set[str] = set()  # found without files once: marked MISSING if so again

    async def run_forever(self, interval: float) -> None:
        done_once = False
        while True:
            try:
                await self.run_once()
                done_once = True
            except CheckpointError as e:
                log.warning("checkpoint reconciliation could not reach the store; will retry", error=str(e))
            except Exception:
                log.exception("checkpoint reconciliation failed; will retry")
            await asyncio.sleep(interval if done_once else min(interval, FIRST_PASS_RETRY_SECONDS))

    async def run_once(self) -> Plan:
        """One pass; raises CheckpointError when the store cannot be listed."""
        listing = await asyncio.to_thread(self.deleter.store().list)
        stored = [s for s in map(_stored, listing) if s is not None]
        rows = {r["uuid"]: r["state"] for r in result_ops.checkpoint_states(self.db)}
        todo = plan(stored, rows, experiment_ops.experiment_states(self.db), _now(), self.grace)
        window = to_check(stored, rows, self._checked_up_to, FILE_CHECKS_PER_PASS)
        self._checked_up_to = window[-1] if window else ""
        # A checkpoint found without files is checked again the next pass and marked only then: a
        # storage that is starting up may briefly answer "no such object" for what it holds.
        again = [u for u in sorted(self._suspects) if rows.get(u) == COMPLETED and u not in window]
        found = {u: files for u in window + again if (files := await self._missing_files(u))}
        gone_files = {u: files for u, files in found.items() if u in self._suspects}
        self._suspects = set(found) - set(gone_files)
        if self._suspects:
            log.warning(
                "checkpoints the store lists miss files at their storage; checked again next pass",
                files={u: found[u] for u in sorted(self._suspects)},
            )
        if todo.empty() and not gone_files:
            return todo
        log.info("checkpoint records and store disagree; repairing", **asdict(todo))
        missing = [u for u in todo.maybe_missing if await self._gone(u)]
        # Only rows still COMPLETED become MISSING: one a deletion took over while the store was asked
        # (its bytes went on purpose) keeps its state, and only MISSING ones become COMPLETED again.
        missing = self.mark(missing, MISSING) if missing else []
        if missing:
            log.error("checkpoints lost from the store; no longer listed or resumed from", uuids=missing)
        if gone_files:
            todo.files_missing = self.mark(sorted(gone_files), MISSING)
            log.error(
                "checkpoints the store lists have lost files at their storage; no longer listed or "
                "resumed from",
                files={u: gone_files[u] for u in todo.files_missing},
            )
        # Listed again, and whole: a record whose files are still gone stays MISSING.
        todo.found_again = [u for u in todo.found_again if await self._missing_files(u) == []]
        if todo.found_again:
            self.mark(todo.found_again, COMPLETED)
        if todo.orphans_kept:
            log.warning(
                "orphan checkpoints kept: their experiment still runs, or is not this scheduler's",
                uuids=todo.orphans_kept,
            )
        for uuid in todo.orphans_to_delete:
            await self._delete_orphan(uuid)
        try:
            await self.deleter.delete_now(todo.finish_deleting + todo.delete_again)
        except CheckpointError as e:
            log.warning("unfinished checkpoint deletions still fail; will retry", error=str(e))
        todo.maybe_missing = missing
        return todo

    async def _gone(self, uuid: str) -> bool:
        """Asked now, after the rows were read: a row exists only for what the store had listed."""
        try:
            await asyncio.to_thread(self.deleter.store().get, uuid)
        except CheckpointNotFound:
            return True
        return False

    async def _missing_files(self, uuid: str) -> list[str] | None:
        """The checkpoint's files its storage no longer holds, as the store checks them now; None when
        the store no longer has the checkpoint (a deletion took it meanwhile) or cannot check now (its
        storage unreachable: one experiment's storage must not hold up every other repair)."""
        try:
            return await asyncio.to_thread(self.deleter.store().missing_files, uuid)
        except CheckpointNotFound:
            return None
        except CheckpointError as e:
            log.warning("checkpoint files not checked; will retry", uuid=uuid, error=str(e))
            return None

    async def _delete_orphan(self, uuid: str) -> None:
        if result_ops.checkpoint_source(self.db, uuid) is not None:
            return  # recorded since the rows were read
        try:
            await asyncio.to_thread(self.deleter.store().delete, uuid)
        except CheckpointNotFound:
            return
        except CheckpointError as e:
            log.warning("orphan checkpoint not deleted; will retry", uuid=uuid, error=str(e))
            return
        log.info("orphan checkpoint deleted", uuid=uuid)


def _stored(c: common_pb2.Checkpoint) -> Stored | None:
    try:
        created = datetime.fromisoformat(c.created_at)
    except ValueError:
        log.warning("stored checkpoint with an unreadable created_at skipped", uuid=c.uuid)
        return None
    if created.tzinfo is None:
        created = created.replace(tzinfo=timezone.utc)
    return Stored(c.uuid, c.experiment_id, created)


def _now() -> datetime:
    return datetime.now(timezone.utc)
