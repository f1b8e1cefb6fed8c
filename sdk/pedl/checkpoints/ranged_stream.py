"""A checkpoint file's byte ranges through the store: one ranged DownloadCheckpoint call per part.

Several such calls at once (url_fetch's pool) move a file as boto3's transfer manager does, instead of
one stream whose every message waits for the one before it: the store then GETs several ranges of the
object at once, and the client writes each part in place while the in-order hash catches up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import grpc

from pedl.checkpoints.errors import CheckpointError
from pedl.checkpoints.url_fetch import RangeReader, Target
from pedl.v1 import checkpoint_store_pb2 as pb
from pedl.v1 import checkpoint_store_pb2_grpc

RANGE_SIZE = 16 * 1024 * 1024  # two of the store's 8 MiB messages (and S3 parts) per call
RANGE_STREAMS = 4  # calls at once; the store fetches each call's parts two at a time


class RangesUnsupported(CheckpointError):
    """The store predates ranged downloads: it answered a range with the whole checkpoint."""


def range_reader(
    stub: checkpoint_store_pb2_grpc.CheckpointStoreServiceStub,
    uuid: str,
    error: Callable[[grpc.RpcError], CheckpointError],
) -> RangeReader:
    """Reads bytes [start, start + length) of a target of checkpoint `uuid` on one call; `error`
    turns a failed call into the CheckpointError to raise."""

    def read(target: Target, start: int, length: int) -> Iterator[bytes]:
        request = pb.DownloadCheckpointRequest(uuid=uuid, path=target.path, offset=start, length=length)
        responses = stub.DownloadCheckpoint(request)
        at = start
        try:
            for response in responses:
                if response.WhichOneof("message") != "chunk":
                    raise RangesUnsupported(f"the checkpoint store answered a range of {uuid} with the whole")
                chunk = response.chunk
                if chunk.path != target.path or chunk.offset != at:
                    raise CheckpointError(
                        f"download of checkpoint {uuid}: asked for {target.path!r} at {at}, the store "
                        f"sent {chunk.path!r} at {chunk.offset}"
                    )
                data = chunk.data  # each access copies the bytes out of the message
                at += len(data)
                yield data
        except grpc.RpcError as e:
            raise error(e) from None
        finally:
            responses.cancel()  # a no-op once the call ended; else the store stops reading

    return read
