"""A checkpoint file's byte ranges through the store: one ranged DownloadCheckpoint call per part.

Several such calls at once (url_fetch's pool) move a file as boto3's transfer manager does, instead of
one stream whose every message waits for the one before it: the store then GETs several ranges of the
object at once, and the client writes each part in place while the in-order hash catches up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import grpc

from pedl import _grpc
from pedl.checkpoints.chunk_wire import MalformedChunk, decode_chunk
from pedl.checkpoints.errors import CheckpointError
from pedl.checkpoints.url_fetch import RangeReader, Target
from pedl.v1 import checkpoint_store_pb2 as pb

RANGE_SIZE = 8 * 1024 * 1024  # one of the store's messages (and S3 parts) per call, as boto3's parts
RANGE_STREAMS = 10  # calls at once, as boto3's transfer manager has GETs in flight


class RangesUnsupported(CheckpointError):
    """The store predates ranged downloads: it answered a range with the whole checkpoint."""


def raw_download(channel: grpc.Channel) -> grpc.UnaryStreamMultiCallable:
    """DownloadCheckpoint answering each message's serialized bytes, for decode_chunk to read in place."""
    return channel.unary_stream(
        f"/{_grpc.service_name(pb, 'CheckpointStoreService')}/DownloadCheckpoint",
        request_serializer=pb.DownloadCheckpointRequest.SerializeToString,
        response_deserializer=None,
    )


def range_reader(
    download: grpc.UnaryStreamMultiCallable,
    uuid: str,
    error: Callable[[grpc.RpcError], CheckpointError],
) -> RangeReader:
    """Reads bytes [start, start + length) of a target of checkpoint `uuid` on one call; `error`
    turns a failed call into the CheckpointError to raise."""

    def read(target: Target, start: int, length: int) -> Iterator[memoryview]:
        request = pb.DownloadCheckpointRequest(uuid=uuid, path=target.path, offset=start, length=length)
        responses = download(request)
        at = start
        try:
            for raw in responses:
                try:
                    chunk = decode_chunk(raw)
                except MalformedChunk as e:
                    raise CheckpointError(f"download of checkpoint {uuid}: the store sent {e}") from None
                if chunk is None:
                    raise RangesUnsupported(f"the checkpoint store answered a range of {uuid} with the whole")
                if chunk.path != target.path or chunk.offset != at:
                    raise CheckpointError(
                        f"download of checkpoint {uuid}: asked for {target.path!r} at {at}, the store "
                        f"sent {chunk.path!r} at {chunk.offset}"
                    )
                at += len(chunk.data)
                yield chunk.data  # a view of the received message: written and hashed without a copy
        except grpc.RpcError as e:
            raise error(e) from None
        finally:
            responses.cancel()  # a no-op once the call ended; else the store stops reading

    return read
