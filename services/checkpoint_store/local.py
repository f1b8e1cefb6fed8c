"""StorageBackend on a local (or shared, mounted) filesystem directory."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Collection, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO

from pedl_checkpoint_store.errors import InvalidArgument
from pedl_checkpoint_store.storage import ObjectWriter, ShortRead, StorageBackend


class _FileWriter(ObjectWriter):
    def __init__(self, path: Path) -> None:
        self._path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: BinaryIO | None = open(path, "wb")  # noqa: SIM115 - closed in commit/abort

    def write(self, data: bytes) -> None:
        assert self._file is not None, "write after commit/abort"
        self._file.write(data)

    def commit(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def abort(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._path.unlink(missing_ok=True)


class LocalFilesystemBackend(StorageBackend):
    def __init__(self, root: Path) -> None:
        self.root = Path(root).expanduser().resolve()
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        """The file for `key`, refused unless it lies inside the root (symlinks followed)."""
        if not key:
            return self.root
        path = self.root / key
        resolved = path.resolve()
        if resolved != self.root and not resolved.is_relative_to(self.root):
            raise InvalidArgument(f"storage key {key!r} leads outside the storage root {self.root}")
        return path

    def open_write(self, key: str) -> ObjectWriter:
        return _FileWriter(self._path(key))

    def put_bytes(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get_bytes(self, key: str) -> bytes:
        return self._path(key).read_bytes()

    def read_chunks(self, key: str, chunk_size: int) -> Iterator[bytes]:
        # Opened eagerly so that a missing file raises here, not on the first next().
        f = open(self._path(key), "rb")  # noqa: SIM115 - closed by the generator

        def chunks() -> Iterator[bytes]:
            with f:
                while data := f.read(chunk_size):
                    yield data

        return chunks()

    def read_range(self, key: str, offset: int, length: int, chunk_size: int) -> Iterator[bytes]:
        f = open(self._path(key), "rb")  # noqa: SIM115 - closed by the generator
        f.seek(offset)

        def chunks() -> Iterator[bytes]:
            with f:
                left = length
                while left:
                    data = f.read(min(chunk_size, left))
                    if not data:
                        raise ShortRead(f"{key} ends {left} bytes before the range does")
                    left -= len(data)
                    yield data
                if not length:
                    yield b""

        return chunks()

    def exists(self, key: str) -> bool:
        return self._path(key).exists()

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def delete_prefix(self, prefix: str) -> None:
        if not prefix:
            raise ValueError("refusing to delete the whole storage root")
        shutil.rmtree(self._path(prefix), ignore_errors=True)

    def list_children(self, prefix: str) -> list[str]:
        try:
            return sorted(entry.name for entry in os.scandir(self._path(prefix)))
        except FileNotFoundError:
            return []

    def modified_under(self, prefix: str) -> dict[str, datetime]:
        if not prefix:
            raise ValueError("a prefix to list is needed: not the whole storage root")
        top = self._path(prefix)
        out: dict[str, datetime] = {}
        for parent, _, files in os.walk(top, onerror=lambda e: None):  # a missing prefix: nothing
            for name in files:
                path = Path(parent, name)
                try:
                    modified = path.lstat().st_mtime
                except FileNotFoundError:
                    continue
                out[path.relative_to(top).as_posix()] = datetime.fromtimestamp(modified, timezone.utc)
        return out

    def newest_by_child(self, skip: Collection[str] = ()) -> dict[str, datetime]:
        out: dict[str, datetime] = {}
        for entry in os.scandir(self.root):
            if entry.name in skip:
                continue
            newest = _newest_mtime(Path(entry.path))
            if newest is not None:
                out[entry.name] = datetime.fromtimestamp(newest, timezone.utc)
        return out

    def describe(self) -> str:
        return str(self.root)


def _newest_mtime(path: Path) -> float | None:
    """The newest mtime of `path` and everything below it (symlinks not followed); None if it vanished."""
    try:
        newest = path.lstat().st_mtime
    except FileNotFoundError:
        return None
    if not path.is_dir() or path.is_symlink():
        return newest
    for parent, dirs, files in os.walk(path, onerror=lambda e: None):
        for name in (*dirs, *files):
            try:
                newest = max(newest, os.lstat(os.path.join(parent, name)).st_mtime)
            except FileNotFoundError:
                continue
    return newest
