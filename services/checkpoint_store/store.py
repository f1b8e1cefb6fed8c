"""The checkpoint store's logic: uploads, the index of visible checkpoints, downloads, deletes.

Free of networking; the gRPC servicer calls it from worker threads. The index is in memory,
rebuilt from the records on storage by `recover()` at start-up. One store process owns a
storage root at a time.
"""

from __future__ import annotations

import builtins
import itertools
import threading
import uuid as uuidlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from pedl import _log
from pedl.checkpoints import file_globs
from pedl.checkpoints.chunk_wire import encode_chunk
from pedl.v1 import checkpoint_store_pb2, common_pb2
from pedl_checkpoint_store import layout
from pedl_checkpoint_store.backends import BackendResolver
from pedl_checkpoint_store.direct_upload import DirectUpload, DirectUploads
from pedl_checkpoint_store.errors import DataLoss, InvalidArgument, NotFound, StoreError
from pedl_checkpoint_store.file_chunks import DownloadItem, passed_through
from pedl_checkpoint_store.known_storages import KnownStorages
from pedl_checkpoint_store.storage import ShortRead, StorageBackend
from pedl_checkpoint_store.upload import Upload

log = _log.get_logger(component="checkpoint_store")

# Bytes per download message: one S3 part (s3_settings.PART_SIZE), so parts pass through unsplit.
CHUNK_SIZE = 8 * 1024 * 1024
# How long a presigned URL works: the client starts on it at once; an hour covers hundreds of GB
# at a modest rate. A direct upload not finished by then is aborted (DirectUploads.sweep).
URL_SECONDS = 3600

