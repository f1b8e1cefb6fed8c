"""Trials' own TensorBoard event files: stored beside checkpoints, listed, served, deleted per experiment.

    tensorboard/<experiment>/<trial>/<path>      the bytes, on the experiment's checkpoint storage
    tensorboard/<experiment>/trial-<trial>.json  the trial's manifest, on the store's own backend:
                                                 the storage config and each file's size and sha256

A harness sends a file again whenever it grew, so a file is replaced whole (a storage cannot append).
Bytes are committed before the manifest names them: a reader never gets a path that is not there.
`tensorboard` is not a UUID, so the orphan sweep (`orphan_sweep.py`) never takes it for a checkpoint;
the files leave storage only with their experiment (`delete_experiment`, called by the scheduler).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pedl.v1 import checkpoint_store_pb2 as pb
from pedl_checkpoint_store.backends import BackendResolver
from pedl_checkpoint_store.errors import DataLoss, InvalidArgument, NotFound
from pedl_checkpoint_store.paths import validate_relpath
from pedl_checkpoint_store.storage import ObjectWriter, StorageBackend

PREFIX = "tensorboard"


def experiment_prefix(experiment_id: int) -> str:
    return f"{PREFIX}/{experiment_id}"


def data_key(experiment_id: int, trial_id: int, path: str) -> str:
    return f"{PREFIX}/{experiment_id}/{trial_id}/{path}"


def manifest_key(experiment_id: int, trial_id: int) -> str:
    return f"{PREFIX}/{experiment_id}/trial-{trial_id}.json"


def _trial_of_manifest(name: str) -> int | None:
    if name.startswith("trial-") and name.endswith(".json") and name[6:-5].isdigit():
        return int(name[6:-5])
    return None


@dataclass
class _Manifest:
    storage: dict[str, Any]
    files: dict[str, tuple[int, str]]  # path -> (size, sha256)

    def encode(self) -> bytes:
        doc = {"storage": self.storage, "files": {p: list(v) for p, v in sorted(self.files.items())}}
        return json.dumps(doc, sort_keys=True).encode()

    @staticmethod
    def decode(data: bytes) -> _Manifest:
        doc = json.loads(data)
        return _Manifest(
            doc.get("storage") or {}, {p: (int(v[0]), str(v[1])) for p, v in doc["files"].items()}
        )


class TensorboardFiles:
    """The store's part; free of networking (the servicer calls it from worker threads)."""

    def __init__(self, catalog: StorageBackend, resolver: BackendResolver) -> None:
        self.catalog = catalog
        self.resolver = resolver
        self._lock = threading.Lock()  # manifests are read, changed and written under it

    def _manifest(self, experiment_id: int, trial_id: int) -> _Manifest | None:
        try:
            data = self.catalog.get_bytes(manifest_key(experiment_id, trial_id))
        except FileNotFoundError:
            return None
        try:
            return _Manifest.decode(data)
        except (ValueError, KeyError, TypeError, IndexError) as e:
            raise DataLoss(
                f"TensorBoard manifest of trial {trial_id} (experiment {experiment_id}) is unreadable: {e}"
            ) from None

    def _storage_of(self, experiment_id: int, asked: Mapping[str, Any] | None) -> dict[str, Any]:
        """Where an experiment's files go: where its first upload put them, so they are deleted together."""
        for other in self._trials(experiment_id):
            manifest = self._manifest(experiment_id, other)
            if manifest is not None:
                return manifest.storage
        return dict(asked or {})

    def _trials(self, experiment_id: int) -> list[int]:
        names = self.catalog.list_children(experiment_prefix(experiment_id))
        return sorted(t for t in (_trial_of_manifest(n) for n in names) if t is not None)

    def begin(
        self, experiment_id: int, trial_id: int, storage: Mapping[str, Any] | None
    ) -> TensorboardUpload:
        for name, value in (("experiment_id", experiment_id), ("trial_id", trial_id)):
            if value <= 0:
                raise InvalidArgument(f"{name} must be positive, got {value}")
        with self._lock:
            config = self._storage_of(experiment_id, storage)
        backend, normalized = self.resolver.resolve(config)
        return TensorboardUpload(self, experiment_id, trial_id, backend, normalized)

    def _record(
        self, experiment_id: int, trial_id: int, storage: dict[str, Any], path: str, size: int, sha: str
    ) -> None:
        with self._lock:
            manifest = self._manifest(experiment_id, trial_id) or _Manifest(storage, {})
            manifest.files[path] = (size, sha)
            self.catalog.put_bytes(manifest_key(experiment_id, trial_id), manifest.encode())

    def list(self, experiment_id: int, trial_id: int = 0) -> list[pb.TensorboardFile]:
        trials = [trial_id] if trial_id else self._trials(experiment_id)
        out = []
        for t in trials:
            manifest = self._manifest(experiment_id, t)
            for path, (size, sha) in sorted((manifest.files if manifest else {}).items()):
                out.append(pb.TensorboardFile(trial_id=t, path=path, size=size, sha256=sha))
        return out

    def open(self, experiment_id: int, trial_id: int, path: str, chunk_size: int) -> Iterator[pb.FileChunk]:
        """The file's chunks as stored now (its sha256 on the last); NotFound for a file never uploaded."""
        manifest = self._manifest(experiment_id, trial_id)
        if manifest is None or path not in manifest.files:
            raise NotFound(f"trial {trial_id} of experiment {experiment_id} has no TensorBoard file {path!r}")
        backend, _ = self.resolver.resolve(manifest.storage)
        return _chunks(backend, data_key(experiment_id, trial_id, path), path, chunk_size)

    def delete_experiment(self, experiment_id: int) -> int:
        """Removes the experiment's files from its storage, then its manifests; how many files went."""
        with self._lock:
            manifests = {t: self._manifest(experiment_id, t) for t in self._trials(experiment_id)}
            count = sum(len(m.files) for m in manifests.values() if m is not None)
            storages = {json.dumps(m.storage, sort_keys=True): m.storage for m in manifests.values() if m}
            for storage in storages.values():
                backend, _ = self.resolver.resolve(storage)
                backend.delete_prefix(experiment_prefix(experiment_id))
            self.catalog.delete_prefix(experiment_prefix(experiment_id))
        return count


