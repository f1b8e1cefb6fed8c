"""botocore's exceptions, turned into errors the store already handles, with messages a user can act on.

A missing key becomes FileNotFoundError (the StorageBackend contract); every other failure becomes
S3StorageError, an OSError, so the servicer reports it as a storage failure.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
    ResponseStreamingError,
)

_MISSING_KEY = {"NoSuchKey", "404", "NotFound"}
BAD_CREDENTIALS = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403", "Forbidden"}
_UNREACHABLE = (
    EndpointConnectionError,
    ConnectionClosedError,
    ConnectTimeoutError,
    ReadTimeoutError,
    ResponseStreamingError,  # the connection broke while a body was read
)
# Throttling and time-outs S3 reports with a 4xx status.
_TRANSIENT_CODES = {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "RequestTimeout"}


class S3StorageError(OSError):
    """An S3 request failed after botocore's retries. `transient`: S3 was unreachable, throttling or
    failing (5xx), so the same request may well succeed a little later."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


def error_code(e: ClientError) -> str:
    return str(e.response.get("Error", {}).get("Code", ""))


def explain(e: Exception, action: str, where: str) -> OSError:
    """`action` says what was being done (e.g. "reading x"); `where` is the backend's description."""
    if isinstance(e, ClientError):
        code = error_code(e)
        if code in _MISSING_KEY:
            return FileNotFoundError(f"{action}: no such object in {where}")
        if code == "NoSuchBucket":
            return S3StorageError(f"{action}: the bucket of {where} does not exist")
        if code in BAD_CREDENTIALS:
            return S3StorageError(
                f"{action}: access to {where} denied ({code}); check checkpoint_storage.access_key and "
                "secret_key, or the credentials boto3 finds (env AWS_ACCESS_KEY_ID, profile, instance role)"
            )
        message = e.response.get("Error", {}).get("Message", "")
        status = int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        return S3StorageError(
            f"{action} in {where} failed: {code} {message}".rstrip(),
            transient=status >= 500 or status == 429 or code in _TRANSIENT_CODES,
        )
    if isinstance(e, NoCredentialsError):
        return S3StorageError(
            f"{action}: no S3 credentials for {where}; set checkpoint_storage.access_key and secret_key, "
            "or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, a profile or an instance role"
        )
    if isinstance(e, _UNREACHABLE):
        message = f"{action}: S3 endpoint of {where} unreachable after retries: {e}"
        return S3StorageError(message, transient=True)
    return S3StorageError(f"{action} in {where} failed: {e}")


@contextmanager
def translated(action: str, where: str) -> Iterator[None]:
    try:
        yield
    except (ClientError, BotoCoreError) as e:
        raise explain(e, action, where) from e
