"""Presigned URLs, so that clients move checkpoint bytes straight to and from S3.

Signing is local (no request), SigV4 (see S3Settings.make_client). The store still decides the
keys, creates and completes multipart uploads, and records the checkpoint: a URL lets its holder
do one thing to one object until it expires.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from pedl_checkpoint_store import s3_retry
from pedl_checkpoint_store.s3_errors import translated
from pedl_checkpoint_store.s3_transfer import MAX_PARTS
from pedl_checkpoint_store.storage import PresignedPut

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client  # boto3-stubs: the client's methods, typed

_MiB = 1024 * 1024
T = TypeVar("T")


@dataclass(frozen=True)
class S3Object:
    client: S3Client
    bucket: str
    key: str
    where: str  # the backend's description, for errors
    outage_seconds: float

    def call(self, action: str, fn: Callable[[], T]) -> T:
        """Tried again while S3 is briefly unreachable (s3_retry)."""
        return s3_retry.call(f"{action} {self.key}", self.where, fn, self.outage_seconds)

    def presign(self, operation: str, expires_in_seconds: int, **params: object) -> str:
        url: str = self.client.generate_presigned_url(
            operation, Params={"Bucket": self.bucket, "Key": self.key, **params}, ExpiresIn=expires_in_seconds
        )
        return url


def presign_get(obj: S3Object, expires_in_seconds: int) -> str:
    with translated(f"presigning a download of {obj.key}", obj.where):
        return obj.presign("get_object", expires_in_seconds)


def part_size_for(size: int, part_size: int) -> int:
    """`part_size`, or larger (whole MiB) where the object would need more than MAX_PARTS parts."""
    needed = -(-size // MAX_PARTS)
    return max(part_size, -(-needed // _MiB) * _MiB)


def presign_put(obj: S3Object, size: int, part_size: int, expires_in_seconds: int) -> PresignedPut:
    """One PutObject URL for an object of at most one part, else a multipart upload (created now,
    so it must later be completed or aborted) and an UploadPart URL per part."""
    if size <= part_size:
        with translated(f"presigning an upload of {obj.key}", obj.where):
            return PresignedPut(part_size=part_size, urls=[obj.presign("put_object", expires_in_seconds)])
    part_size = part_size_for(size, part_size)
    created = obj.call(
        "starting the upload of", lambda: obj.client.create_multipart_upload(Bucket=obj.bucket, Key=obj.key)
    )
    upload_id: str = created["UploadId"]
    with translated(f"presigning the upload of {obj.key}", obj.where):
        urls = [
            obj.presign("upload_part", expires_in_seconds, UploadId=upload_id, PartNumber=number)
            for number in range(1, -(-size // part_size) + 1)
        ]
    return PresignedPut(part_size=part_size, urls=urls, upload_id=upload_id)


def complete_put(obj: S3Object, put: PresignedPut, etags: list[str], size: int) -> None:
    """Completes the multipart upload, if any, and checks that storage holds `size` bytes: the store
    never sees the bytes, so their size is what it can check (their sha256 is the client's)."""
    if len(etags) != len(put.urls):
        raise ValueError(f"{len(etags)} part(s) reported for {len(put.urls)} URL(s)")
    if put.upload_id is not None:
        parts: list[Any] = [{"PartNumber": n, "ETag": etag} for n, etag in enumerate(etags, start=1)]
        upload_id = put.upload_id
        obj.call(
            "completing the upload of",
            lambda: obj.client.complete_multipart_upload(
                Bucket=obj.bucket, Key=obj.key, UploadId=upload_id, MultipartUpload={"Parts": parts}
            ),
        )
    head = obj.call("checking the upload of", lambda: obj.client.head_object(Bucket=obj.bucket, Key=obj.key))
    stored: int = head["ContentLength"]
    if stored != size:
        raise ValueError(f"storage holds {stored} bytes, {size} were planned")
