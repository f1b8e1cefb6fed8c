"""Checks an experiment's own checkpoint storage before anything is created.

A missing bucket or refused credentials should fail `experiment create`, not the first
checkpoint of the first trial; so should a shared_fs host_path outside the roots the operator allows
(the store refuses it too, whatever a request says). The check talks to S3, so callers run it off the
event loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pedl.config import ExperimentConfig
from pedl_checkpoint_store.s3_allow import S3Allowance, S3NotAllowed
from pedl_checkpoint_store.storage_roots import OutsideAllowedRoots, check_shared_fs

ALLOW_FLAG = "pedl-scheduler --allowed-storage-root"
S3_FLAGS = "pedl-scheduler --allowed-s3-bucket and --allowed-s3-endpoint"


class StorageCheckError(ValueError):
    pass


def check_checkpoint_storage(
    config: ExperimentConfig, roots: Sequence[Path] | None = None, allowed_s3: S3Allowance | None = None
) -> None:
    """Raises StorageCheckError; `roots` (resolved) bound shared_fs host_paths and `allowed_s3` S3
    buckets and endpoints, None allows any. `config` is the request's, parsed once by the API."""
    storage = config.checkpoint_storage
    if storage.type == "shared_fs" and roots is not None:
        try:
            check_shared_fs(storage.wire(), roots, ALLOW_FLAG)
        except OutsideAllowedRoots as e:
            raise StorageCheckError(str(e)) from None
    if storage.type != "s3":
        return
    if allowed_s3 is not None:
        try:
            allowed_s3.check(storage.wire(), S3_FLAGS)
        except S3NotAllowed as e:
            raise StorageCheckError(str(e)) from None
    from pedl_checkpoint_store.s3 import check_access

    try:
        check_access(storage.wire())
    except Exception as e:  # the store's errors carry a message meant for the user
        message = str(e)
        raise StorageCheckError(
            message if message.startswith("checkpoint_storage") else f"checkpoint_storage: {message}"
        ) from None
