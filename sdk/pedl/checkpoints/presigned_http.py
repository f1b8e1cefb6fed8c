"""HTTP on the store's presigned URLs, shared by direct downloads and uploads: one connection pool,
and urllib3's own `Retry` for connection errors, timeouts, throttling and 5xx answers, with
exponential backoff and jitter (as botocore's `standard` mode, which the store uses for its own S3
calls).

Upload answers are read inside the request (preloaded), so urllib3 retries a body cut short like any
other read error. Downloads stream (`get_range`): each piece is hashed and written while it is still
in the CPU's cache, as boto3 writes 256 KiB pieces. A whole 8 MiB part read first, then written, then
hashed, went through memory three times; on 2 shared cores that cost pedl twice boto3's CPU (0.5-0.8 s
against 0.3 s per 256 MiB, most of it in pwrite's copy). A body cut short is asked for again from
where it stopped, as the store's own S3 reads do."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import urllib3

from pedl.checkpoints.errors import CheckpointError

PART_SIZE = 8 * 1024 * 1024  # the store's S3 part size, and boto3's multipart_chunksize
MAX_CONCURRENCY = 8  # parts in flight, as the store's S3 transfers
MAX_ATTEMPTS = 8
# A download's bytes in pieces of this size, as boto3 reads them: at 1 GiB, 1 MiB pieces cost the
# client 3.0-4.3 s of CPU (the page cache's copies of pieces no longer in the CPU's cache, and
# writers spinning on the file's lock), 256 KiB pieces 1.3-2.0 s against boto3's 1.4-1.6 s.
PIECE_SIZE = 256 * 1024
BACKOFF_BASE_SECONDS = 0.25  # attempt n waits about 0.25 * 2**(n-1) s: ~16-32 s in all over 8 attempts
BACKOFF_MAX_SECONDS = 20.0
CONNECT_TIMEOUT_SECONDS = 10.0
READ_TIMEOUT_SECONDS = 60.0
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_S3_ERROR = re.compile(rb"<Code>([^<]*)</Code>(?:.*?<Message>([^<]*)</Message>)?", re.DOTALL)


class TransferError(CheckpointError):
    """Storage could not be reached, or refused a URL, even after retries: the store may still be
    able to move the bytes itself."""


def retries(max_attempts: int = MAX_ATTEMPTS) -> urllib3.Retry:
    """Every method is retried (a part is re-sent from its buffer); the last answer of a retried
    status is returned, for `refused` to explain."""
    return urllib3.Retry(
        total=max_attempts - 1,
        redirect=0,
        allowed_methods=None,
        status_forcelist=RETRY_STATUSES,
        backoff_factor=BACKOFF_BASE_SECONDS,
        backoff_max=BACKOFF_MAX_SECONDS,
        backoff_jitter=BACKOFF_BASE_SECONDS,
        raise_on_status=False,
    )


def pool_manager(concurrency: int = MAX_CONCURRENCY, max_attempts: int = MAX_ATTEMPTS) -> urllib3.PoolManager:
    return urllib3.PoolManager(
        maxsize=concurrency,
        retries=retries(max_attempts),
        timeout=urllib3.Timeout(connect=CONNECT_TIMEOUT_SECONDS, read=READ_TIMEOUT_SECONDS),
        ca_certs=os.environ.get("AWS_CA_BUNDLE") or None,  # as boto3 would use for the same endpoint
    )


def request(
    http: urllib3.PoolManager, method: str, url: str, what: str, **kw: Any
) -> urllib3.BaseHTTPResponse:
    """One request with the pool's retries, its body read; TransferError when they are spent
    without an answer."""
    kw.setdefault("preload_content", True)
    try:
        return http.request(method, url, **kw)
    except urllib3.exceptions.MaxRetryError as e:
        attempts = http.connection_pool_kw["retries"].total + 1
        raise TransferError(f"{what} failed after {attempts} attempts: {e.reason}") from None
    except (urllib3.exceptions.HTTPError, OSError) as e:
        raise TransferError(f"{what} failed: {type(e).__name__}: {e}") from None


class ShortBody(CheckpointError):
    """Storage answered a complete body with fewer bytes than asked for: the object is shorter."""

    def __init__(self, got: int) -> None:
        super().__init__(f"storage answered {got} bytes")
        self.got = got


def get_range(
    http: urllib3.PoolManager, url: str, start: int, end: int, what: str, piece_size: int = PIECE_SIZE
) -> Iterator[bytes]:
    """Bytes [start, end) of the object at `url` in pieces as they arrive. A body cut short is asked
    for again from where it stopped, until a pool's worth of attempts in a row read nothing more.
    Raises TransferError (refused, unreachable, more bytes than asked) or ShortBody (storage holds
    fewer bytes)."""
    attempts = http.connection_pool_kw["retries"].total + 1
    at, stalls = start, 0
    while at < end:
        response = request(
            http, "GET", url, what, headers={"Range": f"bytes={at}-{end - 1}"}, preload_content=False
        )
        before, whole = at, False
        try:
            if response.status == 416:  # the object ends before `at`
                raise ShortBody(at - start)
            if response.status != 206 and not (response.status == 200 and at == 0):
                raise refused(response, what)
            for piece in response.stream(min(piece_size, end - at)):
                if at + len(piece) > end:
                    raise TransferError(f"{what}: more bytes answered than bytes {start}-{end - 1}")
                at += len(piece)
                yield piece
            whole = True
        except (urllib3.exceptions.HTTPError, OSError) as e:  # the connection failed mid-body
            stalls = 0 if at > before else stalls + 1
            if stalls >= attempts:
                raise TransferError(f"{what} failed at byte {at} after {attempts} attempts: {e}") from None
        finally:
            if not whole:
                response.close()  # the rest of its body unread: the pool opens a new connection
            response.release_conn()
        if whole and at < end:
            raise ShortBody(at - start)


def refused(response: urllib3.BaseHTTPResponse, what: str) -> TransferError:
    """The error for an unexpected answer; a retried status is the last of its attempts."""
    message = f"HTTP {response.status} {s3_error(response.data)}"
    attempts = len(response.retries.history) + 1 if response.retries is not None else 1
    if response.status in RETRY_STATUSES:
        return TransferError(f"{what} failed after {attempts} attempts: {message}")
    return TransferError(f"{what} failed: {message}")


def where(url: str) -> str:
    """The URL without its query: the signature in it is a credential, never logged or shown."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


def s3_error(body: bytes) -> str:
    """'Code: Message' from an S3 error document, else the start of the body."""
    found = _S3_ERROR.search(body[:4096])
    if found is None:
        return body[:200].decode(errors="replace").strip()
    code, message = (g.decode(errors="replace") if g else "" for g in found.groups())
    return f"{code}: {message}" if message else code
