"""Turns an experiment's `checkpoint_storage` config into a StorageBackend.

A config without `type` means the store's own default backend. Other backends (shared_fs, s3)
register a factory in BACKEND_FACTORIES under their `type`. Keys a backend does not use (such as
garbage-collection policies) are ignored, so one config block can serve several readers.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pedl_checkpoint_store import s3
from pedl_checkpoint_store.errors import InvalidArgument
from pedl_checkpoint_store.local import LocalFilesystemBackend
from pedl_checkpoint_store.s3_allow import S3Allowance, S3NotAllowed
from pedl_checkpoint_store.storage import StorageBackend
from pedl_checkpoint_store.storage_roots import OutsideAllowedRoots, check_shared_fs


@dataclass(frozen=True)
class BackendFactory:
    """`normalize` validates a config (InvalidArgument) and returns what is recorded with each
    checkpoint; `create` builds the backend from that normalized config."""

    normalize: Callable[[Mapping[str, Any]], dict[str, Any]]
    create: Callable[[Mapping[str, Any]], StorageBackend]


def _shared_fs_normalize(config: Mapping[str, Any]) -> dict[str, Any]:
    host_path = config.get("host_path")
    if not isinstance(host_path, str) or not host_path:
        raise InvalidArgument("checkpoint_storage.host_path is required for type 'shared_fs'")
    if not Path(host_path).is_absolute():
        raise InvalidArgument(f"checkpoint_storage.host_path {host_path!r} must be an absolute path")
    storage_path = config.get("storage_path", "")
    if not isinstance(storage_path, str):
        raise InvalidArgument("checkpoint_storage.storage_path must be a string")
    if ".." in Path(storage_path).parts:
        raise InvalidArgument(f"checkpoint_storage.storage_path {storage_path!r} must not contain '..'")
    return {"type": "shared_fs", "host_path": host_path, "storage_path": storage_path}


def _shared_fs_create(config: Mapping[str, Any]) -> StorageBackend:
    return LocalFilesystemBackend(Path(config["host_path"]) / config["storage_path"])


ALLOW_FLAG = "pedl-checkpoint-store --allowed-storage-root"
S3_FLAGS = "pedl-checkpoint-store --allowed-s3-bucket and --allowed-s3-endpoint"

# type -> how to validate its configs and build its backends.
BACKEND_FACTORIES: dict[str, BackendFactory] = {
    "shared_fs": BackendFactory(_shared_fs_normalize, _shared_fs_create),
    "s3": BackendFactory(s3.normalize, s3.create),
}


class BackendResolver:
    """Resolves storage configs to backends, reusing one backend per distinct normalized config.

    `allowed_roots` (resolved directories) bound where a shared_fs config may point; None allows only
    the default backend's own root when it has one. `allowed_s3` likewise bounds S3 configs; None
    allows only the default backend's own bucket and endpoint when it is S3.
    """

    def __init__(
        self,
        default: StorageBackend,
        allowed_roots: Sequence[Path] | None = None,
        allowed_s3: S3Allowance | None = None,
    ) -> None:
        self.default = default
        if allowed_s3 is None:
            settings = getattr(default, "settings", None)
            allowed_s3 = S3Allowance.from_store(settings.record() if settings is not None else None)
        self.allowed_s3 = allowed_s3
        if allowed_roots is None:
            root = getattr(default, "root", None)
            allowed_roots = [root] if isinstance(root, Path) else []
        self.allowed_roots = list(allowed_roots)
        self._cache: dict[str, StorageBackend] = {}
        self._lock = threading.Lock()

    def resolve(self, config: Mapping[str, Any] | None) -> tuple[StorageBackend, dict[str, Any]]:
        """The backend for `config` and the normalized config to store with the checkpoint.

        A backend that fails to build (e.g. its bucket is missing) is not cached: the next call retries.
        """
        kind = (config or {}).get("type")
        if kind is None or kind == "":
            return self.default, {}
        if not isinstance(kind, str):
            raise InvalidArgument(f"checkpoint_storage.type must be a string, got {kind!r}")
        factory = BACKEND_FACTORIES.get(kind)
        if factory is None:
            supported = ", ".join(sorted(BACKEND_FACTORIES))
            raise InvalidArgument(
                f"checkpoint_storage.type {kind!r} is not supported by this checkpoint store "
                f"(supported: {supported})"
            )
        assert config is not None
        normalized = factory.normalize(config)
        if kind == "shared_fs":
            try:
                check_shared_fs(normalized, self.allowed_roots, ALLOW_FLAG)
            except OutsideAllowedRoots as e:
                raise InvalidArgument(str(e)) from None
        if kind == "s3":
            try:
                self.allowed_s3.check(normalized, S3_FLAGS)
            except S3NotAllowed as e:
                raise InvalidArgument(str(e)) from None
        key = json.dumps(normalized, sort_keys=True)
        with self._lock:
            backend = self._cache.get(key)
            if backend is None:
                backend = self._cache[key] = factory.create(normalized)
            return backend, normalized
