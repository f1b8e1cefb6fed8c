"""An experiment's `checkpoint_storage: {type: s3, ...}` block, validated, and the boto3 client it implies.

Keys absent from the block fall back to boto3's own chain (env AWS_ACCESS_KEY_ID, profile, instance
role). Retries use botocore's `standard` mode with backoff; AWS_RETRY_MODE / AWS_MAX_ATTEMPTS in the
environment override the defaults below, as they do for the AWS CLI. Beyond those, a call that
failed because S3 was unreachable or throttling is made again for OUTAGE_SECONDS (s3_retry).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config as BotoConfig

from pedl_checkpoint_store.errors import InvalidArgument

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client  # boto3-stubs: the client's methods, typed

DEFAULT_MAX_ATTEMPTS = 8
DEFAULT_RETRY_MODE = "standard"
PART_SIZE = 8 * 1024 * 1024  # boto3's own multipart_chunksize; 8 MiB measured no slower than 16 or 32
MAX_CONCURRENCY = 8  # parts in flight per object, up and down
# How long a call that failed because S3 was unreachable or throttling is tried again (s3_retry).
OUTAGE_SECONDS = 60.0
OUTAGE_SECONDS_ENV = "PEDL_CHECKPOINT_STORE_S3_OUTAGE_SECONDS"
_BUCKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{1,253}[A-Za-z0-9]")
_KEYS = ("bucket", "prefix", "endpoint_url", "access_key", "secret_key")


@dataclass(frozen=True)
class S3Settings:
    bucket: str
    prefix: str = ""
    endpoint_url: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    part_size: int = PART_SIZE
    max_concurrency: int = MAX_CONCURRENCY
    outage_seconds: float = OUTAGE_SECONDS

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> S3Settings:
        """Raises InvalidArgument naming the bad field; ignores keys S3 does not use (save_* etc.)."""
        values: dict[str, str | None] = {}
        for key in _KEYS:
            value = config.get(key)
            if value is not None and not isinstance(value, str):
                raise InvalidArgument(f"checkpoint_storage.{key} must be a string, got {value!r}")
            values[key] = value or None
        bucket = values["bucket"]
        if bucket is None:
            raise InvalidArgument("checkpoint_storage.bucket is required for type 's3'")
        if not _BUCKET.fullmatch(bucket):
            raise InvalidArgument(
                f"checkpoint_storage.bucket {bucket!r} is not a bucket name "
                "(3-255 letters, digits, '.', '-', '_')"
            )
        if (values["access_key"] is None) != (values["secret_key"] is None):
            raise InvalidArgument("checkpoint_storage.access_key and secret_key must be given together")
        prefix = (values["prefix"] or "").strip("/")
        if ".." in prefix.split("/"):
            raise InvalidArgument(f"checkpoint_storage.prefix {prefix!r} must not contain '..'")
        return cls(
            bucket=bucket,
            prefix=prefix,
            endpoint_url=values["endpoint_url"],
            access_key=values["access_key"],
            secret_key=values["secret_key"],
            outage_seconds=float(os.environ.get(OUTAGE_SECONDS_ENV) or OUTAGE_SECONDS),
        )

    def record(self) -> dict[str, Any]:
        """The config stored with each checkpoint, on the store's own storage only (keys included:
        the store needs them to read the checkpoint back; they never go to clients)."""
        out: dict[str, Any] = {"type": "s3", "bucket": self.bucket, "prefix": self.prefix}
        if self.endpoint_url:
            out["endpoint_url"] = self.endpoint_url
        if self.access_key:
            out["access_key"] = self.access_key
            out["secret_key"] = self.secret_key
        return out

    def describe(self) -> str:
        """For logs and errors; never the secret key."""
        where = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        return f"{where} at {self.endpoint_url}" if self.endpoint_url else where

    def make_client(self) -> S3Client:
        retries: Any = {  # botocore's _RetryDict: mode and max_attempts
            "mode": os.environ.get("AWS_RETRY_MODE") or DEFAULT_RETRY_MODE,
            "max_attempts": int(os.environ.get("AWS_MAX_ATTEMPTS") or DEFAULT_MAX_ATTEMPTS),
        }
        config = BotoConfig(
            # Also for presigned URLs, which botocore would otherwise sign with SigV2 (refused by newer
            # AWS regions).
            signature_version="s3v4",
            retries=retries,
            max_pool_connections=4 * self.max_concurrency,
            connect_timeout=10,
            read_timeout=60,
            tcp_keepalive=True,
        )
        session = boto3.session.Session()
        region = session.region_name or ("us-east-1" if self.endpoint_url else None)
        return session.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=region,
            config=config,
        )
