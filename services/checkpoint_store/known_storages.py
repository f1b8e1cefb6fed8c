"""Every storage (normalized `checkpoint_storage` config) an upload of this store ever wrote to.

Kept in the catalog (`storages.json`, beside the checkpoints' folders) and noted before an upload's
first byte, so the orphan sweep also visits a bucket or directory whose every recorded checkpoint
is gone, or whose only upload a crash interrupted before the store restarted.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from pedl import _log
from pedl_checkpoint_store.storage import StorageBackend

log = _log.get_logger(component="checkpoint_store")

KEY = "storages.json"


class KnownStorages:
    def __init__(self, catalog: StorageBackend) -> None:
        self._catalog = catalog
        self._lock = threading.Lock()
        self._configs: dict[str, dict[str, Any]] = {}
        self._loaded = False

    def all(self) -> list[dict[str, Any]]:
        with self._lock:
            self._load_locked()
            return [dict(c) for c in self._configs.values()]

    def note(self, config: dict[str, Any]) -> None:
        """Remembers `config` (the default storage, {}, needs no note); raises OSError if it cannot be
        written, which fails the upload before anything is stored where the sweep would not look."""
        if not config:
            return
        key = json.dumps(config, sort_keys=True)
        with self._lock:
            self._load_locked()
            if key in self._configs:
                return
            configs = {**self._configs, key: dict(config)}
            self._catalog.put_bytes(KEY, json.dumps(sorted(configs), indent=1).encode())
            self._configs = configs

    def _load_locked(self) -> None:
        if self._loaded:
            return
        try:
            keys = json.loads(self._catalog.get_bytes(KEY))
        except FileNotFoundError:
            keys = []
        except ValueError as e:
            # Rewritten whole at the next note; the records and markers still name their storages.
            log.error("unreadable list of known storages, starting a new one", key=KEY, error=str(e))
            keys = []
        for key in keys if isinstance(keys, list) else []:
            try:
                config = json.loads(key)
            except (TypeError, ValueError):
                continue
            if isinstance(config, dict):
                self._configs[key] = config
        self._loaded = True
