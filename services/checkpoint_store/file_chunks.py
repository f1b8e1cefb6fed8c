"""One stored file's bytes as DownloadCheckpoint messages, its size checked on the way out."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeAlias

from pedl.checkpoints.chunk_wire import encode_chunk
from pedl.v1 import checkpoint_store_pb2, common_pb2
from pedl_checkpoint_store.errors import DataLoss
from pedl_checkpoint_store.storage import StorageBackend

# One message of DownloadCheckpoint as sent: a URL, or a chunk already serialized (chunk_wire: its
# bytes copied once, not into a message and out again).
DownloadItem: TypeAlias = checkpoint_store_pb2.DownloadCheckpointResponse | bytes


def passed_through(
    uuid: str, info: common_pb2.FileInfo, pieces: Iterator[bytes], backend: StorageBackend
) -> Iterator[DownloadItem]:
    """One file's chunks, as storage holds them. The sha256 is the client's to check, end to end (a
    second pass here cost CPU that a small machine shares with S3); the size is checked here, free."""
    offset = 0
    current = next(pieces, None)
    while True:
        following = next(pieces, None) if current is not None else None
        data = current or b""
        last = following is None
        if last and offset + len(data) != info.size:
            raise DataLoss(
                f"file {info.path!r} of checkpoint {uuid} in {backend.describe()} is corrupt: "
                f"the record says {info.size} bytes, storage holds {offset + len(data)}"
            )
        yield encode_chunk(info.path, offset, data, last=last, sha256=info.sha256 if last else "")
        offset += len(data)
        if last:
            return
        current = following
