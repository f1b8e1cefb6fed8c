"""HTTP on the store's presigned URLs, shared by direct downloads and uploads: one connection pool,
and retries of connection errors, timeouts, throttling and 5xx answers with exponential backoff and
jitter (as botocore's `standard` mode, which the store uses for its own S3 calls)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import urlsplit

import urllib3

from pedl._backoff import backoff_seconds
from pedl.checkpoints.errors import CheckpointError

PART_SIZE = 8 * 1024 * 1024  # the store's S3 part size, and boto3's multipart_chunksize
MAX_CONCURRENCY = 8  # parts in flight, as the store's S3 transfers
MAX_ATTEMPTS = 8
BACKOFF_BASE_SECONDS = 0.25  # attempt n waits up to 0.25 * 2**n s: ~16-32 s in all over 8 attempts
BACKOFF_MAX_SECONDS = 20.0
CONNECT_TIMEOUT_SECONDS = 10.0
READ_TIMEOUT_SECONDS = 60.0
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_S3_ERROR = re.compile(rb"<Code>([^<]*)</Code>(?:.*?<Message>([^<]*)</Message>)?", re.DOTALL)

T = TypeVar("T")


class TransferError(CheckpointError):
    """Storage could not be reached, or refused a URL, even after retries: the store may still be
    able to move the bytes itself."""


class Retry(Exception):
    """Raised by an attempt whose failure is worth another try."""


def pool_manager(concurrency: int = MAX_CONCURRENCY) -> urllib3.PoolManager:
    return urllib3.PoolManager(
        maxsize=concurrency,
        retries=False,  # with_retries() decides, also for failures while reading a body
        timeout=urllib3.Timeout(connect=CONNECT_TIMEOUT_SECONDS, read=READ_TIMEOUT_SECONDS),
        ca_certs=os.environ.get("AWS_CA_BUNDLE") or None,  # as boto3 would use for the same endpoint
    )


def with_retries(attempt: Callable[[], T], what: str, max_attempts: int = MAX_ATTEMPTS) -> T:
    """`attempt()` until it returns; it raises Retry, a urllib3 HTTPError or an OSError to be retried,
    anything else to give up at once. Raises TransferError when no attempt is left."""
    error = ""
    for n in range(max_attempts):
        if n:
            time.sleep(backoff_seconds(n, BACKOFF_BASE_SECONDS, BACKOFF_MAX_SECONDS))
        try:
            return attempt()
        except Retry as e:
            error = str(e)
        except (urllib3.exceptions.HTTPError, OSError) as e:
            error = f"{type(e).__name__}: {e}"
    raise TransferError(f"{what} failed after {max_attempts} attempts: {error}")


def refused(response: urllib3.BaseHTTPResponse, what: str) -> Exception:
    """The error for an unexpected answer (its body read): Retry where worth another try."""
    message = f"HTTP {response.status} {s3_error(response.data)}"
    if response.status in RETRY_STATUSES:
        return Retry(message)
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
