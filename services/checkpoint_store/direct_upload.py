"""A checkpoint whose bytes the client PUTs straight to storage, on URLs the store presigned.

The store's part is what it does for a streamed upload, minus carrying the bytes: reserve the uuid
(incomplete marker first), plan and presign every file, then on finish complete each object, check
its size and write the record that makes the checkpoint visible. Each file's sha256 is the client's,
hashed from the very buffers it sent; every download checks it end to end. Any failure aborts the
whole upload, as does nobody finishing it before its URLs expire.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pedl import _log
from pedl.v1 import common_pb2
from pedl_checkpoint_store import layout
from pedl_checkpoint_store.errors import InvalidArgument, NotFound, StoreError
from pedl_checkpoint_store.paths import FileTree
from pedl_checkpoint_store.storage import PresignedPut, StorageBackend
from pedl_checkpoint_store.visibility import publish_record, remove_partial

log = _log.get_logger(component="checkpoint_store")

_SHA256 = re.compile(r"[0-9a-f]{64}")
EXPIRY_GRACE_SECONDS = 60  # past a direct upload's deadline, before `sweep` aborts it


@dataclass(frozen=True)
class PlannedFile:
    path: str
    size: int
    put: PresignedPut


@dataclass(frozen=True)
class UploadedFile:
    path: str
    sha256: str
    etags: list[str]
    part_sha256: list[str] = field(default_factory=list)  # empty from clients older than part hashes


class DirectUpload:
    """Methods may be called from worker threads, one at a time."""

    def __init__(
        self,
        *,
        checkpoint: common_pb2.Checkpoint,
        storage: dict[str, Any],
        data_backend: StorageBackend,
        catalog: StorageBackend,
        publish: Callable[[common_pb2.Checkpoint, dict[str, Any]], None],
        expires_in_seconds: int,
    ) -> None:
        self.uuid = checkpoint.uuid
        self.checkpoint = checkpoint
        self.expires_in_seconds = expires_in_seconds
        self.started = time.monotonic()
        self.started_at = datetime.now(timezone.utc)  # for the orphan sweep, against storage's clock
        self.where = data_backend.describe()
        self.deadline = self.started + expires_in_seconds
        self.files: list[PlannedFile] = []
        self._storage = storage
        self._data = data_backend
        self._catalog = catalog
        self._publish = publish
        self._lock = threading.Lock()
        self._state = "open"  # -> "finished" | "aborted"

    @property
    def state(self) -> str:
        return self._state

    def plan(self, files: Sequence[tuple[str, int]]) -> None:
        """Presigns every file (S3 starts a multipart upload for each file over one part)."""
        tree = FileTree()
        with self._lock:
            self._check_open()
            try:
                for path, size in files:
                    tree.add(path)
                    if size < 0:
                        raise InvalidArgument(f"file {path!r} has a negative size")
                    put = self._data.presign_put(
                        layout.data_key(self.uuid, path), size, self.expires_in_seconds
                    )
                    self.files.append(PlannedFile(path, size, put))
            except BaseException:
                self._abort_locked()
                raise

    def finish(self, uploaded: Sequence[UploadedFile]) -> common_pb2.Checkpoint:
        """Completes every object, checks its size, and makes the checkpoint visible."""
        with self._lock:
            self._check_open()
            try:
                if time.monotonic() > self.deadline:
                    raise StoreError(f"upload of checkpoint {self.uuid} expired before it was finished")
                reported = self._match(uploaded)
                for planned in self.files:
                    sent = reported[planned.path]
                    try:
                        self._data.complete_put(
                            layout.data_key(self.uuid, planned.path), planned.put, sent.etags, planned.size
                        )
                    except ValueError as e:
                        raise InvalidArgument(f"file {planned.path!r}: {e}") from None
                    info = self.checkpoint.files.add(path=planned.path, size=planned.size, sha256=sent.sha256)
                    if sent.part_sha256:
                        info.part_size = planned.put.part_size
                        info.part_sha256.extend(sent.part_sha256)
                publish_record(self._catalog, self.checkpoint, self._storage)
                self._state = "finished"
            except BaseException:
                self._abort_locked()
                raise
            self._publish(self.checkpoint, self._storage)
            return self.checkpoint

    def abort(self) -> bool:
        """Removes everything stored so far; a no-op (False) once finished or aborted."""
        with self._lock:
            if self._state != "open":
                return False
            self._abort_locked()
            return True

    def _match(self, uploaded: Sequence[UploadedFile]) -> dict[str, UploadedFile]:
        reported = {f.path: f for f in uploaded}
        planned = {f.path for f in self.files}
        if len(reported) != len(uploaded) or set(reported) != planned:
            missing, extra = sorted(planned - set(reported)), sorted(set(reported) - planned)
            raise InvalidArgument(
                f"the finished upload must report each planned file once (missing {missing}, "
                f"not planned {extra})"
            )
        parts = {f.path: len(f.put.urls) for f in self.files}
        for f in uploaded:
            for digest in (f.sha256, *f.part_sha256):
                if not _SHA256.fullmatch(digest):
                    raise InvalidArgument(f"file {f.path!r}: {digest!r} is not a lowercase hex sha256")
            if f.part_sha256 and len(f.part_sha256) != parts[f.path]:
                raise InvalidArgument(
                    f"file {f.path!r}: {len(f.part_sha256)} part hashes for {parts[f.path]} parts"
                )
        return reported

    def _check_open(self) -> None:
        if self._state != "open":
            raise StoreError(f"upload of checkpoint {self.uuid} is already {self._state}")

    def _abort_locked(self) -> None:
        self._state = "aborted"
        remove_partial(self.uuid, self._data, self._catalog)  # S3: also aborts its multipart uploads


class DirectUploads:
    """The direct uploads in progress, by uuid. Thread-safe."""

    def __init__(self) -> None:
        self._uploads: dict[str, DirectUpload] = {}
        self._lock = threading.Lock()

    def add(self, upload: DirectUpload) -> None:
        with self._lock:
            self._uploads[upload.uuid] = upload

    def uuids(self) -> list[str]:
        with self._lock:
            return list(self._uploads)

    def started_in(self, where: str) -> dict[str, datetime]:
        """The uploads in progress to storage `where` (a backend's describe()), by uuid: when begun."""
        with self._lock:
            return {u.uuid: u.started_at for u in self._uploads.values() if u.where == where}

    def get(self, uuid: str) -> DirectUpload:
        with self._lock:
            upload = self._uploads.get(uuid)
        if upload is None:
            raise NotFound(
                f"no upload of checkpoint {uuid} in progress (finished, aborted, expired, or the store "
                "restarted since it began)"
            )
        return upload

    def finish(self, uuid: str, files: Sequence[UploadedFile]) -> common_pb2.Checkpoint:
        upload = self.get(uuid)
        try:
            return upload.finish(files)
        finally:
            self._forget(upload)

    def abort(self, uuid: str) -> bool:
        """Whether an upload in progress was aborted; a no-op (False) for an unknown or ended one."""
        with self._lock:
            upload = self._uploads.pop(uuid, None)
        return upload is not None and upload.abort()

    def sweep(self) -> list[str]:
        """Aborts the uploads nobody finished before their URLs expired; returns their uuids."""
        now = time.monotonic()
        with self._lock:
            expired = [u for u in self._uploads.values() if u.deadline + EXPIRY_GRACE_SECONDS < now]
        for upload in expired:
            log.warning("direct upload expired unfinished; removing it", uuid=upload.uuid)
            upload.abort()
            self._forget(upload)
        return [u.uuid for u in expired]

    def _forget(self, upload: DirectUpload) -> None:
        with self._lock:
            if self._uploads.get(upload.uuid) is upload:
                del self._uploads[upload.uuid]