Paths: TypeAlias = list[str]  # (the class's own `list` method hides the builtin in its annotations)


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
        self.direct_uploads = DirectUploads()
        self.known_storages = KnownStorages(default_backend)
        self._lock = threading.Lock()
        self._seq = itertools.count()
        # Uploads in progress: streamed ones to their end, direct ones until `direct_uploads` holds them.
        self._uploading: set[str] = set()
        self._removing: set[str] = set()  # uuids a delete or the orphan sweep is removing now
        # Removals whose storage failed (unreachable): uuid -> its storage config, retried by the sweep.
        self._unfinished: dict[str, dict[str, Any]] = {}

    # -- start-up -------------------------------------------------------------------------

    def recover(self) -> RecoveryReport:
        """Loads visible checkpoints and removes what interrupted uploads and deletes left behind."""
        report = RecoveryReport()
        records: list[tuple[common_pb2.Checkpoint, dict[str, Any]]] = []
        for name in self.catalog.list_children(""):
            if not layout.is_checkpoint_name(name):
                continue
            if self.catalog.exists(layout.marker_key(name, layout.DELETING)):
                if self._remove(name, _marker_storage(self.catalog, name, layout.DELETING)):
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
                if self._remove(name, _marker_storage(self.catalog, name, layout.INCOMPLETE)):
                    report.removed_partial.append(name)
        records.sort(key=lambda r: r[0].created_at)
        for cp, storage in records:
            self._add(cp, storage)
        report.loaded = len(records)
        return report

    # -- uploads --------------------------------------------------------------------------

    def begin_upload(
        self,
        *,
        experiment_id: int,
        trial_id: int,
        total_batches: int,
        metadata: Mapping[str, str] | None = None,
        storage: Mapping[str, Any] | None = None,
        uuid: str = "",
    ) -> Upload:
        """A streamed upload: the caller sends the bytes through the store."""
        checkpoint, data_backend, storage_config = self._new_checkpoint(
            experiment_id, trial_id, total_batches, metadata, storage, uuid
        )
        try:
            self._mark_incomplete(checkpoint.uuid, storage_config)
        except BaseException:
            self._release(checkpoint.uuid)
            raise
        return Upload(
            uuid=checkpoint.uuid,
            checkpoint=checkpoint,
            storage=storage_config,
            data_backend=data_backend,
            catalog=self.catalog,
            publish=self._add,
            ended=self._release,
        )

    def begin_direct_upload(
        self,
        *,
        experiment_id: int,
        trial_id: int,
        total_batches: int,
        files: Sequence[tuple[str, int]],
        metadata: Mapping[str, str] | None = None,
        storage: Mapping[str, Any] | None = None,
        uuid: str = "",
    ) -> DirectUpload | None:
        """A direct upload of `files` (path, size), planned and presigned; None where the storage
        cannot presign, and the caller must stream the bytes instead."""
        self.direct_uploads.sweep()
        checkpoint, data_backend, storage_config = self._new_checkpoint(
            experiment_id, trial_id, total_batches, metadata, storage, uuid
        )
        try:
            if not data_backend.presigns:
                return None
            self._mark_incomplete(checkpoint.uuid, storage_config)
            upload = DirectUpload(
                checkpoint=checkpoint,
                storage=storage_config,
                data_backend=data_backend,
                catalog=self.catalog,
                publish=self._add,
                expires_in_seconds=URL_SECONDS,
            )
            upload.plan(files)
            self.direct_uploads.add(upload)
        finally:
            self._release(checkpoint.uuid)
        return upload

    def _new_checkpoint(
        self,
        experiment_id: int,
        trial_id: int,
        total_batches: int,
        metadata: Mapping[str, str] | None,
        storage: Mapping[str, Any] | None,
        uuid: str = "",
    ) -> tuple[common_pb2.Checkpoint, StorageBackend, dict[str, Any]]:
        for name, value in (
            ("experiment_id", experiment_id),
            ("trial_id", trial_id),
            ("total_batches", total_batches),
        ):
            if value < 0:
                raise InvalidArgument(f"{name} must not be negative, got {value}")
        data_backend, storage_config = self.resolver.resolve(storage)
        uuid = self._chosen_uuid(uuid) if uuid else str(uuidlib.uuid4())
        with self._lock:  # reserved before any byte is stored, so the orphan sweep leaves it alone
            if uuid in self._index or uuid in self._uploading:
                raise InvalidArgument(f"checkpoint {uuid} already exists")
            if uuid in self._removing:
                raise InvalidArgument(f"checkpoint {uuid} is being removed; try again in a moment")
            self._uploading.add(uuid)
        checkpoint = common_pb2.Checkpoint(
            uuid=uuid,
            experiment_id=experiment_id,
            trial_id=trial_id,
            total_batches=total_batches,
            metadata=dict(metadata or {}),
        )
        return checkpoint, data_backend, storage_config

    def _chosen_uuid(self, uuid: str) -> str:
        """A client's uuid: canonical, and not one the store already holds."""
        try:
            canonical = str(uuidlib.UUID(uuid))
        except ValueError:
            raise InvalidArgument(f"uuid {uuid!r} is not a UUID") from None
        if canonical != uuid:
            raise InvalidArgument(f"uuid {uuid!r} is not in canonical form ({canonical})")
        if self.catalog.exists(layout.marker_key(uuid, layout.INCOMPLETE)):
            raise InvalidArgument(f"checkpoint {uuid} already exists")
        return uuid

    def _release(self, uuid: str) -> None:
        with self._lock:
            self._uploading.discard(uuid)

    def _mark_incomplete(self, uuid: str, storage_config: dict[str, Any]) -> None:
        """Before any byte: what a crash leaves behind is found and removed at the next start-up, or
        by the orphan sweep, which also visits every storage ever noted."""
        self.known_storages.note(storage_config)
        marker = layout.encode_marker(storage_config)
        self.catalog.put_bytes(layout.marker_key(uuid, layout.INCOMPLETE), marker)

    def _add(self, checkpoint: common_pb2.Checkpoint, storage: dict[str, Any]) -> None:
        with self._lock:
            entry = _Entry((checkpoint.created_at, next(self._seq)), checkpoint, storage)
            self._index[checkpoint.uuid] = entry

    # -- reads ----------------------------------------------------------------------------

    def _entry(self, uuid: str) -> _Entry:
        with self._lock:
            entry = self._index.get(uuid)
        if entry is None:
            raise NotFound(f"checkpoint {uuid} not found")
        return entry

    def get(self, uuid: str) -> common_pb2.Checkpoint:
        return _copy(self._entry(uuid).checkpoint)

    def record(self, uuid: str) -> tuple[common_pb2.Checkpoint, dict[str, Any]]:
        """A visible checkpoint's record and the config of the storage its bytes are on; NotFound."""
        entry = self._entry(uuid)
        return _copy(entry.checkpoint), dict(entry.storage)

    def missing_files(self, uuid: str) -> builtins.list[str]:
        """The record's files its storage does not hold now: a visible checkpoint whose bytes went
        behind its record's back (lost by the storage, or removed by a deletion that raced an upload
        of the same uuid) cannot be downloaded whole. One existence check per file."""
        entry = self._entry(uuid)
        backend, _ = self.resolver.resolve(entry.storage)
        return [f.path for f in entry.checkpoint.files if not backend.exists(layout.data_key(uuid, f.path))]

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
        self, uuid: str, chunk_size: int = CHUNK_SIZE, *, urls: bool = False
    ) -> tuple[common_pb2.Checkpoint, Iterator[DownloadItem]]:
        """The checkpoint's record and a lazy iterator over its files' chunks, file by file, each
        already serialized (chunk_wire).

        With `urls`, files on storage that presigns (S3) come as one FileUrl each instead: the caller
        GETs them itself, sparing the store's hop (see docs/ARCHITECTURE.md, checkpoints)."""
        entry = self._entry(uuid)
        backend, _ = self.resolver.resolve(entry.storage)
        cp = entry.checkpoint
        if urls and backend.presigns:
            return _copy(cp), iter(
                checkpoint_store_pb2.DownloadCheckpointResponse(
                    url=checkpoint_store_pb2.FileUrl(
                        path=info.path,
                        url=backend.presign_get(layout.data_key(cp.uuid, info.path), URL_SECONDS),
                        expires_in_seconds=URL_SECONDS,
                    )
                )
                for info in cp.files
            )
        return _copy(cp), self._chunks(cp, backend, chunk_size)

    def open_range(
        self, uuid: str, path: str, offset: int, length: int, chunk_size: int = CHUNK_SIZE
    ) -> Iterator[DownloadItem]:
        """Bytes [offset, offset + length) of file `path` of checkpoint `uuid` (length 0: to its end),
        lazily, each chunk already serialized (chunk_wire); `last` on the range's last.

        Lets a client fetch a file's parts on several calls at once, as it does on presigned URLs.
        Raises NotFound, or InvalidArgument for a range outside the file."""
        entry = self._entry(uuid)
        cp = entry.checkpoint
        info = next((f for f in cp.files if f.path == path), None)
        if info is None:
            raise InvalidArgument(f"range of checkpoint {uuid}: it has no file {path!r}")
        if length == 0:
            length = info.size - offset
        if offset < 0 or length < 0 or offset + length > info.size:
            raise InvalidArgument(
                f"range of file {path!r} of checkpoint {uuid}: offset {offset}, length {length} "
                f"is outside its {info.size} bytes"
            )
        backend, _ = self.resolver.resolve(entry.storage)
        return self._range_items(cp, info, backend, offset, length, chunk_size)

    def _range_items(
        self,
        cp: common_pb2.Checkpoint,
        info: common_pb2.FileInfo,
        backend: StorageBackend,
        offset: int,
        length: int,
        chunk_size: int,
    ) -> Iterator[DownloadItem]:
        end = offset + length
        key = layout.data_key(cp.uuid, info.path)
        with self._missing_as_store_error(cp, info, backend):
            try:
                for data in backend.read_range(key, offset, length, chunk_size):
                    yield encode_chunk(info.path, offset, data, last=offset + len(data) >= end)
                    offset += len(data)
            except ShortRead as e:
                raise DataLoss(
                    f"file {info.path!r} of checkpoint {cp.uuid} in {backend.describe()} is corrupt: "
                    f"the record says {info.size} bytes, storage holds fewer ({e})"
                ) from None

    @contextmanager
    def _missing_as_store_error(
        self, cp: common_pb2.Checkpoint, info: common_pb2.FileInfo, backend: StorageBackend
    ) -> Iterator[None]:
        """A file gone from storage: NotFound if its checkpoint was deleted meanwhile, else DataLoss."""
        try:
            yield
        except FileNotFoundError:
            with self._lock:
                deleted = cp.uuid not in self._index
            if deleted:
                raise NotFound(f"checkpoint {cp.uuid} was deleted during the download") from None
            raise DataLoss(
                f"file {info.path!r} of checkpoint {cp.uuid} is missing from {backend.describe()}"
            ) from None

    def _chunks(
        self, cp: common_pb2.Checkpoint, backend: StorageBackend, chunk_size: int
    ) -> Iterator[DownloadItem]:
        for info in cp.files:
            with self._missing_as_store_error(cp, info, backend):
                pieces = backend.read_chunks(layout.data_key(cp.uuid, info.path), chunk_size)
            yield from passed_through(cp.uuid, info, pieces, backend)

    # -- deletes --------------------------------------------------------------------------

    def delete(self, uuid: str) -> None:
        with self._lock:
            entry = self._index.pop(uuid, None)
            if entry is not None:
                self._removing.add(uuid)  # not the orphan sweep's to remove (nor to log) meanwhile
        if entry is None:
            raise NotFound(f"checkpoint {uuid} not found")
        try:
            marker = layout.encode_marker(entry.storage)
            self.catalog.put_bytes(layout.marker_key(uuid, layout.DELETING), marker)
            self.catalog.delete(layout.marker_key(uuid, layout.RECORD))
            self._remove(uuid, entry.storage)
        finally:
            with self._lock:
                self._removing.discard(uuid)

    def remove_files(self, uuid: str, globs: Sequence[str]) -> tuple[common_pb2.Checkpoint, Paths]:
        """Removes the files any glob names (`file_globs`): the record without them first, so it never
        names a file storage lacks, then their bytes. The record now, the paths removed."""
        entry = self._entry(uuid)
        kept, removed = _without(entry.checkpoint, globs)
        if removed:
            record = layout.encode_record(kept, entry.storage)
            self.catalog.put_bytes(layout.marker_key(uuid, layout.RECORD), record)
            entry.checkpoint = kept  # one reference swapped: readers see the old record or this one
            backend, _ = self.resolver.resolve(entry.storage)
            for path in removed:
                backend.delete(layout.data_key(uuid, path))
        return _copy(kept), removed

    def _remove(self, uuid: str, storage: dict[str, Any]) -> bool:
        """Removes the bytes, then the catalog entry. If the bytes' storage fails (unreachable, or its
        config no longer works), the entry and its marker stay, and the orphan sweep (or the next
        start-up) tries again; False then."""
        try:
            backend, _ = self.resolver.resolve(storage)
            backend.delete_prefix(uuid)
        except (StoreError, OSError) as e:
            log.error(
                "cannot remove checkpoint bytes yet; retried by the orphan sweep", uuid=uuid, error=str(e)
            )
            with self._lock:
                self._unfinished[uuid] = storage
            return False
        self.catalog.delete_prefix(uuid)
        with self._lock:
            self._unfinished.pop(uuid, None)
        return True

    # -- the orphan sweep's part (see sweeper.py) ----------------------------------------------

    def claimed(self) -> set[str]:
        """The uuids whose bytes are the store's to keep: visible checkpoints and uploads in progress."""
        with self._lock:
            return set(self._index) | self._uploading | set(self.direct_uploads.uuids())

    def storage_configs(self) -> builtins.list[dict[str, Any]]:
        """The storages the visible checkpoints and the unfinished removals name."""
        with self._lock:
            return [e.storage for e in self._index.values()] + list(self._unfinished.values())

    def retry_unfinished_removals(self) -> builtins.list[str]:
        """Deletes and aborted uploads whose storage failed before; the uuids removed now."""
        with self._lock:
            unfinished = dict(self._unfinished)
        return [uuid for uuid, storage in unfinished.items() if self._remove(uuid, storage)]

    def remove_orphan(self, uuid: str, backend: StorageBackend) -> bool:
        """Removes `uuid`'s prefix from `backend` (and its markers from the catalog, and its bytes from
        the storage they name) unless it is claimed now or has a record: False then."""
        with self._lock:
            if uuid in self._index or uuid in self._uploading or uuid in self._removing:
                return False
            if uuid in self.direct_uploads.uuids():
                return False
            self._removing.add(uuid)
        try:
            if self.catalog.exists(layout.marker_key(uuid, layout.RECORD)):
                log.error("checkpoint record on storage but not loaded; its bytes are kept", uuid=uuid)
                return False
            for marker in (layout.INCOMPLETE, layout.DELETING):
                if self.catalog.exists(layout.marker_key(uuid, marker)):
                    other, _ = self.resolver.resolve(_marker_storage(self.catalog, uuid, marker))
                    other.delete_prefix(uuid)
            backend.delete_prefix(uuid)
            self.catalog.delete_prefix(uuid)
        finally:
            with self._lock:
                self._removing.discard(uuid)
        return True


def _marker_storage(catalog: StorageBackend, uuid: str, marker: str) -> dict[str, Any]:
    try:
        return layout.decode_marker(catalog.get_bytes(layout.marker_key(uuid, marker)))
    except (FileNotFoundError, ValueError):
        return {}


def _without(cp: common_pb2.Checkpoint, globs: Sequence[str]) -> tuple[common_pb2.Checkpoint, Paths]:
    try:
        return file_globs.without(cp, globs)
    except ValueError as e:
        raise InvalidArgument(str(e)) from None


def _copy(cp: common_pb2.Checkpoint) -> common_pb2.Checkpoint:
    out = common_pb2.Checkpoint()
    out.CopyFrom(cp)
    return out
