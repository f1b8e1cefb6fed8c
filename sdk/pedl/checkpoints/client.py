"""Blocking client of CheckpointStoreService, for harnesses, the CLI and tests."""

from __future__ import annotations

import builtins
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import grpc

from pedl import _grpc, _log
from pedl.checkpoints.errors import CheckpointError, CheckpointNotFound
from pedl.checkpoints.files import CHUNK_SIZE, DirectoryWriter, file_chunks, walk_files
from pedl.checkpoints.presigned_http import TransferError
from pedl.checkpoints.ranged_stream import (
    RANGE_SIZE,
    RANGE_STREAMS,
    RangesUnsupported,
    range_reader,
    raw_download,
)
from pedl.checkpoints.url_fetch import RangeReader, ShortObject, Target, UrlFetcher
from pedl.checkpoints.url_put import PutTarget, UrlUploader
from pedl.v1 import checkpoint_store_pb2 as pb
from pedl.v1 import checkpoint_store_pb2_grpc, common_pb2

UNARY_TIMEOUT_SECONDS = 60.0

log = _log.get_logger(component="checkpoints")

_MESSAGE_ONLY = {grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.DATA_LOSS}


class CheckpointStoreClient(_grpc.Client):
    """Talks to the checkpoint store at `address` (host:port). Every failure is a CheckpointError."""

    def __init__(
        self, address: str, chunk_size: int = CHUNK_SIZE, *, direct: bool = True, token: str | None = None
    ) -> None:
        """`direct=False`: never move bytes to or from storage itself, always through the store;
        `token`: the user to act as (default: pedl.auth's credential for `address`)."""
        self.chunk_size = chunk_size
        super().__init__(address, token=token, bulk=True)
        self._stub = checkpoint_store_pb2_grpc.CheckpointStoreServiceStub(self._channel)
        self._raw_download = raw_download(self._channel)
        # Threads start on first use.
        self._fetcher = UrlFetcher() if direct else None
        self._uploader = UrlUploader() if direct else None
        self._ranges: UrlFetcher | None = None  # ranged calls to the store, made on first use

    def close(self) -> None:
        for transfer in (self._fetcher, self._uploader, self._ranges):
            if transfer is not None:
                transfer.close()
        self._fetcher = self._uploader = self._ranges = None
        super().close()

    def _error(self, e: grpc.RpcError, action: str) -> CheckpointError:
        code: grpc.StatusCode = e.code()
        details: str = e.details() or ""
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
        uuid: str = "",
    ) -> common_pb2.Checkpoint:
        """Stores every file under `directory`; returns the record once the checkpoint is visible.

        `uuid`: one the caller chose (a Core API script knows its checkpoint's id before writing it).

        `storage` is the experiment's checkpoint_storage config; None for the store's default. Files
        for S3 go straight to it on URLs the store presigns (measured faster than through the store);
        if storage cannot be reached from here, or it is not S3, the store takes the bytes itself.
        """
        directory = Path(directory)
        files = walk_files(directory)
        header = pb.UploadHeader(
            experiment_id=experiment_id,
            trial_id=trial_id,
            total_batches=total_batches,
            metadata=dict(metadata or {}),
            uuid=uuid,
        )
        if storage:
            header.storage.update(dict(storage))
        if self._uploader is not None:
            try:
                checkpoint = self._upload_direct(directory, header, files)
                if checkpoint is not None:
                    return checkpoint
            except TransferError as e:
                log.warning(
                    "checkpoint storage refused or unreachable; the store takes the bytes", error=str(e)
                )
        return self._upload_streamed(directory, header, files)

    def _upload_direct(
        self, directory: Path, header: pb.UploadHeader, files: list[tuple[str, Path]]
    ) -> common_pb2.Checkpoint | None:
        """None where the checkpoint's storage (or the store) does not take direct uploads."""
        assert self._uploader is not None
        try:
            sizes = {rel: path.stat().st_size for rel, path in files}
        except OSError as e:
            raise CheckpointError(f"upload of {directory} failed: {e}") from e
        planned = [pb.PlannedFile(path=rel, size=size) for rel, size in sizes.items()]
        try:
            plan = self._stub.BeginUpload(pb.BeginUploadRequest(header=header, files=planned))
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                return None  # a store older than direct uploads
            raise self._error(e, f"upload of {directory}") from None
        if not plan.uuid:
            return None
        paths = dict(files)
        targets = [
            PutTarget(f.path, paths[f.path], sizes[f.path], f.part_size, list(f.part_urls))
            for f in plan.files
        ]
        try:
            sent = self._uploader.send(targets)
            uploaded = [
                pb.UploadedFile(path=s.path, sha256=s.sha256, etags=s.etags, part_sha256=s.part_sha256)
                for s in sent
            ]
            response = self._stub.FinishUpload(pb.FinishUploadRequest(uuid=plan.uuid, files=uploaded))
        except grpc.RpcError as e:
            raise self._error(e, f"upload of {directory}") from None
        except BaseException:
            self._abort_upload(plan.uuid)
            raise
        return response.checkpoint

    def _abort_upload(self, uuid: str) -> None:
        """Best effort: the store also aborts uploads nobody finishes before their URLs expire."""
        try:
            self._stub.AbortUpload(pb.AbortUploadRequest(uuid=uuid), timeout=UNARY_TIMEOUT_SECONDS)
        except grpc.RpcError as e:
            log.warning("could not abort a direct upload", uuid=uuid, error=str(e))

    def _upload_streamed(
        self, directory: Path, header: pb.UploadHeader, files: list[tuple[str, Path]]
    ) -> common_pb2.Checkpoint:
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
        """Writes checkpoint `uuid` into `directory` (absent or empty), all files or none.

        Files on S3 are fetched straight from it on URLs the store presigns (measured faster than
        streaming them through the store); if storage cannot be reached from here, the store streams
        them instead. Every file is checked against the record's size and sha256 either way.
        """
        directory = Path(directory)
        if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
            raise CheckpointError(f"download target {directory} exists and is not an empty directory")
        directory.parent.mkdir(parents=True, exist_ok=True)
        try:
            if self._fetcher is not None:
                try:
                    return self._download(uuid, directory, urls=True)
                except TransferError as e:
                    log.warning(
                        "checkpoint storage refused or unreachable; the store streams it", error=str(e)
                    )
            return self._download(uuid, directory, urls=False)
        except RangesUnsupported:  # a store from before ranges: one stream, as it always was
            return self._download(uuid, directory, urls=False, ranges=False)

    def _download(
        self, uuid: str, directory: Path, *, urls: bool, ranges: bool = True
    ) -> common_pb2.Checkpoint:
        """`urls`: files on storage that presigns come straight from it; the others, with `ranges`,
        come in parallel ranges through the store, else on the one stream."""
        staging = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}.download-"))
        writer: DirectoryWriter | None = None
        try:
            targets: list[Target] = []
            if ranges and not urls:
                writer = DirectoryWriter(staging, self.get(uuid))
            else:
                writer = self._receive(uuid, staging, targets, urls=urls, ranges=ranges)
            self._fetch(writer, targets, None)
            if ranges and writer.unclaimed():
                parts = [_target(writer, p, "") for p in writer.unclaimed()]
                error = f"download of checkpoint {uuid}"
                reader = range_reader(self._raw_download, uuid, lambda e: self._error(e, error))
                self._fetch(writer, parts, reader)
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

    def _receive(
        self, uuid: str, staging: Path, targets: list[Target], *, urls: bool, ranges: bool
    ) -> DirectoryWriter:
        """Reads the whole-checkpoint stream: the record, then URLs (added to `targets`) or chunks
        (written). With `ranges`, stops at the first chunk: the rest comes in ranges."""
        writer: DirectoryWriter | None = None
        responses = self._stub.DownloadCheckpoint(pb.DownloadCheckpointRequest(uuid=uuid, accept_urls=urls))
        try:
            for response in responses:
                kind = response.WhichOneof("message")
                if kind == "checkpoint":
                    writer = DirectoryWriter(staging, response.checkpoint)
                elif writer is None:
                    raise CheckpointError(
                        f"download of checkpoint {uuid}: {kind} before the checkpoint record"
                    )
                elif kind == "url":
                    path = response.url.path
                    targets.append(_target(writer, path, response.url.url))
                elif ranges:
                    break  # storage that does not presign
                else:
                    writer.write(response.chunk)
        except grpc.RpcError as e:
            if writer is not None:
                writer.close()
            raise self._error(e, f"download of checkpoint {uuid}") from None
        except BaseException:
            if writer is not None:
                writer.close()
            raise
        finally:
            responses.cancel()
        if writer is None:
            raise CheckpointError(f"download of checkpoint {uuid}: the store sent no checkpoint record")
        return writer

    def _fetch(self, writer: DirectoryWriter, targets: list[Target], read: RangeReader | None) -> None:
        """Fetches `targets` in parallel parts: on their URLs, or with `read` through the store."""
        if not targets:
            return
        if read is None:
            assert self._fetcher is not None, "the store sent URLs the client did not ask for"
            fetcher = self._fetcher
        else:
            if self._ranges is None:
                self._ranges = UrlFetcher(part_size=RANGE_SIZE, concurrency=RANGE_STREAMS)
            fetcher = self._ranges
        try:
            # closing(): on an error, in-flight parts finish writing before the staging dir goes.
            with closing(fetcher.fetch(targets, read)) as fetched_files:
                for fetched in fetched_files:
                    writer.verify(fetched.path, fetched.size, fetched.sha256)
        except ShortObject as e:
            raise writer.corrupt(e.path, str(e)) from None

    def get(self, uuid: str) -> common_pb2.Checkpoint:
        try:
            response = self._stub.GetCheckpoint(
                pb.GetCheckpointRequest(uuid=uuid), timeout=UNARY_TIMEOUT_SECONDS
            )
        except grpc.RpcError as e:
            raise self._error(e, f"get of checkpoint {uuid}") from None
        return response.checkpoint

    def missing_files(self, uuid: str) -> list[str]:
        """The paths of the checkpoint's files its storage no longer holds ([] when whole; a store
        from before GetCheckpointRequest.check_files always answers [])."""
        request = pb.GetCheckpointRequest(uuid=uuid, check_files=True)
        try:
            response = self._stub.GetCheckpoint(request, timeout=UNARY_TIMEOUT_SECONDS)
        except grpc.RpcError as e:
            raise self._error(e, f"check of checkpoint {uuid}") from None
        return list(response.missing_files)

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

    def remove_files(
        self, uuid: str, globs: Sequence[str]
    ) -> tuple[common_pb2.Checkpoint, builtins.list[str]]:
        """Removes the files any glob names (the scheduler's, with the cluster secret): the record as
        now and the paths removed."""
        request = pb.RemoveCheckpointFilesRequest(uuid=uuid, globs=list(globs))
        try:
            response = self._stub.RemoveCheckpointFiles(request, timeout=UNARY_TIMEOUT_SECONDS)
        except grpc.RpcError as e:
            raise self._error(e, f"removing files from checkpoint {uuid}") from None
        return response.checkpoint, list(response.removed)


def _target(writer: DirectoryWriter, path: str, url: str) -> Target:
    """File `path` of the record to fetch (on `url`, or through the store where ""), with the
    record's part hashes where it has them."""
    info = writer.info(path)
    return Target(path, url, writer.claim(path), info.size, info.part_size, tuple(info.part_sha256))
