"""CheckpointStoreService over gRPC: translates messages and errors, runs storage work in threads."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator

import grpc
import grpc.aio
from google.protobuf import json_format

from pedl import _log
from pedl._server_auth import current_principal
from pedl.v1 import checkpoint_store_pb2 as pb
from pedl.v1 import checkpoint_store_pb2_grpc
from pedl_checkpoint_store.errors import DataLoss, InvalidArgument, NotFound, StoreError
from pedl_checkpoint_store.store import CHUNK_SIZE, CheckpointStore
from pedl_checkpoint_store.upload import Upload

_CODES: list[tuple[type[StoreError], grpc.StatusCode]] = [
    (InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (DataLoss, grpc.StatusCode.DATA_LOSS),
]

log = _log.get_logger(component="checkpoint_store")


def _code(error: StoreError) -> grpc.StatusCode:
    for cls, code in _CODES:
        if isinstance(error, cls):
            return code
    return grpc.StatusCode.FAILED_PRECONDITION


class CheckpointStoreServicer(checkpoint_store_pb2_grpc.CheckpointStoreServiceServicer):
    def __init__(self, store: CheckpointStore, chunk_size: int = CHUNK_SIZE) -> None:
        self.store = store
        self.chunk_size = chunk_size

    async def UploadCheckpoint(
        self, request_iterator: AsyncIterator[pb.UploadCheckpointRequest], context: grpc.aio.ServicerContext
    ) -> pb.UploadCheckpointResponse:
        upload: Upload | None = None
        started = time.monotonic()
        try:
            async for request in request_iterator:
                kind = request.WhichOneof("message")
                if kind == "header":
                    if upload is not None:
                        raise InvalidArgument("upload stream carries a second header")
                    caller = current_principal()
                    if caller.kind == "trial" and request.header.experiment_id != caller.experiment_id:
                        await context.abort(
                            grpc.StatusCode.PERMISSION_DENIED,
                            f"trials of experiment {caller.experiment_id} may store only its checkpoints",
                        )
                    upload = await asyncio.to_thread(self._begin, request.header)
                elif kind == "chunk":
                    if upload is None:
                        raise InvalidArgument("upload stream must start with a header")
                    await asyncio.to_thread(upload.add_chunk, request.chunk)
                else:
                    raise InvalidArgument("upload message has neither header nor chunk")
            if upload is None:
                raise InvalidArgument("upload stream ended without a header")
            checkpoint = await asyncio.to_thread(upload.finish)
        except StoreError as e:
            if upload is not None:
                await asyncio.to_thread(upload.abort)
            log.warning("upload rejected", uuid=upload.uuid if upload else None, error=str(e))
            await context.abort(_code(e), str(e))
        except OSError as e:
            if upload is not None:
                await asyncio.to_thread(upload.abort)
            log.error("upload failed in storage", uuid=upload.uuid if upload else None, error=str(e))
            await context.abort(grpc.StatusCode.INTERNAL, f"checkpoint storage failed: {e}")
        except BaseException:
            # Client gone (cancellation) or a storage failure: leave nothing behind.
            if upload is not None:
                upload.abort()
                log.warning("upload aborted", uuid=upload.uuid)
            raise
        seconds = time.monotonic() - started
        log.info(
            "checkpoint stored",
            uuid=checkpoint.uuid,
            experiment_id=checkpoint.experiment_id,
            trial_id=checkpoint.trial_id,
            files=len(checkpoint.files),
            bytes=checkpoint.total_size,
            seconds=round(seconds, 3),
        )
        return pb.UploadCheckpointResponse(checkpoint=checkpoint)

    def _begin(self, header: pb.UploadHeader) -> Upload:
        storage = json_format.MessageToDict(header.storage) if header.HasField("storage") else {}
        return self.store.begin_upload(
            experiment_id=header.experiment_id,
            trial_id=header.trial_id,
            total_batches=header.total_batches,
            metadata=dict(header.metadata),
            storage=storage,
        )

    async def DownloadCheckpoint(
        self, request: pb.DownloadCheckpointRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.DownloadCheckpointResponse]:
        chunks: Iterator[pb.FileChunk] | None = None
        try:
            checkpoint, chunks = self.store.open_download(request.uuid, self.chunk_size)
            yield pb.DownloadCheckpointResponse(checkpoint=checkpoint)
            while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
                yield pb.DownloadCheckpointResponse(chunk=chunk)
        except StoreError as e:
            await context.abort(_code(e), str(e))
        except OSError as e:
            log.error("download failed in storage", uuid=request.uuid, error=str(e))
            await context.abort(grpc.StatusCode.INTERNAL, f"reading checkpoint {request.uuid} failed: {e}")
        finally:
            if chunks is not None and hasattr(chunks, "close"):
                try:
                    chunks.close()  # closes the open file; fails only while a worker is inside next()
                except ValueError:
                    pass

    async def GetCheckpoint(
        self, request: pb.GetCheckpointRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetCheckpointResponse:
        try:
            return pb.GetCheckpointResponse(checkpoint=self.store.get(request.uuid))
        except StoreError as e:
            await context.abort(_code(e), str(e))
            raise  # unreachable: abort raises

    async def ListCheckpoints(
        self, request: pb.ListCheckpointsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListCheckpointsResponse:
        checkpoints = self.store.list(experiment_id=request.experiment_id, trial_id=request.trial_id)
        return pb.ListCheckpointsResponse(checkpoints=checkpoints)

    async def DeleteCheckpoint(
        self, request: pb.DeleteCheckpointRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteCheckpointResponse:
        try:
            await asyncio.to_thread(self.store.delete, request.uuid)
        except StoreError as e:
            await context.abort(_code(e), str(e))
        log.info("checkpoint deleted", uuid=request.uuid)
        return pb.DeleteCheckpointResponse()
