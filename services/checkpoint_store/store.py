"""The checkpoint store's logic: uploads, the index of visible checkpoints, downloads, deletes.

Free of networking; the gRPC servicer calls it from worker threads. The index is in memory,
rebuilt from the records on storage by `recover()` at start-up. One store process owns a
storage root at a time.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import uuid as uuidlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pedl import _log
from pedl.checkpoints.files import CHUNK_SIZE
from pedl.v1 import checkpoint_store_pb2, common_pb2
from pedl_checkpoint_store import layout
from pedl_checkpoint_store.backends import BackendResolver
from pedl_checkpoint_store.errors import DataLoss, InvalidArgument, NotFound, StoreError
from pedl_checkpoint_store.storage import StorageBackend
from pedl_checkpoint_store.upload import Upload

log = _log.get_logger(component="checkpoint_store")


@dataclass(order=True)
class _Entry:
    sort_key: tuple[str, int]
    checkpoint: common_pb2.Checkpoint = field(compare=False)
    storage: dict[str, Any] = field(compare=False)


@dataclass
class RecoveryReport:
    loaded: int = 0
    removed_partial: list[str] = field(default_factory=list)
    finished_deletes: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)


class CheckpointStore:
    def __init__(self, default_backend: StorageBackend, resolver: BackendResolver | None = None) -> None:
        self.catalog = default_backend
        self.resolver = resolver or BackendResolver(default_backend)
        self._index: dict[str, _Entry] = {}
        self._lock = threading.Lock()
        self._seq = itertools.count()

    # -- start-up -------------------------------------------------------------------------

    def recover(self) -> RecoveryReport:
        """Loads visible checkpoints and removes what interrupted uploads and deletes left behind."""
        report = RecoveryReport()
        records: list[tuple[common_pb2.Checkpoint, dict[str, Any]]] = []
        for name in self.catalog.list_children(""):
            if not _is_uuid(name):
                continue
            if self.catalog.exists(layout.marker_key(name, layout.DELETING)):
                self._remove(name, self._marker_storage(name, layout.DELETING))
                report.finished_deletes.append(name)
            elif self.catalog.exists(layout.marker_key(name, layout.RECORD)):
                try:
                    cp, storage = layout.decode_record(
                        self.catalog.get_bytes(layout.marker_key(name, layout.RECORD))
                    )
                except ValueError as e:
                    log.error("unreadable checkpoint record, skipped", uuid=name, error=str(e))
                    report.unreadable.append(name)
                    continue
                self.catalog.delete(layout.marker_key(name, layout.INCOMPLETE))
                records.append((cp, storage))
            else:
                self._remove(name, self._marker_storage(name, layout.INCOMPLETE))
                report.removed_partial.append(name)
        records.sort(key=lambda r: r[0].created_at)
        for cp, storage in records:
            self._add(cp, storage)
        report.loaded = len(records)
        return report

    def _marker_storage(self, uuid: str, marker: str) -> dict[str, Any]:
        try:
            return layout.decode_marker(self.catalog.get_bytes(layout.marker_key(uuid, marker)))
        except (FileNotFoundError, ValueError):
            return {}

    # -- uploads --------------------------------------------------------------------------

    def begin_upload(
        self,
        *,
        experiment_id: int,
        trial_id: int,
        total_batches: int,
        metadata: Mapping[str, str] | None = None,
        storage: Mapping[str, Any] | None = None,
    ) -> Upload:
        for name, value in (
            ("experiment_id", experiment_id),
            ("trial_id", trial_id),
            ("total_batches", total_batches),
        ):
            if value < 0:
                raise InvalidArgument(f"{name} must not be negative, got {value}")
        data_backend, storage_config = self.resolver.resolve(storage)
        uuid = str(uuidlib.uuid4())
        checkpoint = common_pb2.Checkpoint(
            uuid=uuid,
            experiment_id=experiment_id,
            trial_id=trial_id,
            total_batches=total_batches,
            metadata=dict(metadata or {}),
        )
        self.catalog.put_bytes(
            layout.marker_key(uuid, layout.INCOMPLETE), layout.encode_marker(storage_config)
        )
        return Upload(
            uuid=uuid,
            checkpoint=checkpoint,
            storage=storage_config,
            data_backend=data_backend,
            catalog=self.catalog,
            publish=self._add,
        )

    def _add(self, checkpoint: common_pb2.Checkpoint, storage: dict[str, Any]) -> None:
        with self._lock:
            entry = _Entry((checkpoint.created_at, next(self._seq)), checkpoint, storage)
            self._index[checkpoint.uuid] = entry

    # -- reads ----------------------------------------------------------------------------

    def get(self, uuid: str) -> common_pb2.Checkpoint:
        with self._lock:
            entry = self._index.get(uuid)
        if entry is None:
            raise NotFound(f"checkpoint {uuid} not found")
        return _copy(entry.checkpoint)

    def list(self, experiment_id: int = 0, trial_id: int = 0) -> list[common_pb2.Checkpoint]:
        """Visible checkpoints matching the filters (0 = any), newest first by creation time."""
        with self._lock:
            entries = sorted(self._index.values(), reverse=True)
        return [
            _copy(e.checkpoint)
            for e in entries
            if (experiment_id == 0 or e.checkpoint.experiment_id == experiment_id)
            and (trial_id == 0 or e.checkpoint.trial_id == trial_id)
        ]

    def open_download(
        self, uuid: str, chunk_size: int = CHUNK_SIZE
    ) -> tuple[common_pb2.Checkpoint, Iterator[checkpoint_store_pb2.FileChunk]]:
        """The checkpoint's record and a lazy iterator over its files' chunks, file by file."""
        with self._lock:
            entry = self._index.get(uuid)
        if entry is None:
            raise NotFound(f"checkpoint {uuid} not found")
        backend, _ = self.resolver.resolve(entry.storage)
        return _copy(entry.checkpoint), self._chunks(entry.checkpoint, backend, chunk_size)

    def _chunks(
        self, cp: common_pb2.Checkpoint, backend: StorageBackend, chunk_size: int
    ) -> Iterator[checkpoint_store_pb2.FileChunk]:
        for info in cp.files:
            try:
                pieces = backend.read_chunks(layout.data_key(cp.uuid, info.path), chunk_size)
            except FileNotFoundError:
                with self._lock:
                    deleted = cp.uuid not in self._index
                if deleted:
                    raise NotFound(f"checkpoint {cp.uuid} was deleted during the download") from None
                raise DataLoss(
                    f"file {info.path!r} of checkpoint {cp.uuid} is missing from {backend.describe()}"
                ) from None
            yield from _verified(cp.uuid, info, pieces, backend)

    # -- deletes --------------------------------------------------------------------------

    def delete(self, uuid: str) -> None:
        with self._lock:
            entry = self._index.pop(uuid, None)
        if entry is None:
            raise NotFound(f"checkpoint {uuid} not found")
        self.catalog.put_bytes(layout.marker_key(uuid, layout.DELETING), layout.encode_marker(entry.storage))
        self.catalog.delete(layout.marker_key(uuid, layout.RECORD))
        self._remove(uuid, entry.storage)

    def _remove(self, uuid: str, storage: dict[str, Any]) -> None:
        """Removes the bytes, then the catalog entry. If the bytes' storage fails (unreachable, or its
        config no longer works), the entry and its marker stay, so the next start-up tries again."""
        try:
            backend, _ = self.resolver.resolve(storage)
            backend.delete_prefix(uuid)
        except (StoreError, OSError) as e:
            log.error("cannot remove checkpoint bytes yet; retried at next start-up", uuid=uuid, error=str(e))
            return
        self.catalog.delete_prefix(uuid)


def _verified(
    uuid: str, info: common_pb2.FileInfo, pieces: Iterator[bytes], backend: StorageBackend
) -> Iterator[checkpoint_store_pb2.FileChunk]:
    """One file's chunks; its bytes are hashed as they pass, and a file that no longer matches its
    record fails with DataLoss before its last chunk is sent."""
    hasher = hashlib.sha256()
    offset = 0
    current = next(pieces, None)
    while True:
        following = next(pieces, None) if current is not None else None
        data = current or b""
        hasher.update(data)
        last = following is None
        if last:
            size = offset + len(data)
            digest = hasher.hexdigest()
            if size != info.size or digest != info.sha256:
                raise DataLoss(
                    f"file {info.path!r} of checkpoint {uuid} in {backend.describe()} is corrupt: "
                    f"the record says {info.size} bytes with sha256 {info.sha256}, storage holds "
                    f"{size} bytes with sha256 {digest}"
                )
        yield checkpoint_store_pb2.FileChunk(
            path=info.path, offset=offset, data=data, last=last, sha256=info.sha256 if last else ""
        )
        offset += len(data)
        if last:
            return
        current = following


def _copy(cp: common_pb2.Checkpoint) -> common_pb2.Checkpoint:
    out = common_pb2.Checkpoint()
    out.CopyFrom(cp)
    return out


def _is_uuid(name: str) -> bool:
    try:
        return str(uuidlib.UUID(name)) == name
    except ValueError:
        return False
