"""The `checkpoint_storage` section: shared_fs and s3 (the types pedl's checkpoint store serves).

Other types are refused earlier by fields.FIELDS. Determined's rules hold: an s3 `prefix` may not
climb out of the bucket's root with a `..` segment, and a shared_fs `storage_path` is relative or a
directory under `host_path`.
"""

from __future__ import annotations

import posixpath
from typing import Any

from pedl.config.errors import FieldError, FieldPath

SAVE_KEYS = ("save_experiment_best", "save_trial_best", "save_trial_latest")
_SAVE_DEFAULTS = {"save_experiment_best": 0, "save_trial_best": 1, "save_trial_latest": 1}


def validate_checkpoint_storage(value: Any, path: FieldPath = ("checkpoint_storage",)) -> dict[str, Any]:
    """Without `type` the cluster's checkpoint store backend is used; only the save_* policy applies."""
    storage = dict({} if value is None else value)  # its shape is checked by the schema
    for key, default in _SAVE_DEFAULTS.items():
        storage.setdefault(key, default)
    kind = storage.get("type")
    if kind == "s3" and "prefix" in storage:
        _check_prefix(storage["prefix"], (*path, "prefix"))
    if kind == "shared_fs":
        _check_shared_fs(storage, path)
    return storage


def _check_prefix(prefix: str, path: FieldPath) -> None:
    if ".." in prefix.split("/"):
        raise FieldError(
            path, f"{prefix!r} must not contain a '..' segment (it would leave the bucket's root)"
        )


def _check_shared_fs(storage: dict[str, Any], path: FieldPath) -> None:
    host = storage["host_path"]
    if not posixpath.isabs(host):
        raise FieldError((*path, "host_path"), f"must be an absolute path, got {host!r}")
    sub = storage.get("storage_path")
    if sub is None:
        return
    host_norm = posixpath.normpath(host)
    full = posixpath.normpath(sub if posixpath.isabs(sub) else posixpath.join(host_norm, sub))
    if full != host_norm and not full.startswith(host_norm.rstrip("/") + "/"):
        raise FieldError(
            (*path, "storage_path"),
            f"{sub!r} leaves host_path {host!r}; give a relative path or a directory under host_path",
        )
