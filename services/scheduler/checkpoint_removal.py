"""Users' checkpoint deletions: `DeleteCheckpoints` (whole checkpoints) and `RemoveCheckpointFiles`
(Determined's `POST /api/v1/checkpoints/rm`, its SDK's `Checkpoint.remove_files`, `det checkpoint rm`).

Both are authorized and refused alike: the experiment's owner or an admin, and nothing that still needs
a checkpoint (a live trial, a PBT child, a warm start) may lose it. The store does the work with the
cluster secret; the scheduler's row records the outcome (`CheckpointLifecycle`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import grpc
import grpc.aio

from pedl.checkpoints import CheckpointError, file_globs
from pedl.v1 import scheduler_pb2
from pedl_scheduler import convert
from pedl_scheduler.experiments import ExperimentManager, NotFound, UserError
from pedl_scheduler.storage import Row
from pedl_scheduler.storage.ops import results as result_ops

_STORE_FAILED = (
    "the checkpoint store failed ({}); the checkpoints are no longer listed, and the scheduler "
    "finishes deleting them once the store is back"
)


class CheckpointRemovalRpcs:
    manager: ExperimentManager
    # SchedulerApi's: aborts unless the caller owns the experiment or is an admin.
    _check_owner: Callable[[int, grpc.aio.ServicerContext], Awaitable[None]]

    async def _removable(self, uuids: list[str], context: grpc.aio.ServicerContext) -> list[Row]:
        """The checkpoints' rows once the caller may remove them and nothing needs them; else aborts."""
        if not uuids or not all(uuids):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "checkpoint_uuids must name checkpoints")
        try:
            rows = self.manager.checkpoints.rows(uuids)
        except NotFound as e:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(e))
        for exp_id in sorted({r["experiment_id"] for r in rows}):
            await self._check_owner(exp_id, context)
        try:
            self.manager.checkpoints.refuse_if_needed(rows)
        except UserError as e:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(e))
        return rows

    async def DeleteCheckpoints(  # noqa: N802
        self, request: scheduler_pb2.DeleteCheckpointsRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.DeleteCheckpointsResponse:
        rows = await self._removable(list(request.checkpoint_uuids), context)
        if request.in_background:
            self.manager.checkpoints.start_delete([r["uuid"] for r in rows])
            return scheduler_pb2.DeleteCheckpointsResponse(
                checkpoints=[convert.checkpoint({**r, "state": "DELETED"}) for r in rows]
            )
        try:
            await self.manager.checkpoints.delete([r["uuid"] for r in rows])
        except CheckpointError as e:
            await context.abort(grpc.StatusCode.ABORTED, _STORE_FAILED.format(e))
        return scheduler_pb2.DeleteCheckpointsResponse(
            checkpoints=[convert.checkpoint({**r, "state": "DELETED"}) for r in rows]
        )

    async def RemoveCheckpointFiles(  # noqa: N802
        self,
        request: scheduler_pb2.SchedulerServiceRemoveCheckpointFilesRequest,
        context: grpc.aio.ServicerContext,
    ) -> scheduler_pb2.SchedulerServiceRemoveCheckpointFilesResponse:
        globs = list(request.globs)
        try:
            for glob in globs:
                file_globs.check_glob(glob)
        except ValueError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        rows = await self._removable(list(request.checkpoint_uuids), context)
        lifecycle = self.manager.checkpoints
        for row in rows:
            try:
                await lifecycle.remove_files(row["uuid"], globs)
            except CheckpointError as e:
                await context.abort(
                    grpc.StatusCode.ABORTED, f"the checkpoint store failed on checkpoint {row['uuid']}: {e}"
                )
        now = [result_ops.checkpoint_source(lifecycle.db, r["uuid"]) for r in rows]
        gone = [{**r, "state": "DELETED"} for r in rows]  # deleted with their experiment meanwhile
        return scheduler_pb2.SchedulerServiceRemoveCheckpointFilesResponse(
            checkpoints=[convert.checkpoint(n or g) for n, g in zip(now, gone, strict=True)]
        )
