"""The one interface every storage backend (local filesystem, S3, ...) implements.

Keys are '/'-separated and relative to the backend's root. Backends know nothing about
checkpoints: visibility and layout are decided by `pedl_checkpoint_store.store`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from datetime import datetime


class ShortRead(OSError):
    """The object ends before the range asked of it: its bytes are not what was stored."""


class ObjectWriter(ABC):
    """Streams one object in; nothing is promised about the object until `commit` returns."""

    @abstractmethod
    def write(self, data: bytes) -> None: ...

    @abstractmethod
    def commit(self) -> None: ...

    @abstractmethod
    def abort(self) -> None:
        """Discards what was written; safe to call more than once, and after a failed write."""


@dataclass(frozen=True)
class PresignedPut:
    """Where a client PUTs one object itself: part i (from 0) is bytes [i * part_size, ...) to
    urls[i]. `upload_id` names the multipart upload; None when the object is a single PUT."""

    part_size: int
    urls: list[str]
    upload_id: str | None = None


class StorageBackend(ABC):
    @abstractmethod
    def open_write(self, key: str) -> ObjectWriter: ...

    @abstractmethod
    def put_bytes(self, key: str, data: bytes) -> None:
        """Writes a small object atomically: readers see the old object, or the whole new one."""

    @abstractmethod
    def get_bytes(self, key: str) -> bytes:
        """Raises FileNotFoundError for a missing key."""

    @abstractmethod
    def read_chunks(self, key: str, chunk_size: int) -> Iterator[bytes]:
        """The object's bytes in pieces of at most `chunk_size`; FileNotFoundError if missing."""

    @abstractmethod
    def read_range(self, key: str, offset: int, length: int, chunk_size: int) -> Iterator[bytes]:
        """Bytes [offset, offset + length) of the object in pieces of at most `chunk_size` (one
        empty piece for length 0); FileNotFoundError if missing, ShortRead if it ends before the range."""

    # Whether clients may move bytes straight to and from this storage on presigned URLs (the
    # three methods below); where not, the store streams the bytes itself.
    presigns = False

    def presign_get(self, key: str, expires_in_seconds: int) -> str:
        """A URL anyone holding it may GET the object from (ranges too) for `expires_in_seconds`."""
        raise NotImplementedError

    def presign_put(self, key: str, size: int, expires_in_seconds: int) -> PresignedPut:
        """URLs to PUT a `size`-byte object in parts; may start a multipart upload, which
        `complete_put` or `delete_prefix` ends."""
        raise NotImplementedError

    def complete_put(self, key: str, put: PresignedPut, etags: list[str], size: int) -> None:
        """Makes a presigned PUT's object whole; raises ValueError if storage then holds other than
        `size` bytes."""
        raise NotImplementedError

    @abstractmethod
    def exists(self, key: str) -> bool: ...

    @abstractmethod
    def delete(self, key: str) -> None:
        """Removes one object; a missing key is not an error."""

    @abstractmethod
    def delete_prefix(self, prefix: str) -> None:
        """Removes every object under `prefix/`; a missing prefix is not an error."""

    @abstractmethod
    def list_children(self, prefix: str) -> list[str]:
        """Names one level below `prefix` ('' for the root), objects and 'directories' alike."""

    @abstractmethod
    def modified_under(self, prefix: str) -> dict[str, datetime]:
        """Each object under `prefix/`, by its key relative to `prefix/`, with its modification time
        (UTC); empty where nothing is stored under it."""

    @abstractmethod
    def newest_by_child(self, skip: Collection[str] = ()) -> dict[str, datetime]:
        """Each name one level below the root, with the newest modification time (UTC) of anything
        stored under it, unfinished multipart uploads included: how long since it was last written.
        Names in `skip` may be left out (a filesystem then need not walk their trees)."""

    @abstractmethod
    def describe(self) -> str:
        """Where the bytes live, for logs and error messages."""
