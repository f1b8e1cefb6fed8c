"""What the S3 tests of the checkpoint store share: a real store process on a real SeaweedFS, and
ways to look at the bucket behind the store's back."""

from __future__ import annotations

import os
import time
import uuid as uuidlib
from collections.abc import Callable
from pathlib import Path

from support.processes import Service, start
from support.seaweedfs import SeaweedFS

DEFAULT_BUCKET = "pedl-default"
EXPERIMENT_BUCKET = "pedl-experiments"
MiB = 1024 * 1024


def start_store(
    workdir: Path, weed: SeaweedFS, *, prefix: str | None = None, extra_env: dict[str, str] | None = None
) -> Service:
    """With `prefix`, the default backend is S3 (keys from the env, as an operator would give them)."""
    workdir.mkdir(parents=True, exist_ok=True)
    port_file = workdir / f"store-{uuidlib.uuid4().hex[:6]}.port"
    args = ["pedl-checkpoint-store", "--port", "0", "--port-file", str(port_file)]
    args += ["--storage-path", str(workdir / "catalog")]
    for bucket in (DEFAULT_BUCKET, EXPERIMENT_BUCKET, "no-such-bucket"):  # the buckets these tests name
        args += ["--allowed-s3-bucket", bucket]
    args += ["--allowed-s3-endpoint", weed.endpoint_url]
    if prefix is not None:
        args += ["--storage", "s3", "--s3-bucket", DEFAULT_BUCKET, "--s3-endpoint-url", weed.endpoint_url]
        args += ["--s3-prefix", prefix]
    env = {"AWS_ACCESS_KEY_ID": weed.access_key, "AWS_SECRET_ACCESS_KEY": weed.secret_key}
    return start("checkpoint_store", args, workdir, port_file, env={**env, **(extra_env or {})})


def make_tree(root: Path, big: int = 20 * MiB + 123) -> dict[str, bytes]:
    """By default three 8 MiB multipart parts for model.pt, an empty file and a small nested one."""
    files = {"model.pt": os.urandom(big), "empty": b"", "nested/opt.pt": os.urandom(5000)}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return files


def read_tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def keys(weed: SeaweedFS, bucket: str, prefix: str) -> list[str]:
    pages = weed.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def multipart_uploads(weed: SeaweedFS, bucket: str, prefix: str) -> list[str]:
    return [
        u["Key"]
        for u in weed.client().list_multipart_uploads(Bucket=bucket, Prefix=prefix).get("Uploads", [])
    ]


def wait_for(condition: Callable[[], object], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
