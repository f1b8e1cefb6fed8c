"""Model definitions: fetched once per experiment from the scheduler and cached (unpacked once per
experiment by `model_trees`)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pedl._grpc
from pedl.v1 import scheduler_pb2, scheduler_pb2_grpc

if TYPE_CHECKING:
    from pedl.v1.scheduler_pb2_grpc import SchedulerServiceAsyncStub

FETCH_TIMEOUT_SECONDS = 120.0


def check_name(name: str) -> str:
    """A model definition name must be one plain path component: it becomes a directory."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise ValueError(f"StartTrial.model_definition_name {name!r} is not a valid directory name")
    return name


class ModelDefinitionCache:
    """Bytes of each experiment's model definition under `<work_dir>/model_definitions/`."""

    def __init__(self, master: str, cache_dir: Path) -> None:
        self._master = master
        self._dir = cache_dir
        self._locks: dict[int, asyncio.Lock] = {}

    def _path(self, experiment_id: int) -> Path:
        return self._dir / f"{experiment_id}.tar.gz"

    async def get(self, experiment_id: int, sha256: str = "") -> bytes:
        """The experiment's packed model definition; with `sha256` (the scheduler's), a cached copy
        that does not match it (another database's experiment of that id) is fetched anew, and a
        fetched one must match it."""
        lock = self._locks.setdefault(experiment_id, asyncio.Lock())
        async with lock:
            path = self._path(experiment_id)
            if path.exists():
                data = await asyncio.to_thread(path.read_bytes)
                if not sha256 or hashlib.sha256(data).hexdigest() == sha256:
                    return data
            data = await self._fetch(experiment_id)
            if sha256 and hashlib.sha256(data).hexdigest() != sha256:
                raise RuntimeError(
                    f"the model definition fetched for experiment {experiment_id} does not match the "
                    "sha256 the scheduler sent with the trial"
                )
            await asyncio.to_thread(self._store, path, data)
            return data

    async def _fetch(self, experiment_id: int) -> bytes:
        # Waits (up to FETCH_TIMEOUT_SECONDS) for a scheduler that is restarting to come back.
        channel = pedl._grpc.aio_channel(self._master, wait_for_ready=True)
        try:
            # An aio channel's stub: its calls are awaitables (mypy-protobuf's AsyncStub).
            stub = cast("SchedulerServiceAsyncStub", scheduler_pb2_grpc.SchedulerServiceStub(channel))
            resp = await stub.GetModelDefinition(
                scheduler_pb2.GetModelDefinitionRequest(experiment_id=experiment_id),
                timeout=FETCH_TIMEOUT_SECONDS,
            )
        except Exception as e:
            detail = e.details() if hasattr(e, "details") else str(e)
            raise RuntimeError(
                f"cannot fetch the model definition of experiment {experiment_id} "
                f"from {self._master}: {detail}"
            ) from e
        finally:
            await channel.close()
        if not resp.model_definition:
            raise RuntimeError(f"the scheduler sent an empty model definition for experiment {experiment_id}")
        return resp.model_definition

    def cached(self) -> list[int]:
        """The experiments whose archives are here (also those an earlier agent process fetched)."""
        if not self._dir.is_dir():
            return []
        names = (p.name.removesuffix(".tar.gz") for p in self._dir.glob("*.tar.gz"))
        return sorted(int(n) for n in names if n.isdigit())

    def forget(self, experiment_id: int) -> None:
        """Removes the experiment's archive (a later `get` fetches it again)."""
        with contextlib.suppress(FileNotFoundError):
            self._path(experiment_id).unlink()
        lock = self._locks.get(experiment_id)
        if lock is not None and not lock.locked():
            del self._locks[experiment_id]

    @staticmethod
    def _store(path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
