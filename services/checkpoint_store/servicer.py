"""CheckpointStoreService over gRPC: translates messages and errors, runs storage work in threads."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

import grpc
import grpc.aio
from google.protobuf import json_format

from pedl import _grpc, _log
from pedl.checkpoints.chunk_wire import serialize_response
from pedl.v1 import checkpoint_store_pb2 as pb
from pedl.v1 import checkpoint_store_pb2_grpc, common_pb2
from pedl_checkpoint_store.authz import StoreAuthz
from pedl_checkpoint_store.direct_upload import UploadedFile
from pedl_checkpoint_store.errors import InvalidArgument, NotFound, StoreError
from pedl_checkpoint_store.status_codes import status_code, storage_failure_code
from pedl_checkpoint_store.store import CHUNK_SIZE, CheckpointStore, DownloadItem
from pedl_checkpoint_store.tensorboard_files import TensorboardFiles
from pedl_checkpoint_store.tensorboard_servicer import TensorboardServicer
from pedl_checkpoint_store.upload import Upload
from pedl_checkpoint_store.upload_stream import StreamedUpload
from pedl_server_auth.authz import DELETE, READ, WRITE

log = _log.get_logger(component="checkpoint_store")

DOWNLOAD_THREADS = 64


class CheckpointStoreServicer(TensorboardServicer, checkpoint_store_pb2_grpc.CheckpointStoreServiceServicer):
    def __init__(
        self, store: CheckpointStore, chunk_size: int = CHUNK_SIZE, authz: StoreAuthz | None = None
    ) -> None:
        self.store = store
        self.chunk_size = chunk_size
        self.authz = authz or StoreAuthz(None, None)  # without one: authentication is off
        self.tensorboard = TensorboardFiles(store.catalog, store.resolver)
        # Each download waits in next() for its storage reads: a thread per call in flight, so that
        # ten clients' parallel ranges are not queued behind asyncio's default pool (CPUs + 4).
        self._downloads = ThreadPoolExecutor(DOWNLOAD_THREADS, thread_name_prefix="checkpoint-download")

    async def UploadCheckpoint(
        self, request_iterator: AsyncIterator[pb.UploadCheckpointRequest], context: grpc.aio.ServicerContext
    ) -> pb.UploadCheckpointResponse:
        stream: StreamedUpload[Upload] = StreamedUpload()
        started = time.monotonic()

        async def begin(header: pb.UploadHeader) -> Upload:
            await self.authz.check(context, WRITE, header.experiment_id, header.trial_id, header.uuid)
            return await asyncio.to_thread(self._begin, header)

        upload: Upload | None = None
        try:
            upload = await stream.feed(request_iterator, begin)
            checkpoint = await asyncio.to_thread(upload.finish)
        except StoreError as e:
            upload = stream.upload
            if upload is not None:
                await asyncio.to_thread(upload.abort)
            log.warning("upload rejected", uuid=upload.uuid if upload else None, error=str(e))
            await context.abort(status_code(e), str(e))
        except OSError as e:
            upload = stream.upload
            if upload is not None:
                await asyncio.to_thread(upload.abort)
            log.error("upload failed in storage", uuid=upload.uuid if upload else None, error=str(e))
            await context.abort(storage_failure_code(e), f"checkpoint storage failed: {e}")
        except BaseException:
            # Client gone (cancellation) or a storage failure: leave nothing behind.
            upload = stream.upload
            if upload is not None:
                upload.abort()
                log.warning("upload aborted", uuid=upload.uuid)
            raise
        _log_stored(checkpoint, started, direct=False)
        return pb.UploadCheckpointResponse(checkpoint=checkpoint)

    def _begin(self, header: pb.UploadHeader) -> Upload:
        return self.store.begin_upload(**_header_fields(header))

    async def BeginUpload(
        self, request: pb.BeginUploadRequest, context: grpc.aio.ServicerContext
    ) -> pb.BeginUploadResponse:
        header = request.header
        await self.authz.check(context, WRITE, header.experiment_id, header.trial_id, header.uuid)
        files = [(f.path, f.size) for f in request.files]
        async with _storage_errors(context, "direct upload rejected"):
            upload = await asyncio.to_thread(
                self.store.begin_direct_upload, files=files, **_header_fields(request.header)
            )
        if upload is None:
            return pb.BeginUploadResponse()
        return pb.BeginUploadResponse(
            uuid=upload.uuid,
            files=[
                pb.FileUploadPlan(path=f.path, part_size=f.put.part_size, part_urls=f.put.urls)
                for f in upload.files
            ],
            expires_in_seconds=upload.expires_in_seconds,
        )

    async def FinishUpload(
        self, request: pb.FinishUploadRequest, context: grpc.aio.ServicerContext
    ) -> pb.FinishUploadResponse:
        files = [UploadedFile(f.path, f.sha256, list(f.etags), list(f.part_sha256)) for f in request.files]
        async with _storage_errors(context, "direct upload rejected", uuid=request.uuid):
            upload = self.store.direct_uploads.get(request.uuid)
            await self.authz.check(
                context, WRITE, upload.checkpoint.experiment_id, upload.checkpoint.trial_id
            )
            checkpoint = await asyncio.to_thread(self.store.direct_uploads.finish, request.uuid, files)
        _log_stored(checkpoint, upload.started, direct=True)
        return pb.FinishUploadResponse(checkpoint=checkpoint)

    async def AbortUpload(
        self, request: pb.AbortUploadRequest, context: grpc.aio.ServicerContext
    ) -> pb.AbortUploadResponse:
        try:
            upload = self.store.direct_uploads.get(request.uuid)
        except NotFound:
            return pb.AbortUploadResponse()
        await self.authz.check(context, WRITE, upload.checkpoint.experiment_id, upload.checkpoint.trial_id)
        await asyncio.to_thread(self.store.direct_uploads.abort, request.uuid)
        log.warning("direct upload aborted by the client", uuid=request.uuid)
        return pb.AbortUploadResponse()

    async def DownloadCheckpoint(  # type: ignore[override]  # chunks are bytes: add_to_server sends them
        self, request: pb.DownloadCheckpointRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[DownloadItem]:
        chunks: Iterator[DownloadItem] | None = None
        try:
            record = self.store.get(request.uuid)
            await self.authz.check(context, READ, record.experiment_id, record.trial_id, record.uuid)
            opened: Iterator[DownloadItem]
            if request.path:  # a range: its chunks alone
                opened = await asyncio.to_thread(
                    self.store.open_range,
                    request.uuid,
                    request.path,
                    request.offset,
                    request.length,
                    self.chunk_size,
                )
                chunks = opened
            else:
                if request.offset or request.length:
                    raise InvalidArgument(
                        f"range of checkpoint {request.uuid}: offset and length need a file path"
                    )
                checkpoint, opened = await asyncio.to_thread(
                    self.store.open_download, request.uuid, self.chunk_size, urls=request.accept_urls
                )
                chunks = opened
                yield pb.DownloadCheckpointResponse(checkpoint=checkpoint)
            loop = asyncio.get_running_loop()
            while (item := await loop.run_in_executor(self._downloads, next, opened, None)) is not None:
                yield item
        except StoreError as e:
            await context.abort(status_code(e), str(e))
        except OSError as e:
            log.error("download failed in storage", uuid=request.uuid, error=str(e))
            await context.abort(storage_failure_code(e), f"reading checkpoint {request.uuid} failed: {e}")
        finally:
            if chunks is not None and hasattr(chunks, "close"):
                try:
                    chunks.close()  # closes the open file; fails only while a worker is inside next()
                except ValueError:
                    pass

    async def _authorized(
        self, context: grpc.aio.ServicerContext, action: str, uuid: str
    ) -> common_pb2.Checkpoint:
        """The checkpoint's record, once the caller may do `action` to it (else the call aborts)."""
        try:
            record = self.store.get(uuid)
        except StoreError as e:
            await context.abort(status_code(e), str(e))
            raise  # unreachable: abort raises
        await self.authz.check(context, action, record.experiment_id, record.trial_id, record.uuid)
        return record

    async def GetCheckpoint(
        self, request: pb.GetCheckpointRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetCheckpointResponse:
        record = await self._authorized(context, READ, request.uuid)
        missing: list[str] = []
        if request.check_files:
            try:
                missing = await asyncio.to_thread(self.store.missing_files, request.uuid)
            except StoreError as e:  # deleted meanwhile
                await context.abort(status_code(e), str(e))
            except OSError as e:
                await context.abort(storage_failure_code(e), f"checkpoint storage failed: {e}")
        return pb.GetCheckpointResponse(checkpoint=record, missing_files=missing)

    async def ListCheckpoints(
        self, request: pb.ListCheckpointsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListCheckpointsResponse:
        checkpoints = self.store.list(experiment_id=request.experiment_id, trial_id=request.trial_id)
        return pb.ListCheckpointsResponse(
            checkpoints=await self.authz.visible(context, list(checkpoints), request.trial_id)
        )

    async def DeleteCheckpoint(
        self, request: pb.DeleteCheckpointRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteCheckpointResponse:
        await self._authorized(context, DELETE, request.uuid)
        try:
            await asyncio.to_thread(self.store.delete, request.uuid)
        except StoreError as e:
            await context.abort(status_code(e), str(e))
        log.info("checkpoint deleted", uuid=request.uuid)
        return pb.DeleteCheckpointResponse()

    async def RemoveCheckpointFiles(
        self, request: pb.RemoveCheckpointFilesRequest, context: grpc.aio.ServicerContext
    ) -> pb.RemoveCheckpointFilesResponse:
        """Authorized as a delete: the scheduler's, which then records the checkpoint's new state."""
        await self._authorized(context, DELETE, request.uuid)
        async with _storage_errors(context, "file removal refused", request.uuid):
            globs = list(request.globs)
            kept, removed = await asyncio.to_thread(self.store.remove_files, request.uuid, globs)
            log.info("checkpoint files removed", uuid=request.uuid, files=len(removed), left=len(kept.files))
            return pb.RemoveCheckpointFilesResponse(checkpoint=kept, removed=removed)
        raise AssertionError("unreachable: _storage_errors aborts")


def add_to_server(servicer: CheckpointStoreServicer, server: grpc.aio.Server) -> None:
    """Registers the service; DownloadCheckpoint's chunks go out as the bytes the store encoded them
    in (chunk_wire), its other answers as messages. Registered first, so it takes that method."""
    download = grpc.unary_stream_rpc_method_handler(
        servicer.DownloadCheckpoint,
        request_deserializer=pb.DownloadCheckpointRequest.FromString,
        response_serializer=serialize_response,
    )
    service = _grpc.service_name(pb, "CheckpointStoreService")
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(service, {"DownloadCheckpoint": download}),)
    )
    checkpoint_store_pb2_grpc.add_CheckpointStoreServiceServicer_to_server(servicer, server)


def _header_fields(header: pb.UploadHeader) -> dict[str, Any]:
    storage = json_format.MessageToDict(header.storage) if header.HasField("storage") else {}
    return {
        "experiment_id": header.experiment_id,
        "trial_id": header.trial_id,
        "total_batches": header.total_batches,
        "metadata": dict(header.metadata),
        "storage": storage,
        "uuid": header.uuid,
    }


@asynccontextmanager
async def _storage_errors(
    context: grpc.aio.ServicerContext, what: str, uuid: str | None = None
) -> AsyncIterator[None]:
    """StoreErrors become their status, OSErrors (storage failed) INTERNAL."""
    try:
        yield
    except StoreError as e:
        log.warning(what, uuid=uuid, error=str(e))
        await context.abort(status_code(e), str(e))
    except OSError as e:
        log.error("direct upload failed in storage", uuid=uuid, error=str(e))
        await context.abort(storage_failure_code(e), f"checkpoint storage failed: {e}")


def _log_stored(checkpoint: common_pb2.Checkpoint, started: float, *, direct: bool) -> None:
    log.info(
        "checkpoint stored",
        uuid=checkpoint.uuid,
        experiment_id=checkpoint.experiment_id,
        trial_id=checkpoint.trial_id,
        files=len(checkpoint.files),
        bytes=checkpoint.total_size,
        seconds=round(time.monotonic() - started, 3),
        direct=direct,
    )
