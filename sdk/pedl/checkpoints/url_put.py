"""Direct uploads: checkpoint files sent straight to storage on presigned PUT URLs, a part each.

Each file is read once, in order, into a few reused buffers; each buffer is hashed (sha256 of the
whole file, which the store records) and then PUT while the next parts are read, with up to
`concurrency` parts in flight, like boto3's upload_file. The thread sending a part also hashes it
alone: the store records those too, so a download can check its parts in parallel.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pedl.checkpoints import presigned_http as http
from pedl.checkpoints.errors import CheckpointError


@dataclass(frozen=True)
class PutTarget:
    path: str  # relative, as planned
    file: Path
    size: int  # as planned: the file must still have this size
    part_size: int
    urls: list[str]  # one per part


@dataclass(frozen=True)
class Sent:
    path: str
    sha256: str
    etags: list[str]
    part_sha256: list[str]


class UrlUploader:
    """Holds a connection pool and worker threads across uploads; `close()` when done."""

    def __init__(
        self, concurrency: int = http.MAX_CONCURRENCY, max_attempts: int = http.MAX_ATTEMPTS
    ) -> None:
        self.concurrency = concurrency
        self.max_attempts = max_attempts
        self._http = http.pool_manager(concurrency, max_attempts)
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="pedl-checkpoint-put")

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._http.clear()

    def send(self, targets: list[PutTarget]) -> list[Sent]:
        """Sends every part of every target; raises TransferError (storage unreachable or refusing)
        or CheckpointError (a file unreadable, or changed size since it was planned)."""
        largest = max((min(t.part_size, t.size) for t in targets), default=0)
        parts = sum(len(t.urls) for t in targets)
        free = [bytearray(largest) for _ in range(min(self.concurrency, parts))]
        in_flight: dict[Future[tuple[str, str]], bytearray] = {}
        sent: list[tuple[str, str, list[Future[tuple[str, str]]]]] = []
        try:
            for target in targets:
                hasher = hashlib.sha256()
                etags: list[Future[tuple[str, str]]] = []
                with _reading(target) as f:
                    for number, url in enumerate(target.urls):
                        if not free:  # whichever part finishes first frees its buffer
                            done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                            for future in done:
                                future.result()
                                free.append(in_flight.pop(future))
                        buffer = free.pop()
                        length = max(0, min(target.part_size, target.size - number * target.part_size))
                        view = memoryview(buffer)[:length]
                        _read_exactly(f, view, target)
                        hasher.update(view)  # releases the GIL: the parts in flight keep going
                        future = self._pool.submit(self._put_part, url, view)
                        in_flight[future] = buffer
                        etags.append(future)
                    if f.read(1):
                        raise _changed(target)
                sent.append((target.path, hasher.hexdigest(), etags))
            for future in in_flight:
                future.result()
        finally:
            for future in in_flight:
                future.cancel()
            wait(in_flight)  # running parts still read their buffers
        return [
            Sent(path, digest, [f.result()[0] for f in parts], [f.result()[1] for f in parts])
            for path, digest, parts in sent
        ]

    def _put_part(self, url: str, view: memoryview) -> tuple[str, str]:
        """The part's ETag and its own sha256."""
        what = f"sending to {http.where(url)}"
        return self._put(url, view, what), hashlib.sha256(view).hexdigest()

    def _put(self, url: str, view: memoryview, what: str) -> str:
        response = http.request(
            self._http, "PUT", url, what, body=view, headers={"Content-Length": str(len(view))}
        )
        if response.status != 200:
            raise http.refused(response, what)
        etag = response.headers.get("ETag")
        if not etag:
            raise http.TransferError(f"{what}: storage answered without an ETag")
        return etag


@contextmanager
def _reading(target: PutTarget) -> Iterator[io.FileIO]:
    """The file, unbuffered (parts are read straight into their buffers); OSErrors become
    CheckpointErrors naming it."""
    try:
        with open(target.file, "rb", buffering=0) as f:
            yield f
    except OSError as e:
        raise CheckpointError(f"reading {target.file} for the upload failed: {e}") from e


def _read_exactly(f: io.FileIO, view: memoryview, target: PutTarget) -> None:
    got = 0
    while got < len(view):
        n = f.readinto(view[got:])
        if not n:
            raise _changed(target)
        got += n


def _changed(target: PutTarget) -> CheckpointError:
    return CheckpointError(f"{target.file} changed size while it was uploaded (planned {target.size} bytes)")
