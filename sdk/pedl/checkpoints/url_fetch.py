"""Checkpoint files fetched in parallel ranges: straight from storage on presigned GET URLs, or
through the store on ranged DownloadCheckpoint calls (any reader of a file's byte ranges).

Like boto3's download_file: parallel ranged GETs of one part each, written in place. Unlike it, each
file is also hashed (sha256, in order, as its parts arrive) for the caller to check against the
record. The hash stays off the critical path: each part is written by the thread that fetched it,
straight from the bytes received (no copy into a buffer of ours), and twice as many parts as there
are connections may be fetched ahead of the hash, so the transfers go on while it catches up.
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


class ShortObject(CheckpointError):
    """Storage holds fewer bytes than the record says: the file is corrupt, retrying cannot help."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message, code=grpc.StatusCode.DATA_LOSS)
        self.path = path


@dataclass(frozen=True)
class Target:
    path: str  # relative, as in the record
    url: str  # "" where a RangeReader other than the URL's GETs the bytes
    file: Path  # where to write it
    size: int  # the record's


# Bytes [start, start + length) of a target's file, in pieces, in order.
RangeReader = Callable[[Target, int, int], Iterator[bytes]]


@dataclass(frozen=True)
class Fetched:
    path: str
    size: int
    sha256: str


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
        jobs = deque((t, start) for t in targets for start in range(0, max(t.size, 1), self.part_size))
        opened: dict[str, _OpenFile] = {}
        window: deque[tuple[_OpenFile, Future[list[bytes]]]] = deque()
        try:
            while jobs or window:
                while jobs and len(window) < AHEAD * self.concurrency:
                    target, start = jobs.popleft()
                    f = opened.get(target.path)
                    if f is None:
                        f = opened[target.path] = _OpenFile(target, _create(target))
                    length = min(self.part_size, target.size - start)
                    window.append((f, self._pool.submit(self._get_part, f, start, length, reader)))
                f, future = window.popleft()
                for piece in future.result():
                    f.hasher.update(piece)  # releases the GIL: the parts in flight keep arriving
                    f.size += len(piece)
                if f.size == f.target.size:
                    os.close(f.fd)
                    del opened[f.target.path]
                    yield Fetched(f.target.path, f.size, f.hasher.hexdigest())
        finally:
            for _, future in window:
                future.cancel()
            wait([future for _, future in window])  # running parts still write into the open files
            for f in opened.values():
                os.close(f.fd)

    def _get_part(self, f: _OpenFile, start: int, length: int, read: RangeReader) -> list[bytes]:
        """One range of one file, onto disk as its pieces arrive, and returned."""
        if not length:  # an empty file: nothing to get
            return []
        pieces: list[bytes] = []
        at, end = start, start + length
        for piece in read(f.target, start, length):
            if at + len(piece) > end:
                raise CheckpointError(
                    f"{len(piece)} bytes at {at} of {f.target.path!r} overrun bytes {start}-{end - 1}"
                )
            view = memoryview(piece)
            written = 0
            try:
                while written < len(piece):
                    written += os.pwrite(f.fd, view[written:], at + written)
            except OSError as e:
                raise CheckpointError(f"writing {f.target.file} failed: {e}") from e
            at += len(piece)
            pieces.append(piece)
        if at != end:
            raise ShortObject(
                f.target.path, f"storage answered {at - start} bytes for bytes {start}-{end - 1}"
            )
        return pieces

    def _read_range(self, target: Target, start: int, length: int) -> Iterator[bytes]:
        """A ranged GET of the target's URL, retried whole on any failure (presigned_http)."""
        what = f"fetching {http.where(target.url)}"
        end = start + length - 1
        response = http.request(
            self._http, "GET", target.url, what, headers={"Range": f"bytes={start}-{end}"}
        )
        if response.status == 416:
            raise ShortObject(target.path, f"storage holds fewer than {end + 1} bytes")
        if response.status != 206 and not (response.status == 200 and start == 0):
            raise http.refused(response, what)
        data: bytes = response.data
        if len(data) < length:
            raise ShortObject(target.path, f"storage answered {len(data)} bytes for bytes {start}-{end}")
        if len(data) > length:
            raise http.TransferError(f"{what}: {len(data)} bytes answered for bytes {start}-{end}")
        yield data


def _create(target: Target) -> int:
    try:
        return os.open(target.file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError as e:
        raise CheckpointError(f"creating {target.file} failed: {e}") from e
