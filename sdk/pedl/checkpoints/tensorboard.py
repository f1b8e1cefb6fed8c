"""Trials' own TensorBoard event files in the checkpoint store: upload (the harness), list and
download (`pedl tensorboard`), delete (the scheduler, with its experiment)."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import struct_pb2

from pedl.checkpoints.client import UNARY_TIMEOUT_SECONDS, CheckpointStoreClient
from pedl.checkpoints.errors import CheckpointError
from pedl.checkpoints.files import CHUNK_SIZE
from pedl.v1 import checkpoint_store_pb2 as pb


def prefix_chunks(rel: str, path: Path, size: int, chunk_size: int = CHUNK_SIZE) -> Iterator[pb.FileChunk]:
    """The first `size` bytes of a file that may still be growing (an event file being written), as
    chunks; the last carries their sha256. Raises CheckpointError if the file became shorter."""
    hasher = hashlib.sha256()
    offset = 0
    with open(path, "rb") as f:
        while True:
            data = f.read(min(chunk_size, size - offset))
            if len(data) < min(chunk_size, size - offset):
                raise CheckpointError(f"TensorBoard file {path} shrank while it was uploaded")
            hasher.update(data)
            last = offset + len(data) >= size
            yield pb.FileChunk(
                path=rel, offset=offset, data=data, last=last, sha256=hasher.hexdigest() if last else ""
            )
            offset += len(data)
            if last:
                return


def upload(
    client: CheckpointStoreClient,
    experiment_id: int,
    trial_id: int,
    files: Sequence[tuple[str, Path, int]],
    storage: Mapping[str, Any] | None = None,
) -> int:
    """Stores `files` (relative path, local file, bytes to send) for the trial; how many were stored."""
    header = pb.TensorboardFilesHeader(experiment_id=experiment_id, trial_id=trial_id)
    if storage:
        header.storage.CopyFrom(_struct(storage))

    def requests() -> Iterator[pb.UploadTensorboardFilesRequest]:
        yield pb.UploadTensorboardFilesRequest(header=header)
        for rel, path, size in files:
            for chunk in prefix_chunks(rel, path, size, client.chunk_size):
                yield pb.UploadTensorboardFilesRequest(chunk=chunk)

    try:
        return client._stub.UploadTensorboardFiles(requests()).files
    except grpc.RpcError as e:
        raise client._error(e, f"upload of trial {trial_id}'s TensorBoard files") from None


def list_files(
    client: CheckpointStoreClient, experiment_id: int, trial_id: int = 0
) -> list[pb.TensorboardFile]:
    request = pb.ListTensorboardFilesRequest(experiment_id=experiment_id, trial_id=trial_id)
    try:
        return list(client._stub.ListTensorboardFiles(request, timeout=UNARY_TIMEOUT_SECONDS).files)
    except grpc.RpcError as e:
        raise client._error(e, f"listing experiment {experiment_id}'s TensorBoard files") from None


def download(
    client: CheckpointStoreClient, experiment_id: int, file: pb.TensorboardFile, target: Path
) -> None:
    """Writes the file to `target`, replacing it whole once the bytes match the listed sha256."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    hasher = hashlib.sha256()
    request = pb.DownloadTensorboardFileRequest(
        experiment_id=experiment_id, trial_id=file.trial_id, path=file.path
    )
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                for response in client._stub.DownloadTensorboardFile(request):
                    out.write(response.chunk.data)
                    hasher.update(response.chunk.data)
            except grpc.RpcError as e:
                raise client._error(e, f"download of TensorBoard file {file.path}") from None
        if hasher.hexdigest() != file.sha256:
            raise CheckpointError(
                f"TensorBoard file {file.path} of trial {file.trial_id} changed or is corrupt"
            )
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def delete_experiment(client: CheckpointStoreClient, experiment_id: int) -> int:
    request = pb.DeleteTensorboardFilesRequest(experiment_id=experiment_id)
    try:
        return client._stub.DeleteTensorboardFiles(request, timeout=UNARY_TIMEOUT_SECONDS).files
    except grpc.RpcError as e:
        raise client._error(e, f"deleting experiment {experiment_id}'s TensorBoard files") from None


def _struct(value: Mapping[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(dict(value))
    return out
