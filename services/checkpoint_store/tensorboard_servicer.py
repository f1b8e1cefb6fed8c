"""CheckpointStoreService's TensorBoard-file calls: authorised as checkpoints are (a trial's token
writes and reads only its own trial's files; users need READ, or MANAGE to upload; deleting is the
scheduler's, with the cluster secret), the work done by `tensorboard_files.TensorboardFiles`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import grpc
import grpc.aio
from google.protobuf import json_format

from pedl import _log
from pedl.v1 import checkpoint_store_pb2 as pb
from pedl_checkpoint_store.authz import StoreAuthz
from pedl_checkpoint_store.errors import StoreError
from pedl_checkpoint_store.status_codes import status_code
from pedl_checkpoint_store.tensorboard_files import TensorboardFiles, TensorboardUpload
from pedl_checkpoint_store.upload_stream import StreamedUpload
from pedl_server_auth.authz import DELETE, READ, WRITE

log = _log.get_logger(component="checkpoint_store")


class TensorboardServicer:
    """Mixed into CheckpointStoreServicer, which sets these attributes."""

    tensorboard: TensorboardFiles
    authz: StoreAuthz
    chunk_size: int

    async def UploadTensorboardFiles(  # noqa: N802
        self,
        request_iterator: AsyncIterator[pb.UploadTensorboardFilesRequest],
        context: grpc.aio.ServicerContext,
    ) -> pb.UploadTensorboardFilesResponse:
        stream: StreamedUpload[TensorboardUpload] = StreamedUpload()

        async def begin(header: pb.TensorboardFilesHeader) -> TensorboardUpload:
            await self.authz.check(context, WRITE, header.experiment_id, header.trial_id)
            storage = json_format.MessageToDict(header.storage) if header.HasField("storage") else {}
            return await asyncio.to_thread(
                self.tensorboard.begin, header.experiment_id, header.trial_id, storage
            )

        try:
            upload = await stream.feed(request_iterator, begin)
            stored = upload.finish()
        except StoreError as e:
            if stream.upload is not None:
                await asyncio.to_thread(stream.upload.abort)
            await context.abort(status_code(e), str(e))
            raise  # unreachable: abort raises
        except OSError as e:
            if stream.upload is not None:
                await asyncio.to_thread(stream.upload.abort)
            log.error("TensorBoard upload failed in storage", error=str(e))
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"checkpoint storage failed: {e}")
            raise
        except BaseException:
            if stream.upload is not None:
                stream.upload.abort()
            raise
        return pb.UploadTensorboardFilesResponse(files=stored)

    async def ListTensorboardFiles(  # noqa: N802
        self, request: pb.ListTensorboardFilesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListTensorboardFilesResponse:
        await self.authz.check(context, READ, request.experiment_id, request.trial_id)
        try:
            files = await asyncio.to_thread(self.tensorboard.list, request.experiment_id, request.trial_id)
        except StoreError as e:
            await context.abort(status_code(e), str(e))
            raise
        return pb.ListTensorboardFilesResponse(files=files)

    async def DownloadTensorboardFile(  # noqa: N802
        self, request: pb.DownloadTensorboardFileRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.DownloadTensorboardFileResponse]:
        await self.authz.check(context, READ, request.experiment_id, request.trial_id)
        try:
            chunks: Iterator[pb.FileChunk] = await asyncio.to_thread(
                self.tensorboard.open, request.experiment_id, request.trial_id, request.path, self.chunk_size
            )
            while (chunk := await asyncio.to_thread(lambda: next(chunks, None))) is not None:
                yield pb.DownloadTensorboardFileResponse(chunk=chunk)
        except StoreError as e:
            await context.abort(status_code(e), str(e))
        except OSError as e:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"reading TensorBoard file failed: {e}")

    async def DeleteTensorboardFiles(  # noqa: N802
        self, request: pb.DeleteTensorboardFilesRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteTensorboardFilesResponse:
        await self.authz.check(context, DELETE, request.experiment_id, 0)
        try:
            count = await asyncio.to_thread(self.tensorboard.delete_experiment, request.experiment_id)
        except StoreError as e:
            await context.abort(status_code(e), str(e))
            raise
        except OSError as e:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"checkpoint storage failed: {e}")
            raise
        log.info("TensorBoard files deleted", experiment_id=request.experiment_id, files=count)
        return pb.DeleteTensorboardFilesResponse(files=count)
