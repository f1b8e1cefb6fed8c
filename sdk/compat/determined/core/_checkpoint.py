"""`core_context.checkpoint`: the script writes a directory, the platform stores it under a uuid.

On a cluster the harness stores each checkpoint in the checkpoint store as the trial's (the same
authorisation and garbage collection as a Trial class's checkpoints) and tells the scheduler at
once, so a trial killed a moment later resumes from it (`det.get_cluster_info().latest_checkpoint`).
Sharded storage (`shard=True`): every rank writes its own files into one directory on its machine,
and the chief stores it once all have finished; the files of different ranks must not collide.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from determined.core._distributed import DistributedContext
from determined.core._link import Link


class DownloadMode(enum.Enum):
    LocalWorkersShareDownload = "LOCAL_WORKERS_SHARE_DOWNLOAD"
    NoSharedDownload = "NO_SHARED_DOWNLOAD"


def _check_metadata(metadata: Any, what: str) -> dict[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict) or not all(isinstance(k, str) for k in metadata):
        raise TypeError(f"{what}: metadata must be a dict with string keys, got {metadata!r}")
    try:
        json.dumps(metadata)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{what}: metadata must be JSON-serializable: {e}") from None
    return dict(metadata)


class CheckpointContext:
    def __init__(self, link: Link, dist: DistributedContext) -> None:
        self._link = link
        self._dist = dist
        self._closed = False

    def close(self) -> None:
        self._closed = True

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise RuntimeError(f"{what} called after the core context was closed (leave it inside `with`)")

    def _check_chief(self, what: str, shard: bool) -> None:
        if shard and self._dist.cross_size > 1:
            raise RuntimeError(
                f"{what}(shard=True) spans {self._dist.cross_size} machines; pedl stores sharded "
                "checkpoints of trials on one machine only (let the chief gather the state instead)"
            )
        if not shard and self._dist.rank != 0:
            raise RuntimeError(
                f"{what} without shard=True may only be called on the chief (rank 0); this is rank "
                f"{self._dist.rank} (with shard=True, every rank calls it and writes its own files)"
            )

    @contextlib.contextmanager
    def store_path(
        self, metadata: dict[str, Any] | None = None, *, shard: bool = False
    ) -> Iterator[tuple[Path, str]]:
        """Yields (directory to write, storage_id); the checkpoint is stored when the block exits."""
        self._check_open("store_path")
        meta = _check_metadata(metadata, "store_path")
        self._check_chief("store_path", shard)
        begun = self._link.call("checkpoint_begin") if self._dist.rank == 0 else None
        if shard:
            begun = self._dist.broadcast(begun)
        assert begun is not None
        path, storage_id = Path(begun["path"]), begun["storage_id"]
        try:
            yield path, storage_id
        except BaseException:
            if shard:
                self._dist.allgather(None)
            if self._dist.rank == 0:
                self._link.call("checkpoint_abort", storage_id=storage_id, path=str(path))
            raise
        if shard:
            merged: dict[str, Any] = {}
            for rank_meta in self._dist.allgather(meta):
                merged.update(rank_meta)
            meta = merged
        if self._dist.rank == 0:
            self._link.call("checkpoint_commit", storage_id=storage_id, path=str(path), metadata=meta)
        if shard:
            self._dist.allgather(None)  # no rank goes on before the checkpoint is stored

    def upload(
        self,
        ckpt_dir: str | os.PathLike[str] | None,
        metadata: dict[str, Any] | None = None,
        *,
        shard: bool = False,
        selector: Callable[[str], bool] | None = None,
    ) -> str:
        """Stores the files of `ckpt_dir` (those `selector` accepts) as a new checkpoint; its storage_id."""
        self._check_open("upload")
        if ckpt_dir is None and not shard:
            raise ValueError("upload: ckpt_dir is required unless shard=True")
        with self.store_path(metadata, shard=shard) as (path, storage_id):
            if ckpt_dir is not None:
                _copy_selected(Path(ckpt_dir), path, selector)
        return storage_id

    @contextlib.contextmanager
    def restore_path(
        self,
        storage_id: str,
        download_mode: DownloadMode = DownloadMode.LocalWorkersShareDownload,
        selector: Callable[[str], bool] | None = None,
    ) -> Iterator[Path]:
        """Yields a directory holding checkpoint `storage_id`; it is removed when the block exits."""
        self._check_open("restore_path")
        _check_storage_id(storage_id, "restore_path")
        with tempfile.TemporaryDirectory(prefix="det-restore-") as tmp:
            self.download(storage_id, tmp, download_mode, selector=selector)
            yield Path(tmp)

    def download(
        self,
        storage_id: str,
        ckpt_dir: str | os.PathLike[str],
        download_mode: DownloadMode = DownloadMode.LocalWorkersShareDownload,
        *,
        selector: Callable[[str], bool] | None = None,
    ) -> None:
        """Writes the files of checkpoint `storage_id` into `ckpt_dir`."""
        self._check_open("download")
        _check_storage_id(storage_id, "download")
        if not isinstance(download_mode, DownloadMode):
            raise TypeError(f"download: download_mode must be a DownloadMode, got {download_mode!r}")
        dest = Path(ckpt_dir)
        dest.mkdir(parents=True, exist_ok=True)
        if selector is None:
            self._link.call("checkpoint_download", storage_id=storage_id, dest=str(dest))
            return
        with tempfile.TemporaryDirectory(prefix="det-download-") as tmp:
            self._link.call("checkpoint_download", storage_id=storage_id, dest=tmp)
            _copy_selected(Path(tmp), dest, selector)

    def get_metadata(self, storage_id: str) -> dict[str, Any]:
        """The metadata the checkpoint was stored with (with steps_completed where known)."""
        self._check_open("get_metadata")
        _check_storage_id(storage_id, "get_metadata")
        return dict(self._link.call("checkpoint_metadata", storage_id=storage_id))

    def delete(self, storage_id: str) -> None:
        self._check_open("delete")
        _check_storage_id(storage_id, "delete")
        self._link.call("checkpoint_delete", storage_id=storage_id)


def _check_storage_id(storage_id: Any, what: str) -> None:
    if not isinstance(storage_id, str) or not storage_id:
        raise ValueError(
            f"{what}: storage_id must be a checkpoint's uuid (a non-empty str), got {storage_id!r}"
        )


def _copy_selected(src: Path, dest: Path, selector: Callable[[str], bool] | None) -> None:
    if not src.is_dir():
        raise FileNotFoundError(f"checkpoint directory {src} does not exist")
    for file in sorted(p for p in src.rglob("*") if p.is_file()):
        rel = file.relative_to(src).as_posix()
        if selector is None or selector(rel):
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(file, target)
