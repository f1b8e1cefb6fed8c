"""Turns an experiment's `checkpoint_storage` config into a StorageBackend.

A config without `type` means the store's own default backend. Other backends (e.g. S3) register
a factory in BACKEND_FACTORIES under their `type`. Keys a backend does not use (such as
garbage-collection policies) are ignored, so one config block can serve several readers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pedl_checkpoint_store.errors import InvalidArgument
from pedl_checkpoint_store.local import LocalFilesystemBackend
from pedl_checkpoint_store.storage import StorageBackend


def _shared_fs(config: Mapping[str, Any]) -> tuple[StorageBackend, dict[str, Any]]:
    host_path = config.get("host_path")
    if not isinstance(host_path, str) or not host_path:
        raise InvalidArgument("checkpoint_storage.host_path is required for type 'shared_fs'")
    if not Path(host_path).is_absolute():
        raise InvalidArgument(f"checkpoint_storage.host_path {host_path!r} must be an absolute path")
    storage_path = config.get("storage_path", "")
    if not isinstance(storage_path, str):
        raise InvalidArgument("checkpoint_storage.storage_path must be a string")
    root = Path(host_path) / storage_path
    if ".." in Path(storage_path).parts:
        raise InvalidArgument(f"checkpoint_storage.storage_path {storage_path!r} must not contain '..'")
    normalized = {"type": "shared_fs", "host_path": host_path, "storage_path": storage_path}
    return LocalFilesystemBackend(root), normalized


# type -> factory(config) returning the backend and the config to record with each checkpoint.
BACKEND_FACTORIES: dict[str, Callable[[Mapping[str, Any]], tuple[StorageBackend, dict[str, Any]]]] = {
    "shared_fs": _shared_fs,
}


class BackendResolver:
    """Resolves storage configs to backends, reusing one backend per distinct config."""

    def __init__(self, default: StorageBackend) -> None:
        self.default = default
        self._cache: dict[str, tuple[StorageBackend, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def resolve(self, config: Mapping[str, Any] | None) -> tuple[StorageBackend, dict[str, Any]]:
        """The backend for `config` and the normalized config to store with the checkpoint."""
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
        key = repr(sorted((k, repr(v)) for k, v in config.items()))
        with self._lock:
            if key not in self._cache:
                self._cache[key] = factory(config)
            return self._cache[key]
