"""Assembles one checkpoint from a stream of FileChunks, hashing and checking as bytes arrive."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from typing import Any

from pedl import _log
from pedl.v1 import checkpoint_store_pb2, common_pb2
from pedl_checkpoint_store import layout
from pedl_checkpoint_store.errors import InvalidArgument, StoreError
from pedl_checkpoint_store.paths import FileTree
from pedl_checkpoint_store.storage import ObjectWriter, StorageBackend
from pedl_checkpoint_store.visibility import publish_record, remove_partial

log = _log.get_logger(component="checkpoint_store")


class _OpenFile:
    def __init__(self, path: str, writer: ObjectWriter) -> None:
        self.path = path
        self.writer = writer
        self.size = 0
        self.hasher = hashlib.sha256()


class Upload:
    """One checkpoint being uploaded. Any error aborts it: its bytes are removed, nothing shows.

    Methods may be called from worker threads; one chunk is handled at a time.
    """

    def __init__(
        self,
        *,
        uuid: str,
        checkpoint: common_pb2.Checkpoint,
        storage: dict[str, Any],
        data_backend: StorageBackend,
        catalog: StorageBackend,
        publish: Callable[[common_pb2.Checkpoint, dict[str, Any]], None],
        ended: Callable[[str], None] | None = None,
    ) -> None:
        """`ended(uuid)` is called once the upload is finished or aborted: it is in progress no more."""
        self.uuid = uuid
        self._checkpoint = checkpoint
        self._storage = storage
        self._data = data_backend
        self._catalog = catalog
        self._publish = publish
        self._ended = ended
        self._lock = threading.Lock()
        self._open: _OpenFile | None = None
        self._tree = FileTree()
        self._state = "open"  # -> "finished" | "aborted"

    def add_chunk(self, chunk: checkpoint_store_pb2.FileChunk) -> None:
        with self._lock:
            self._check_open()
            try:
                self._add_chunk(chunk)
            except BaseException:
                self._abort_locked()
                raise

    def finish(self) -> common_pb2.Checkpoint:
        """Makes the checkpoint visible and returns its record."""
        with self._lock:
            self._check_open()
            try:
                if self._open is not None:
                    raise InvalidArgument(f"upload ended before the last chunk of file {self._open.path!r}")
                cp = self._checkpoint
                publish_record(self._catalog, cp, self._storage)
                self._state = "finished"
            except BaseException:
                self._abort_locked()
                raise
            self._publish(cp, self._storage)
            self._end()
            return cp

    def abort(self) -> None:
        """Removes everything written so far; a no-op once finished or aborted."""
        with self._lock:
            if self._state == "open":
                self._abort_locked()

    @property
    def state(self) -> str:
        return self._state

    def _check_open(self) -> None:
        if self._state != "open":
            raise StoreError(f"upload of checkpoint {self.uuid} is already {self._state}")

    def _add_chunk(self, chunk: checkpoint_store_pb2.FileChunk) -> None:
        f = self._open
        if f is None or chunk.path != f.path:
            if f is not None:
                raise InvalidArgument(
                    f"chunk for file {chunk.path!r} arrived before the last chunk of file {f.path!r}"
                )
            f = self._start_file(chunk.path)
        if chunk.offset != f.size:
            raise InvalidArgument(f"chunk of file {f.path!r} has offset {chunk.offset}, expected {f.size}")
        if chunk.data:
            f.writer.write(chunk.data)
            f.hasher.update(chunk.data)
            f.size += len(chunk.data)
        if chunk.last:
            self._finish_file(f, chunk.sha256)
        elif chunk.sha256:
            raise InvalidArgument(f"chunk of file {f.path!r} carries a sha256 but is not marked last")

    def _start_file(self, path: str) -> _OpenFile:
        self._tree.add(path)
        self._open = _OpenFile(path, self._data.open_write(layout.data_key(self.uuid, path)))
        return self._open

    def _finish_file(self, f: _OpenFile, sha256: str) -> None:
        if not sha256:
            raise InvalidArgument(f"last chunk of file {f.path!r} carries no sha256")
        actual = f.hasher.hexdigest()
        if sha256.lower() != actual:
            raise InvalidArgument(
                f"sha256 mismatch for file {f.path!r}: the client sent {sha256}, "
                f"the received bytes hash to {actual}"
            )
        f.writer.commit()
        self._checkpoint.files.add(path=f.path, size=f.size, sha256=actual)
        self._open = None

    def _abort_locked(self) -> None:
        self._state = "aborted"
        if self._open is not None:
            try:
                self._open.writer.abort()
            except OSError as e:  # remove_partial below tries again by prefix
                log.warning("could not abort a file of an aborted upload", uuid=self.uuid, error=str(e))
            self._open = None
        remove_partial(self.uuid, self._data, self._catalog)
        self._end()

    def _end(self) -> None:
        if self._ended is not None:
            self._ended(self.uuid)
