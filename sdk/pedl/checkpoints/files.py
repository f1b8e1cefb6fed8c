"""Checkpoint directories as streams of FileChunks, and back: chunked, hashed while streaming."""

from __future__ import annotations

import hashlib
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

import grpc

from pedl.checkpoints.errors import CheckpointError
from pedl.checkpoints.paths import validate_relpath
from pedl.v1 import checkpoint_store_pb2, common_pb2

CHUNK_SIZE = 4 * 1024 * 1024
# Chunks a DirectoryWriter holds while its threads write and hash them (8 MiB each from the store):
# enough that receiving the next one never waits on the disk or on sha256.
CHUNKS_IN_FLIGHT = 4


def walk_files(directory: Path) -> list[tuple[str, Path]]:
    """Every regular file under `directory` (recursively, sorted) as (relative '/'-path, path).

    Symlinks to files are followed; symlinked directories are not entered. Empty directories
    are not part of a checkpoint.
    """
    if not directory.is_dir():
        raise CheckpointError(f"checkpoint directory {directory} does not exist or is not a directory")
    found: list[tuple[str, Path]] = []
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            if path.is_file():
                found.append((path.relative_to(directory).as_posix(), path))
    found.sort()
    return found


def file_chunks(
    rel: str, path: Path, chunk_size: int = CHUNK_SIZE
) -> Iterator[checkpoint_store_pb2.FileChunk]:
    """The chunks of one file; the last carries the sha256 of all of it. An empty file is one chunk."""
    hasher = hashlib.sha256()
    offset = 0
    with open(path, "rb") as f:
        current = f.read(chunk_size)
        while True:
            following = f.read(chunk_size) if current else b""
            last = not following
            hasher.update(current)
            yield checkpoint_store_pb2.FileChunk(
                path=rel, offset=offset, data=current, last=last, sha256=hasher.hexdigest() if last else ""
            )
            offset += len(current)
            if last:
                return
            current = following


class DirectoryWriter:
    """Writes a downloaded checkpoint under `root`, checking each file against the record: the one
    check of a download's bytes, end to end (the store passes them through unhashed)."""

    def __init__(self, root: Path, checkpoint: common_pb2.Checkpoint) -> None:
        self.root = root
        self.checkpoint = checkpoint
        self._expected = {f.path: f for f in checkpoint.files}
        self._claimed: set[str] = set()
        self._done: set[str] = set()
        self._path: str | None = None
        self._file: BinaryIO | None = None
        self._hasher = hashlib.sha256()
        self._size = 0
        # Writing and hashing each run on a thread of their own (both release the GIL), so the
        # caller's thread goes back to receiving: the hash is off the critical path, as for direct
        # downloads. One thread each keeps every file's bytes in order.
        self._disk: ThreadPoolExecutor | None = None
        self._hashing: ThreadPoolExecutor | None = None
        self._pending: deque[tuple[Future[object], Future[object]]] = deque()

    def _fail(self, message: str) -> CheckpointError:
        return CheckpointError(f"download of checkpoint {self.checkpoint.uuid}: {message}")

    def claim(self, path: str) -> Path:
        """Where file `path` of the record goes, once; for files fetched elsewhere, then `verify`."""
        try:
            validate_relpath(path)
        except ValueError as e:
            raise self._fail(str(e)) from None
        if path not in self._expected:
            raise self._fail(f"the store sent file {path!r}, which the checkpoint does not list")
        if path in self._claimed:
            raise self._fail(f"the store sent file {path!r} twice")
        self._claimed.add(path)
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def info(self, path: str) -> common_pb2.FileInfo:
        """The record's entry for file `path`."""
        return self._expected[path]

    def unclaimed(self) -> list[str]:
        """The record's files not yet claimed or written, in the record's order."""
        return [f.path for f in self.checkpoint.files if f.path not in self._claimed]

    def verify(self, path: str, size: int, sha256: str | None) -> None:
        """Raises CheckpointError (DATA_LOSS) when what was written differs from the record;
        `sha256` None: the caller checked each part against the record's part hashes."""
        info = self._expected[path]
        if size != info.size or (sha256 is not None and sha256 != info.sha256):
            raise self.corrupt(path, f"received {size} bytes with sha256 {sha256}")
        self._done.add(path)

    def corrupt(self, path: str, detail: str) -> CheckpointError:
        info = self._expected[path]
        return CheckpointError(
            f"file {path!r} of checkpoint {self.checkpoint.uuid} is corrupt: the record says "
            f"{info.size} bytes with sha256 {info.sha256}, {detail}",
            code=grpc.StatusCode.DATA_LOSS,
        )

    def write(self, chunk: checkpoint_store_pb2.FileChunk) -> None:
        if chunk.path != self._path:
            if self._path is not None:
                raise self._fail(f"file {self._path!r} ended without its last chunk")
            self._open(chunk.path)
        if chunk.offset != self._size:
            raise self._fail(f"chunk of file {chunk.path!r} at offset {chunk.offset}, expected {self._size}")
        assert self._file is not None and self._disk is not None and self._hashing is not None
        data = chunk.data
        self._pending.append(
            (self._disk.submit(self._file.write, data), self._hashing.submit(self._hasher.update, data))
        )
        self._size += len(data)
        while len(self._pending) > CHUNKS_IN_FLIGHT:
            self._settle_one()
        if chunk.last:
            self._close()

    def _settle_one(self) -> None:
        """Waits for the oldest chunk's write and hash; raises the write's error."""
        written, hashed = self._pending.popleft()
        hashed.result()
        written.result()

    def _open(self, path: str) -> None:
        target = self.claim(path)
        if self._disk is None or self._hashing is None:
            self._disk = ThreadPoolExecutor(1, thread_name_prefix="pedl-checkpoint-write")
            self._hashing = ThreadPoolExecutor(1, thread_name_prefix="pedl-checkpoint-hash")
        self._path = path
        self._file = open(target, "wb")  # noqa: SIM115 - closed in _close / close
        self._hasher = hashlib.sha256()
        self._size = 0

    def _close(self) -> None:
        assert self._file is not None and self._path is not None
        while self._pending:
            self._settle_one()
        self._file.close()
        self._file = None
        path, self._path = self._path, None
        self.verify(path, self._size, self._hasher.hexdigest())

    def finish(self) -> None:
        if self._path is not None:
            raise self._fail(f"the stream ended before the last chunk of file {self._path!r}")
        missing = sorted(set(self._expected) - self._done)
        if missing:
            raise self._fail(f"the stream ended without file(s) {', '.join(map(repr, missing))}")
        self._stop_threads()

    def close(self) -> None:
        """After a failure: in-flight writes end before the file closes (and the caller removes it)."""
        for written, hashed in self._pending:
            for future in (written, hashed):
                future.cancel()
        self._stop_threads()
        self._pending.clear()
        if self._file is not None:
            self._file.close()
            self._file = None

    def _stop_threads(self) -> None:
        for pool in (self._disk, self._hashing):
            if pool is not None:
                pool.shutdown(wait=True)
        self._disk = self._hashing = None
