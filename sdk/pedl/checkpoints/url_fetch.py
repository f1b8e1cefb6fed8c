"""Checkpoint files fetched in parallel ranges: straight from storage on presigned GET URLs, or
through the store on ranged DownloadCheckpoint calls (any reader of a file's byte ranges).

Like boto3's download_file: parallel ranged GETs of one part each, written in place as their pieces
arrive. Unlike it, each file is also checked against the record. Where the record has the sha256 of
each part (direct uploads record them), the thread that fetched a part hashes each piece as it
writes it, while the piece is still in the CPU's cache, and checks the part, in parallel with the
others. Else the file is hashed whole, in order, as its parts arrive, for the caller to check: twice
as many parts as there are connections may be fetched ahead of that hash. On a busy machine that one
hash gets one thread's share of a core and sets the pace (at load 20 on 2 cores: about 150 MiB/s),
hence the parts' hashes.
"""

from __future__ import annotations

import hashlib
import os
from collections import deque
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from pedl.checkpoints import presigned_http as http
from pedl.checkpoints.errors import CheckpointError

# Parts fetched ahead of the hash, per connection.
AHEAD = 2
# The largest part checked alone (each is held whole while it is hashed); larger: the file is hashed whole.
MAX_CHECKED_PART = 64 * 1024 * 1024


class ShortObject(CheckpointError):
    """Storage holds fewer bytes than the record says, or other bytes than the part's sha256 says:
    the file is corrupt, retrying cannot help."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message, code=grpc.StatusCode.DATA_LOSS)
        self.path = path


@dataclass(frozen=True)
class Target:
    path: str  # relative, as in the record
    url: str  # "" where a RangeReader other than the URL's GETs the bytes
    file: Path  # where to write it
    size: int  # the record's
    part_size: int = 0  # the record's parts, each checked alone against part_sha256 where given
    part_sha256: tuple[str, ...] = ()

    @property
    def checked_by_part(self) -> bool:
        """The record's part hashes cover the file, in parts small enough to hold (else the file
        is hashed whole)."""
        if not 0 < self.part_size <= MAX_CHECKED_PART:
            return False
        return len(self.part_sha256) == max(1, -(-self.size // self.part_size))


# Bytes [start, start + length) of a target's file, in pieces, in order (views of received buffers
# where the reader can give them).
RangeReader = Callable[[Target, int, int], Iterator[bytes | memoryview]]


@dataclass(frozen=True)
class Fetched:
    path: str
    size: int
    sha256: str | None  # None: each part was checked against the record's part hashes


@dataclass
class _OpenFile:
    target: Target
    fd: int
    hasher: Any = field(default_factory=hashlib.sha256)
    size: int = 0


class UrlFetcher:
    """Holds a connection pool and worker threads across downloads; `close()` when done."""

    def __init__(
        self,
        part_size: int = http.PART_SIZE,
        concurrency: int = http.MAX_CONCURRENCY,
        max_attempts: int = http.MAX_ATTEMPTS,
    ) -> None:
        self.part_size = part_size
        self.concurrency = concurrency
        self.max_attempts = max_attempts
        self._http = http.pool_manager(concurrency, max_attempts)
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="pedl-checkpoint-get")

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._http.clear()

    def fetch(self, targets: list[Target], read: RangeReader | None = None) -> Generator[Fetched, None, None]:
        """Writes each target's file and yields it, with the size and sha256 of what was written, in
        the order given. `read`: how a part's bytes are got (default: a ranged GET of the target's
        URL). Raises what `read` raises (TransferError...) or ShortObject; files already yielded stay
        written."""
        reader = read or self._read_range
        jobs = deque((t, start) for t in targets for start in range(0, max(t.size, 1), self._part_size(t)))
        opened: dict[str, _OpenFile] = {}
        window: deque[tuple[_OpenFile, Future[tuple[list[bytes | memoryview], int]]]] = deque()
        try:
            while jobs or window:
                while jobs and len(window) < AHEAD * self.concurrency:
                    target, start = jobs.popleft()
                    f = opened.get(target.path)
                    if f is None:
                        f = opened[target.path] = _OpenFile(target, _create(target))
                    length = min(self._part_size(target), target.size - start)
                    window.append((f, self._pool.submit(self._get_part, f, start, length, reader)))
                f, future = window.popleft()
                pieces, length = future.result()
                for piece in pieces:
                    f.hasher.update(piece)  # releases the GIL: the parts in flight keep arriving
                f.size += length
                if f.size == f.target.size:
                    os.close(f.fd)
                    del opened[f.target.path]
                    digest = None if f.target.checked_by_part else f.hasher.hexdigest()
                    yield Fetched(f.target.path, f.size, digest)
        finally:
            for _, future in window:
                future.cancel()
            wait([future for _, future in window])  # running parts still write into the open files
            for f in opened.values():
                os.close(f.fd)

    def _part_size(self, target: Target) -> int:
        """The record's parts where it hashed them, so that each is checked alone; else ours."""
        return target.part_size if target.checked_by_part else self.part_size

    def _get_part(
        self, f: _OpenFile, start: int, length: int, read: RangeReader
    ) -> tuple[list[bytes | memoryview], int]:
        """One range of one file, onto disk as its pieces arrive; returned for the whole file's hash
        (none where the part is checked here against its own), with its length."""
        if not length:  # an empty file: nothing to get
            return [], 0
        by_part = f.target.checked_by_part
        hasher = hashlib.sha256()
        kept: list[bytes | memoryview] = []
        at, end = start, start + length
        for piece in read(f.target, start, length):
            if at + len(piece) > end:
                raise CheckpointError(
                    f"{len(piece)} bytes at {at} of {f.target.path!r} overrun bytes {start}-{end - 1}"
                )
            if by_part:
                hasher.update(piece)  # while the piece is in the cache: one pass over memory fewer
            else:
                kept.append(piece)
            view = memoryview(piece)
            written = 0
            try:
                while written < len(piece):
                    written += os.pwrite(f.fd, view[written:], at + written)
            except OSError as e:
                raise CheckpointError(f"writing {f.target.file} failed: {e}") from e
            at += len(piece)
        if at != end:
            raise ShortObject(
                f.target.path, f"storage answered {at - start} bytes for bytes {start}-{end - 1}"
            )
        if not by_part:
            return kept, length
        expected, got = f.target.part_sha256[start // f.target.part_size], hasher.hexdigest()
        if got != expected:
            raise ShortObject(f.target.path, f"bytes {start}-{end - 1} have sha256 {got}, not {expected}")
        return [], length

    def _read_range(self, target: Target, start: int, length: int) -> Iterator[bytes]:
        """A ranged GET of the target's URL, streamed; a body cut short reads on (presigned_http)."""
        what = f"fetching {http.where(target.url)}"
        try:
            yield from http.get_range(self._http, target.url, start, start + length, what)
        except http.ShortBody as e:
            raise ShortObject(
                target.path, f"storage answered {e.got} bytes for bytes {start}-{start + length - 1}"
            ) from None


def _create(target: Target) -> int:
    try:
        return os.open(target.file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError as e:
        raise CheckpointError(f"creating {target.file} failed: {e}") from e