def _chunks(backend: StorageBackend, key: str, path: str, chunk_size: int) -> Iterator[pb.FileChunk]:
    hasher = hashlib.sha256()
    offset = 0
    try:
        pieces = iter(backend.read_chunks(key, chunk_size))
        current = next(pieces, None)
    except FileNotFoundError:
        raise DataLoss(f"TensorBoard file {path!r} is missing from {backend.describe()}") from None
    while True:
        following = next(pieces, None) if current is not None else None
        data = current or b""
        hasher.update(data)
        last = following is None
        yield pb.FileChunk(
            path=path, offset=offset, data=data, last=last, sha256=hasher.hexdigest() if last else ""
        )
        offset += len(data)
        if last:
            return
        current = following


class TensorboardUpload:
    """One upload stream: files replace their stored versions one by one as each one's last chunk arrives."""

    def __init__(
        self,
        files: TensorboardFiles,
        experiment_id: int,
        trial_id: int,
        backend: StorageBackend,
        storage: dict[str, Any],
    ) -> None:
        self._files = files
        self.experiment_id = experiment_id
        self.trial_id = trial_id
        self._backend = backend
        self._storage = storage
        self._writer: ObjectWriter | None = None
        self._path = ""
        self._size = 0
        self._hasher = hashlib.sha256()
        self.stored = 0

    def add_chunk(self, chunk: pb.FileChunk) -> None:
        if self._writer is None:
            self._path = validate_relpath(chunk.path)
            self._writer = self._backend.open_write(data_key(self.experiment_id, self.trial_id, self._path))
            self._size = 0
            self._hasher = hashlib.sha256()
        elif chunk.path != self._path:
            raise InvalidArgument(
                f"chunk for file {chunk.path!r} arrived before the last chunk of {self._path!r}"
            )
        if chunk.offset != self._size:
            raise InvalidArgument(
                f"chunk of file {self._path!r} has offset {chunk.offset}, expected {self._size}"
            )
        self._writer.write(chunk.data)
        self._hasher.update(chunk.data)
        self._size += len(chunk.data)
        if not chunk.last:
            return
        actual = self._hasher.hexdigest()
        if chunk.sha256.lower() != actual:
            raise InvalidArgument(
                f"sha256 mismatch for TensorBoard file {self._path!r}: the client sent {chunk.sha256!r}, "
                f"the received bytes hash to {actual}"
            )
        self._writer.commit()
        self._writer = None
        self._files._record(self.experiment_id, self.trial_id, self._storage, self._path, self._size, actual)
        self.stored += 1

    def finish(self) -> int:
        if self._writer is not None:
            self.abort()
            raise InvalidArgument(f"upload ended before the last chunk of TensorBoard file {self._path!r}")
        return self.stored

    def abort(self) -> None:
        """Drops the file half sent; the files finished before it stay (each one is whole)."""
        if self._writer is not None:
            self._writer.abort()
            self._writer = None
