"""`SetCheckpointMetadata`: a user's own metadata on a checkpoint (Determined's
`POST /api/v1/checkpoints/{uuid}/metadata`, its SDK's `Checkpoint.add_metadata`/`remove_metadata`).

The metadata is a JSON object that replaces the previous one whole (Determined's SDK merges or
removes keys on its side and sends the result). It is kept in the scheduler's record of the
checkpoint (`Checkpoint.user_metadata_json` inside `checkpoint_json`), so every listing the scheduler
answers carries it; the bytes in the store, and the store's own metadata, are left as they were
(as in Determined, the change is not written into checkpoint storage).
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import grpc.aio
from google.protobuf import json_format

from pedl.v1 import common_pb2, scheduler_pb2
from pedl_scheduler import convert
from pedl_scheduler.checkpoint_deleter import DELETED
from pedl_scheduler.storage.ops import checkpoint_records
from pedl_scheduler.storage.ops import results as result_ops

MAX_METADATA_BYTES = 64 * 1024


class MetadataError(ValueError):
    """Metadata the scheduler refuses, with the one line saying why."""


def parse_metadata(text: str) -> str:
    """The metadata as compact JSON, checked: an object of at most MAX_METADATA_BYTES, with finite
    numbers only (JSON has no NaN; Determined's master stores it as JSONB)."""
    if len(text.encode()) > MAX_METADATA_BYTES:
        raise MetadataError(f"checkpoint metadata is larger than {MAX_METADATA_BYTES // 1024} KiB")

    def no_constant(name: str) -> Any:
        raise MetadataError(f"checkpoint metadata holds {name}, which JSON has no spelling for")

    try:
        value = json.loads(text, parse_constant=no_constant)
    except json.JSONDecodeError as e:
        raise MetadataError(f"checkpoint metadata is not JSON: {e.msg} at character {e.pos}") from None
    if not isinstance(value, dict):
        raise MetadataError(f"checkpoint metadata must be a JSON object, got {type(value).__name__}")
    _finite(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _finite(value: Any) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise MetadataError("checkpoint metadata holds a number JSON cannot carry (NaN or infinite)")
    if isinstance(value, dict):
        for item in value.values():
            _finite(item)
    elif isinstance(value, list):
        for item in value:
            _finite(item)


class CheckpointMetadataRpcs:
    db: Any
    # SchedulerApi's: aborts unless the caller owns the experiment or is an admin.
    _check_owner: Callable[[int, grpc.aio.ServicerContext], Awaitable[None]]

    async def SetCheckpointMetadata(  # noqa: N802
        self, request: scheduler_pb2.SetCheckpointMetadataRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.SetCheckpointMetadataResponse:
        uuid = request.checkpoint_uuid
        row = result_ops.checkpoint_source(self.db, uuid) if uuid else None
        if row is None or row["state"] == DELETED:
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"checkpoint {uuid[:64]!r} not found" + (" (deleted)" if row is not None else ""),
            )
        await self._check_owner(row["experiment_id"], context)
        try:
            metadata_json = parse_metadata(request.metadata_json)
        except MetadataError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        checkpoint = convert.checkpoint(row)
        checkpoint.user_metadata_json = metadata_json
        stored = common_pb2.Checkpoint()
        stored.CopyFrom(checkpoint)
        stored.ClearField("state")  # the row's state column is the one source of a checkpoint's state
        checkpoint_records.set_checkpoint_json(self.db, uuid, json_format.MessageToJson(stored, indent=None))
        return scheduler_pb2.SetCheckpointMetadataResponse(checkpoint=checkpoint)
