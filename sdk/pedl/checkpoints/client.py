"""Blocking client of CheckpointStoreService, for harnesses, the CLI and tests."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import grpc

from pedl import _grpc
from pedl.checkpoints.errors import CheckpointError, CheckpointNotFound
from pedl.checkpoints.files import CHUNK_SIZE, DirectoryWriter, file_chunks, walk_files
from pedl.v1 import checkpoint_store_pb2 as pb
from pedl.v1 import checkpoint_store_pb2_grpc, common_pb2

UNARY_TIMEOUT_SECONDS = 60.0

_MESSAGE_ONLY = {grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.DATA_LOSS}


class CheckpointStoreClient(_grpc.Client):
    """Talks to the checkpoint store at `address` (host:port). Every failure is a CheckpointError."""

    def __init__(self, address: str, chunk_size: int = CHUNK_SIZE) -> None:
        self.chunk_size = chunk_size
        super().__init__(address)
        self._stub = checkpoint_store_pb2_grpc.CheckpointStoreServiceStub(self._channel)

    def _error(self, e: grpc.RpcError, action: str) -> CheckpointError:
        code: grpc.StatusCode = e.code()  # type: ignore[attr-defined]
        details: str = e.details() or ""  # type: ignore[attr-defined]
        if code == grpc.StatusCode.UNAVAILABLE:
            message = f"checkpoint store at {self.address} unreachable: {details}"
        elif code in _MESSAGE_ONLY:
            message = details
        else:
            message = f"{action} at checkpoint store {self.address} failed ({code.name}): {details}"
        cls = CheckpointNotFound if code == grpc.StatusCode.NOT_FOUND else CheckpointError
        return cls(message, code=code)

    def upload(
        self,
        directory: Path,
        *,
        experiment_id: int,
        trial_id: int,
        total_batches: int,
        metadata: Mapping[str, str] | None = None,
        storage: Mapping[str, Any] | None = None,
    ) -> common_pb2.Checkpoint:
        """Stores every file under `directory`; returns the record once the checkpoint is visible.

        `storage` is the experiment's checkpoint_storage config; None for the store's default.
        """
        directory = Path(directory)
        files = walk_files(directory)
        header = pb.UploadHeader(
            experiment_id=experiment_id,
            trial_id=trial_id,
            total_batches=total_batches,
            metadata=dict(metadata or {}),
        )
        if storage:
            header.storage.update(dict(storage))
        read_errors: list[tuple[Path, OSError]] = []

        def requests() -> Iterator[pb.UploadCheckpointRequest]:
            yield pb.UploadCheckpointRequest(header=header)
            for rel, path in files:
                try:
                    for chunk in file_chunks(rel, path, self.chunk_size):
                        yield pb.UploadCheckpointRequest(chunk=chunk)
                except OSError as e:
                    read_errors.append((path, e))
                    raise

        try:
            response = self._stub.UploadCheckpoint(requests())
        except grpc.RpcError as e:
            if read_errors:
                path, err = read_errors[0]
                raise CheckpointError(f"upload of {directory} failed reading {path}: {err}") from err
            raise self._error(e, f"upload of {directory}") from None
        return response.checkpoint

    def download(self, uuid: str, directory: Path) -> common_pb2.Checkpoint:
        """Writes checkpoint `uuid` into `directory` (absent or empty), all files or none."""
        directory = Path(directory)
        if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
            raise CheckpointError(f"download target {directory} exists and is not an empty directory")
        directory.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}.download-"))
        writer: DirectoryWriter | None = None
        try:
            try:
                for response in self._stub.DownloadCheckpoint(pb.DownloadCheckpointRequest(uuid=uuid)):
                    if response.WhichOneof("message") == "checkpoint":
                        writer = DirectoryWriter(staging, response.checkpoint)
                    elif writer is None:
                        raise CheckpointError(
                            f"download of checkpoint {uuid}: chunk before the checkpoint record"
                        )
                    else:
                        writer.write(response.chunk)
            except grpc.RpcError as e:
                raise self._error(e, f"download of checkpoint {uuid}") from None
            if writer is None:
                raise CheckpointError(f"download of checkpoint {uuid}: the store sent no checkpoint record")
            writer.finish()
            if directory.exists():
                directory.rmdir()
            os.replace(staging, directory)
            return writer.checkpoint
        except BaseException:
            if writer is not None:
                writer.close()
            shutil.rmtree(staging, ignore_errors=True)
            raise

    def get(self, uuid: str) -> common_pb2.Checkpoint:
        try:
            response = self._stub.GetCheckpoint(
                pb.GetCheckpointRequest(uuid=uuid), timeout=UNARY_TIMEOUT_SECONDS
            )
        except grpc.RpcError as e:
            raise self._error(e, f"get of checkpoint {uuid}") from None
        return response.checkpoint

    def list(self, experiment_id: int = 0, trial_id: int = 0) -> list[common_pb2.Checkpoint]:
        """Visible checkpoints, newest first; 0 matches any experiment / trial."""
        request = pb.ListCheckpointsRequest(experiment_id=experiment_id, trial_id=trial_id)
        try:
            response = self._stub.ListCheckpoints(request, timeout=UNARY_TIMEOUT_SECONDS)
        except grpc.RpcError as e:
            raise self._error(e, "listing checkpoints") from None
        return list(response.checkpoints)

    def delete(self, uuid: str) -> None:
        try:
            self._stub.DeleteCheckpoint(pb.DeleteCheckpointRequest(uuid=uuid), timeout=UNARY_TIMEOUT_SECONDS)
        except grpc.RpcError as e:
            raise self._error(e, f"delete of checkpoint {uuid}") from None
