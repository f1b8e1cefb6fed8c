"""Moving one object's bytes to and from S3 with several parts in flight at once.

Writes: bytes are buffered into parts; an object smaller than one part is a single PutObject, a
larger one a multipart upload whose parts are sent by a thread pool while the caller keeps writing
(at most `max_concurrency` parts in flight, so memory stays bounded). Reads: ranged GETs of one part
each, fetched ahead by the same pool and handed out in order.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from pedl import _log
from pedl_checkpoint_store import s3_retry
from pedl_checkpoint_store.s3_errors import error_code, explain
from pedl_checkpoint_store.storage import ObjectWriter, ShortRead

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client  # boto3-stubs: the client's methods, typed

log = _log.get_logger(component="checkpoint_store.s3")

T = TypeVar("T")

MAX_PARTS = 10_000  # S3's limit per multipart upload
_MAX_STALLS = 3  # bodies cut short in a row with no byte read before a streamed range gives up
_PART_GROWTH_EVERY = 1_000  # part size grows by one base size every this many parts: ~440 GB at 8 MiB


class MultipartWriter(ObjectWriter):
    def __init__(
        self,
        client: S3Client,
        pool: ThreadPoolExecutor,
        *,
        bucket: str,
        key: str,
        where: str,
        part_size: int,
        max_concurrency: int,
        outage_seconds: float,
    ) -> None:
        self._client = client
        self._outage_seconds = outage_seconds
        self._stop = threading.Event()  # set by abort: parts waiting out an outage give up
        self._pool = pool
        self._bucket = bucket
        self._key = key
        self._where = where
        self._part_size = part_size
        self._slots = threading.Semaphore(max_concurrency)
        self._pieces: list[bytes] = []
        self._buffered = 0
        self._upload_id: str | None = None
        self._parts: list[Future[dict[str, Any]]] = []
        self._state = "open"  # -> "committed" | "aborted"

    def write(self, data: bytes) -> None:
        if self._state != "open":
            raise ValueError(f"write to an S3 object that is already {self._state}")
        self._raise_failed_part()
        self._pieces.append(data)
        self._buffered += len(data)
        if self._buffered >= self._threshold():
            self._send_part()

    def commit(self) -> None:
        if self._state != "open":
            return
        body = self._take_buffer()
        if self._upload_id is None:
            self._call(
                f"writing {self._key}",
                lambda: self._client.put_object(Bucket=self._bucket, Key=self._key, Body=body),
            )
        else:
            if body:
                self._submit(body)
            parts: list[Any] = [f.result() for f in self._wait_parts()]
            upload_id = self._upload_id
            self._call(
                f"completing the upload of {self._key}",
                lambda: self._client.complete_multipart_upload(
                    Bucket=self._bucket,
                    Key=self._key,
                    UploadId=upload_id,
                    MultipartUpload={"Parts": parts},
                ),
            )
        self._state = "committed"

    def abort(self) -> None:
        """Best effort: what it cannot remove, the store's start-up pass removes by prefix later."""
        if self._state == "aborted":
            return
        committed = self._state == "committed"
        self._state = "aborted"
        self._stop.set()
        self._pieces.clear()
        for f in self._parts:
            f.cancel()
        self._wait_parts(raise_errors=False)
        try:
            if self._upload_id is not None and not committed:
                self._client.abort_multipart_upload(
                    Bucket=self._bucket, Key=self._key, UploadId=self._upload_id
                )
            if committed:
                self._client.delete_object(Bucket=self._bucket, Key=self._key)
        except (ClientError, BotoCoreError) as e:
            log.warning(
                "could not abort S3 upload", key=self._key, error=str(explain(e, "abort", self._where))
            )

    # -- parts ----------------------------------------------------------------------------

    def _threshold(self) -> int:
        return self._part_size * (1 + len(self._parts) // _PART_GROWTH_EVERY)

    def _take_buffer(self) -> bytes:
        body = self._pieces[0] if len(self._pieces) == 1 else b"".join(self._pieces)
        self._pieces = []
        self._buffered = 0
        return body

    def _send_part(self) -> None:
        if self._upload_id is None:
            response = self._call(
                f"starting the upload of {self._key}",
                lambda: self._client.create_multipart_upload(Bucket=self._bucket, Key=self._key),
            )
            self._upload_id = response["UploadId"]
        self._submit(self._take_buffer())

    def _submit(self, body: bytes) -> None:
        number = len(self._parts) + 1
        if number > MAX_PARTS:
            raise ValueError(f"{self._key} needs more than {MAX_PARTS} parts")
        self._slots.acquire()  # backpressure: the caller waits while max_concurrency parts are in flight
        try:
            future = self._pool.submit(self._upload_part, number, body)
        except BaseException:
            self._slots.release()
            raise
        future.add_done_callback(lambda _: self._slots.release())
        self._parts.append(future)

    def _upload_part(self, number: int, body: bytes) -> dict[str, Any]:
        upload_id = self._upload_id
        assert upload_id is not None, "a part is sent only once the upload has started"
        response = self._call(
            f"uploading part {number} of {self._key}",
            lambda: self._client.upload_part(
                Bucket=self._bucket, Key=self._key, UploadId=upload_id, PartNumber=number, Body=body
            ),
        )
        part: dict[str, Any] = {"PartNumber": number, "ETag": response["ETag"]}
        for name in (
            "ChecksumCRC32",
            "ChecksumCRC32C",
            "ChecksumCRC64NVME",
            "ChecksumSHA1",
            "ChecksumSHA256",
        ):
            if response.get(name):
                part[name] = response[name]
        return part

    def _call(self, action: str, fn: Callable[[], T]) -> T:
        return s3_retry.call(action, self._where, fn, self._outage_seconds, self._stop)

    def _raise_failed_part(self) -> None:
        for f in self._parts:
            if f.done() and not f.cancelled() and (error := f.exception()) is not None:
                raise error

    def _wait_parts(self, raise_errors: bool = True) -> list[Future[dict[str, Any]]]:
        for f in self._parts:
            if f.cancelled():
                continue
            error = f.exception()
            if error is not None and raise_errors:
                raise error
        return self._parts


def stream_range(
    client: S3Client, *, bucket: str, key: str, where: str, start: int, end: int, piece_size: int,
    outage_seconds: float,
) -> Iterator[bytes]:  # fmt: skip
    """The object's bytes [start, end) on one GET, in pieces of at most `piece_size` as they arrive:
    the first go on (to a client) while the rest are still coming, where a part read whole first
    waits for all of it. A body cut short is asked for again from where it stopped."""
    at, stalls = start, 0
    while at < end:

        def get(first: int = at) -> Any:
            try:
                return client.get_object(Bucket=bucket, Key=key, Range=f"bytes={first}-{end - 1}")["Body"]
            except ClientError as e:
                if error_code(e) == "InvalidRange":  # the object ends before `first`
                    raise ShortRead(f"reading {key} in {where}: no bytes {first}-{end - 1}") from None
                raise

        body = s3_retry.call(f"reading {key}", where, get, outage_seconds)
        before = at
        try:
            for piece in body.iter_chunks(min(piece_size, end - at)):
                if at + len(piece) > end:
                    raise ShortRead(f"reading {key} in {where}: more bytes than range {start}-{end - 1}")
                at += len(piece)
                yield piece
        except BotoCoreError as e:  # the connection failed mid-body
            stalls = 0 if at > before else stalls + 1
            if stalls >= _MAX_STALLS:
                raise OSError(f"reading {key} in {where} failed at byte {at}: {e}") from e
            log.warning("S3 body cut short, reading on", key=key, at=at, error=str(e))
            continue
        finally:
            body.close()
        if at < end:
            raise ShortRead(f"reading {key} in {where}: got {at - start} bytes for range {start}-{end - 1}")


def read_ranges(
    client: S3Client,
    pool: ThreadPoolExecutor,
    *,
    bucket: str,
    key: str,
    where: str,
    size: int,
    part_size: int,
    max_concurrency: int,
    chunk_size: int,
    outage_seconds: float,
    first: int = 0,
) -> Iterator[bytes]:
    """The object's bytes [first, size) in order, in pieces of at most `chunk_size`; parts fetched
    ahead with ranged GETs."""
    stop = threading.Event()  # set when the reader goes away: parts waiting out an outage give up

    def fetch(start: int) -> bytes:
        end = min(start + part_size, size) - 1

        def get() -> bytes:
            try:
                response = client.get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-{end}")
            except ClientError as e:
                if error_code(e) == "InvalidRange":  # the object ends before `start`
                    raise ShortRead(f"reading {key} in {where}: no bytes {start}-{end}") from None
                raise
            body: bytes = response["Body"].read()
            return body

        data = s3_retry.call(f"reading {key}", where, get, outage_seconds, stop)
        if len(data) != end - start + 1:
            raise ShortRead(f"reading {key} in {where}: got {len(data)} bytes for range {start}-{end}")
        return data

    starts = iter(range(first, size, part_size))
    ahead: deque[Future[bytes]] = deque()
    try:
        for start in starts:
            ahead.append(pool.submit(fetch, start))
            if len(ahead) >= max_concurrency:
                break
        while ahead:
            data = ahead.popleft().result()
            next_start = next(starts, None)
            if next_start is not None:
                ahead.append(pool.submit(fetch, next_start))
            view = memoryview(data)
            for offset in range(0, len(data), chunk_size):
                yield bytes(view[offset : offset + chunk_size]) if len(data) > chunk_size else data
    finally:
        stop.set()
        for f in ahead:
            f.cancel()
