"""Which trial a `GetTrial` asks for: by its id, or by a checkpoint it took, deleted or not
(Determined's `GET /api/v1/checkpoints/{uuid}` answers a deleted checkpoint with its record, so
the REST API finds the trial, and the record, through this)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import grpc.aio

from pedl.v1 import scheduler_pb2
from pedl_scheduler.storage import Row
from pedl_scheduler.storage.ops import results as result_ops
from pedl_scheduler.storage.ops import trials as trial_ops


class TrialLookup:
    db: Any
    # SchedulerApi's: aborts unless the caller may read the trial's experiment.
    _require_trial: Callable[[int, grpc.aio.ServicerContext], Awaitable[None]]

    async def _asked_trial(
        self, request: scheduler_pb2.GetTrialRequest, context: grpc.aio.ServicerContext
    ) -> Row:
        """The trial's row once the caller may read it; NOT_FOUND for an unknown trial or checkpoint."""
        trial_id, uuid = request.trial_id, request.checkpoint_uuid
        if uuid:
            if trial_id:
                await context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT, "give trial_id or checkpoint_uuid, not both"
                )
            source = result_ops.checkpoint_source(self.db, uuid)
            if source is None:
                await context.abort(grpc.StatusCode.NOT_FOUND, f"checkpoint {uuid[:64]!r} not found")
            trial_id = source["trial_id"]
        await self._require_trial(trial_id, context)
        row = trial_ops.trial(self.db, trial_id)
        if row is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"trial {trial_id} not found")
        return row
