"""Making an S3 call again after botocore gave up on it, while S3 is briefly gone.

botocore's `standard` mode retries each request with backoff, but out of a retry quota shared by all
of a client's requests. A multipart transfer keeps many requests in flight; when S3 goes away they
spend the quota within seconds, and from then on botocore retries nothing. So a call that failed
transiently (S3 unreachable, throttling, 5xx) is made again here, with backoff, until
`outage_seconds` have passed since its first failure. Other failures are raised at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from pedl import _log
from pedl._backoff import backoff_seconds
from pedl_checkpoint_store.s3_errors import S3StorageError, translated

log = _log.get_logger(component="checkpoint_store.s3")

BACKOFF_BASE_SECONDS = 0.5
BACKOFF_MAX_SECONDS = 10.0

T = TypeVar("T")


def call(
    action: str, where: str, fn: Callable[[], T], outage_seconds: float, stop: threading.Event | None = None
) -> T:
    """`fn()`, its botocore errors translated (see s3_errors); `action` says what it does. Setting
    `stop` (the transfer was aborted) ends the waiting at once, with the last error."""
    first_failure: float | None = None
    attempt = 0
    while True:
        try:
            with translated(action, where):
                return fn()
        except S3StorageError as e:
            now = time.monotonic()
            first_failure = first_failure or now
            if not e.transient or now - first_failure >= outage_seconds:
                raise
            attempt += 1
            delay = backoff_seconds(attempt, BACKOFF_BASE_SECONDS, BACKOFF_MAX_SECONDS)
            log.warning("S3 unavailable, trying again", action=action, retry_in=round(delay, 2), error=str(e))
            if stop is None:
                time.sleep(delay)
            elif stop.wait(delay):
                raise
