"""StorageBackend on an S3 bucket (AWS or any S3-compatible store via `endpoint_url`), under `prefix`.

S3 has no directories: `list_children` lists with a '/' delimiter. Objects only appear whole (a
PutObject or a completed multipart upload), so a killed upload leaves at most parts of an
incomplete multipart upload, which `delete_prefix` aborts along with the objects.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from pedl_checkpoint_store import s3_presign, s3_retry
from pedl_checkpoint_store.errors import InvalidArgument
from pedl_checkpoint_store.s3_errors import BAD_CREDENTIALS, error_code, explain, translated
from pedl_checkpoint_store.s3_settings import S3Settings
from pedl_checkpoint_store.s3_transfer import MultipartWriter, read_ranges, stream_range
from pedl_checkpoint_store.storage import ObjectWriter, PresignedPut, StorageBackend

T = TypeVar("T")

_DELETE_BATCH = 1000  # DeleteObjects' limit
# A streamed range's pieces (messages to the client): small enough that the first goes on soon after
# the GET's first bytes, large enough that each message's own costs stay small.
STREAM_PIECE = 1024 * 1024


class S3AccessError(InvalidArgument):
    """The bucket cannot be used with this config: missing, or the credentials are refused."""


class S3Backend(StorageBackend):
    presigns = True

    def __init__(self, settings: S3Settings) -> None:
        self.settings = settings
        self.bucket = settings.bucket
        self._client = settings.make_client()
        # Shared by all objects of this backend; each object keeps at most max_concurrency in flight.
        self._pool = ThreadPoolExecutor(
            max_workers=2 * settings.max_concurrency, thread_name_prefix=f"s3-{settings.bucket}"
        )

    def _key(self, key: str) -> str:
        """The full object key; '' is the backend's root (the prefix itself)."""
        if not self.settings.prefix or not key:
            return self.settings.prefix or key
        return f"{self.settings.prefix}/{key}"

    def open_write(self, key: str) -> ObjectWriter:
        return MultipartWriter(
            self._client,
            self._pool,
            bucket=self.bucket,
            key=self._key(key),
            where=self.describe(),
            part_size=self.settings.part_size,
            max_concurrency=self.settings.max_concurrency,
            outage_seconds=self.settings.outage_seconds,
        )

    def put_bytes(self, key: str, data: bytes) -> None:
        self._call(
            f"writing {key}",
            lambda: self._client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data),
        )

    def get_bytes(self, key: str) -> bytes:
        with translated(f"reading {key}", self.describe()):
            body: bytes = self._client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()
        return body

    def size(self, key: str) -> int:
        """Raises FileNotFoundError for a missing key."""
        with translated(f"reading {key}", self.describe()):
            size: int = self._client.head_object(Bucket=self.bucket, Key=self._key(key))["ContentLength"]
        return size

    def read_chunks(self, key: str, chunk_size: int) -> Iterator[bytes]:
        size = self.size(key)  # eagerly, so a missing object raises here
        return self._ranges(key, 0, size, chunk_size)

    def read_range(self, key: str, offset: int, length: int, chunk_size: int) -> Iterator[bytes]:
        """A range of up to one part (what a client's ranged download asks) streams on one GET in
        pieces of at most STREAM_PIECE as they arrive; a longer one in parallel parts."""
        if not length:
            return iter([b""])
        if length > self.settings.part_size:
            return self._ranges(key, offset, offset + length, chunk_size)
        return stream_range(
            self._client,
            bucket=self.bucket,
            key=self._key(key),
            where=self.describe(),
            start=offset,
            end=offset + length,
            piece_size=min(chunk_size, STREAM_PIECE),
            outage_seconds=self.settings.outage_seconds,
        )

    def _ranges(self, key: str, first: int, end: int, chunk_size: int) -> Iterator[bytes]:
        """Bytes [first, end) of an object, fetched in parallel ranged GETs."""
        return read_ranges(
            self._client,
            self._pool,
            bucket=self.bucket,
            key=self._key(key),
            where=self.describe(),
            size=end,
            part_size=self.settings.part_size,
            max_concurrency=self.settings.max_concurrency,
            chunk_size=chunk_size,
            outage_seconds=self.settings.outage_seconds,
            first=first,
        )

    def _object(self, key: str) -> s3_presign.S3Object:
        return s3_presign.S3Object(
            self._client, self.bucket, self._key(key), self.describe(), self.settings.outage_seconds
        )

    def presign_get(self, key: str, expires_in_seconds: int) -> str:
        return s3_presign.presign_get(self._object(key), expires_in_seconds)

    def presign_put(self, key: str, size: int, expires_in_seconds: int) -> PresignedPut:
        return s3_presign.presign_put(self._object(key), size, self.settings.part_size, expires_in_seconds)

    def complete_put(self, key: str, put: PresignedPut, etags: list[str], size: int) -> None:
        s3_presign.complete_put(self._object(key), put, etags, size)

    def exists(self, key: str) -> bool:
        try:
            self.size(key)
        except FileNotFoundError:
            return False
        return True

    def delete(self, key: str) -> None:
        self._call(
            f"deleting {key}", lambda: self._client.delete_object(Bucket=self.bucket, Key=self._key(key))
        )

    def _call(self, action: str, fn: Callable[[], T]) -> T:
        """Tried again while S3 is briefly unreachable (s3_retry)."""
        return s3_retry.call(action, self.describe(), fn, self.settings.outage_seconds)

    def delete_prefix(self, prefix: str) -> None:
        if not prefix:
            raise ValueError("refusing to delete the whole storage root")
        full = self._key(prefix.strip("/")) + "/"
        where = self.describe()
        with translated(f"deleting {prefix}/", where):
            self._abort_uploads(full)
            batch: list[dict[str, str]] = []
            for page in self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=full
            ):
                for obj in page.get("Contents", []):
                    batch.append({"Key": obj["Key"]})
                    if len(batch) == _DELETE_BATCH:
                        self._delete_batch(batch)
                        batch = []
            if batch:
                self._delete_batch(batch)

    def _delete_batch(self, batch: list[Any]) -> None:
        response = self._client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
        errors = response.get("Errors") or []
        if errors:
            first = errors[0]
            raise OSError(
                f"deleting {len(errors)} object(s) in {self.describe()} failed, "
                f"e.g. {first.get('Key')}: {first.get('Code')} {first.get('Message', '')}"
            )

    def _abort_uploads(self, full_prefix: str) -> None:
        """Incomplete multipart uploads keep their parts (and cost) until aborted."""
        for page in self._client.get_paginator("list_multipart_uploads").paginate(
            Bucket=self.bucket, Prefix=full_prefix
        ):
            for upload in page.get("Uploads", []):
                try:
                    self._client.abort_multipart_upload(
                        Bucket=self.bucket, Key=upload["Key"], UploadId=upload["UploadId"]
                    )
                except ClientError as e:
                    if error_code(e) != "NoSuchUpload":
                        raise

    def list_children(self, prefix: str) -> list[str]:
        base = self._key(prefix.strip("/"))
        full = f"{base}/" if base else ""
        names: set[str] = set()
        with translated(f"listing {prefix or '/'}", self.describe()):
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=full, Delimiter="/"
            )
            for page in pages:
                names.update(p["Prefix"][len(full) :].rstrip("/") for p in page.get("CommonPrefixes", []))
                names.update(o["Key"][len(full) :] for o in page.get("Contents", []))
        names.discard("")
        return sorted(names)

    def modified_under(self, prefix: str) -> dict[str, datetime]:
        if not prefix.strip("/"):
            raise ValueError("a prefix to list is needed: not the whole storage root")
        full = self._key(prefix.strip("/")) + "/"
        out: dict[str, datetime] = {}
        with translated(f"listing {prefix}/", self.describe()):
            for page in self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=full
            ):
                out.update((o["Key"][len(full) :], o["LastModified"]) for o in page.get("Contents", []))
        return out

    def newest_by_child(self, skip: Collection[str] = ()) -> dict[str, datetime]:
        base = self._key("")
        full = f"{base}/" if base else ""
        out: dict[str, datetime] = {}

        def seen(key: str, when: datetime) -> None:
            name = key[len(full) :].split("/", 1)[0]
            if name and (name not in out or when > out[name]):
                out[name] = when

        with translated("listing every object", self.describe()):
            for page in self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=full
            ):
                for obj in page.get("Contents", []):
                    seen(obj["Key"], obj["LastModified"])
            for uploads in self._client.get_paginator("list_multipart_uploads").paginate(
                Bucket=self.bucket, Prefix=full
            ):
                for upload in uploads.get("Uploads", []):
                    if upload["Key"][len(full) :].split("/", 1)[0] not in skip:
                        seen(upload["Key"], self._last_part(upload))
        return out

    def _last_part(self, upload: Mapping[str, Any]) -> datetime:
        """When an unfinished multipart upload was last written to: its newest part, else its start."""
        newest: datetime = upload["Initiated"]
        try:
            for page in self._client.get_paginator("list_parts").paginate(
                Bucket=self.bucket, Key=upload["Key"], UploadId=upload["UploadId"]
            ):
                for part in page.get("Parts", []):
                    newest = max(newest, part["LastModified"])
        except ClientError as e:
            if error_code(e) != "NoSuchUpload":  # completed or aborted since it was listed
                raise
        return newest

    def describe(self) -> str:
        return self.settings.describe()

    def check_access(self) -> None:
        """Raises S3AccessError if the bucket is missing or refuses these credentials, S3StorageError
        (an OSError) if the endpoint cannot be reached."""
        where = self.describe()
        try:
            self._client.list_objects_v2(Bucket=self.bucket, Prefix=self._key(""), MaxKeys=1)
        except (ClientError, BotoCoreError) as e:
            error = explain(e, "checking checkpoint storage", where)
            code = error_code(e) if isinstance(e, ClientError) else ""
            if code == "NoSuchBucket":
                raise S3AccessError(
                    f"checkpoint_storage: bucket {self.bucket!r} does not exist ({where})"
                ) from e
            if code in BAD_CREDENTIALS or isinstance(e, NoCredentialsError):
                raise S3AccessError(f"checkpoint_storage: {error}") from e
            raise error from e


def check_access(config: Mapping[str, Any]) -> None:
    """Validates an experiment's `checkpoint_storage` (type s3) against the bucket itself.

    Raises InvalidArgument (S3AccessError for a missing bucket or refused credentials) with a
    message for the user, or S3StorageError (an OSError) when the endpoint is unreachable.
    """
    S3Backend(S3Settings.from_config(config)).check_access()


def normalize(config: Mapping[str, Any]) -> dict[str, Any]:
    return S3Settings.from_config(config).record()


def create(config: Mapping[str, Any]) -> S3Backend:
    """For the store: a backend whose bucket has been checked, so a bad config fails the upload early."""
    backend = S3Backend(S3Settings.from_config(config))
    backend.check_access()
    return backend
