"""Which S3 buckets and endpoints an experiment's `checkpoint_storage` may name.

Without this check a user could have the store (holding the operator's S3 keys, or running with an
instance role) read and write any bucket those credentials reach, or send them to an endpoint the user
runs. The operator lists buckets (`--allowed-s3-bucket`) and endpoints (`--allowed-s3-endpoint`);
the store's default lets only its own S3 bucket and endpoint through (none when it stores locally).
The scheduler checks at `experiment create`; the store again on every use.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

# How an absent endpoint_url (AWS's own endpoints) is listed and shown.
AWS = "aws"


class S3NotAllowed(ValueError):
    pass


def normalize_endpoint(url: str | None) -> str:
    """`HTTP://Host:9000/` and `http://host:9000` are one endpoint; no URL means AWS's own."""
    if not url or url.strip().lower() == AWS:
        return AWS
    parts = urlsplit(url.strip())
    if not parts.scheme or not parts.netloc:
        return url.strip().rstrip("/")
    path = parts.path.rstrip("/")
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{path}"


@dataclass(frozen=True)
class S3Allowance:
    buckets: frozenset[str]
    endpoints: frozenset[str]

    @classmethod
    def of(cls, buckets: Iterable[str], endpoints: Iterable[str]) -> S3Allowance:
        return cls(
            frozenset(b.strip() for b in buckets if b.strip()),
            frozenset(normalize_endpoint(e) for e in endpoints if e.strip()),
        )

    @classmethod
    def from_store(cls, s3: Mapping[str, Any] | None) -> S3Allowance:
        """The default: only the store's own bucket and endpoint, or nothing for a local store."""
        if not s3:
            return cls(frozenset(), frozenset())
        return cls.of([str(s3.get("bucket", ""))], [str(s3.get("endpoint_url") or AWS)])

    def describe(self) -> str:
        buckets = ", ".join(sorted(self.buckets)) or "none"
        endpoints = ", ".join(sorted(self.endpoints)) or "none"
        return f"buckets {buckets}; endpoints {endpoints}"

    def check(self, config: Mapping[str, Any], flags: str) -> None:
        """Raises S3NotAllowed (one line naming the allowed set) unless bucket and endpoint are listed."""
        bucket = str(config.get("bucket", "") or "")
        endpoint = normalize_endpoint(config.get("endpoint_url"))
        if bucket not in self.buckets:
            what = f"checkpoint_storage.bucket {bucket!r}"
        elif endpoint not in self.endpoints:
            shown = "AWS's own (no endpoint_url)" if endpoint == AWS else endpoint
            what = f"checkpoint_storage.endpoint_url {shown}"
        else:
            return
        raise S3NotAllowed(
            f"{what} is not among the S3 storage this cluster allows: {self.describe()} "
            f"(set by the operator with {flags}; an experiment without checkpoint_storage uses the "
            "store's own storage)"
        )
