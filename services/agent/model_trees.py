"""Each experiment's model definition unpacked once per agent, and shared by all of its runs here.

`<work_dir>/model_definitions/trees/<experiment_id>` holds the unpacked files. A tree is unpacked
into a hidden temporary directory and renamed into place, so a tree that exists is complete; what a
crashed agent left half-unpacked is never used (it is removed when the agent starts). Runs of one
experiment starting together wait on one lock: the first unpacks, the others find the tree.

No run writes into a tree: each run's model directory is a view of it (an overlay a forked harness
mounts, else a copy; see `pedl.harness._model_view` and `TrialRun`). The tree keeps the archive's
modes (files writable by their owner): an overlay shows its lower files' modes, and a trial without
capabilities must still be able to rewrite a shipped file or add one beside it. What keeps trials
off the tree itself is the sandbox, which covers the trees (no trial sees any experiment's tree).

A tree and the experiment's cached archive go once no run of the experiment is left here and none
came for `keep_idle_seconds` (the agent is not told when an experiment ends): a long-lived agent
keeps only the experiments it recently ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import time
from pathlib import Path

import structlog

from pedl.context import unpack

from .disk import remove_tree
from .model_definitions import ModelDefinitionCache

# How long the tree of an experiment with no run here stays for its next trial.
KEEP_IDLE_SECONDS = 600.0
_PARTIAL = ".partial-"
_GOING = ".removing-"
_DIGEST = ".sha256"

log = structlog.get_logger(component="model_trees")


def unpack_tree(data: bytes, tree: Path) -> None:
    """Unpacks `data` into `tree` all at once: into a temporary sibling, then renamed into place."""
    tree.parent.mkdir(parents=True, exist_ok=True)
    partial = tree.with_name(f"{_PARTIAL}{tree.name}-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        unpack(data, partial)
        try:
            partial.rename(tree)
        except OSError:
            if not tree.is_dir():
                raise
            remove_tree(partial)  # a run given up on while unpacking finished the same tree first
    except BaseException:
        remove_tree(partial)
        raise


def copy_view(tree: Path, dest: Path) -> None:
    """A run's own copy of the tree at `dest` (emptied first): for runs that get no overlay."""
    if dest.exists() or dest.is_symlink():
        remove_tree(dest)
    shutil.copytree(tree, dest, symlinks=True)


def mount_point(path: Path) -> None:
    """An empty directory for a forked harness's overlay (whatever an earlier attempt left goes)."""
    if path.exists() or path.is_symlink():
        remove_tree(path)
    path.mkdir(parents=True)


class ModelTrees:
    """The agent's unpacked model definitions: `acquire` for a run, `release` when it has ended."""

    def __init__(
        self, cache: ModelDefinitionCache, root: Path, keep_idle_seconds: float = KEEP_IDLE_SECONDS
    ) -> None:
        self._cache = cache
        self.root = root
        self.keep_idle_seconds = keep_idle_seconds
        self._locks: dict[int, asyncio.Lock] = {}
        self._users: dict[int, int] = {}
        self._idle_since: dict[int, float] = {}
        self.unpacked = 0  # trees unpacked by this agent (the first run of an experiment here)
        root.mkdir(parents=True, exist_ok=True)
        now = time.time()
        for path in root.iterdir():  # what an earlier agent process left
            if path.name.startswith((_PARTIAL, _GOING)):
                remove_tree(path)
            elif path.name.isdigit():
                self._idle_since[int(path.name)] = now
        for experiment_id in cache.cached():
            self._idle_since.setdefault(experiment_id, now)

    def path(self, experiment_id: int) -> Path:
        return self.root / str(experiment_id)

    def _digest_path(self, experiment_id: int) -> Path:
        """Beside the tree (never in it, where the trial would see it): the archive's sha256."""
        return self.root / f"{experiment_id}{_DIGEST}"

    def _matches(self, experiment_id: int, sha256: str) -> bool:
        """Whether the tree here is of the model definition `sha256` ("" from an older scheduler:
        any tree of the id is)."""
        if not sha256:
            return True
        try:
            return self._digest_path(experiment_id).read_text().strip() == sha256
        except FileNotFoundError:
            return False

    async def acquire(self, experiment_id: int, sha256: str = "") -> tuple[Path, bool]:
        """The experiment's tree, unpacked now if it is not here yet (and whether it was); held for
        the run until `release`. A tree of another model definition under the same id (an earlier
        database's experiment) is replaced."""
        lock = self._locks.setdefault(experiment_id, asyncio.Lock())
        async with lock:
            self._users[experiment_id] = self._users.get(experiment_id, 0) + 1
            self._idle_since.pop(experiment_id, None)
            tree = self.path(experiment_id)
            try:
                if tree.is_dir():
                    if self._matches(experiment_id, sha256):
                        return tree, False
                    await self._replace(experiment_id, tree)
                data = await self._cache.get(experiment_id, sha256)
                try:
                    await asyncio.to_thread(unpack_tree, data, tree)
                except ValueError as e:
                    raise ValueError(f"experiment {experiment_id}: {e}") from e
                if sha256:
                    await asyncio.to_thread(self._digest_path(experiment_id).write_text, sha256)
            except BaseException:
                self.release(experiment_id)
                raise
            self.unpacked += 1
            log.info("model definition unpacked", experiment_id=experiment_id, tree=str(tree))
            return tree, True

    async def _replace(self, experiment_id: int, tree: Path) -> None:
        """Moves a stale tree out of the way (the caller holds the experiment's lock)."""
        if self._users.get(experiment_id, 0) > 1:
            raise RuntimeError(
                f"experiment {experiment_id}: runs of another model definition under the same experiment "
                "id still use this agent's copy (was the scheduler's database replaced?)"
            )
        log.warning(
            "replacing a model definition of another experiment with the same id", experiment_id=experiment_id
        )
        going = tree.with_name(f"{_GOING}{tree.name}-{secrets.token_hex(4)}")
        tree.rename(going)
        with contextlib.suppress(FileNotFoundError):
            self._digest_path(experiment_id).unlink()
        await asyncio.to_thread(remove_tree, going)

    def release(self, experiment_id: int) -> None:
        left = self._users.get(experiment_id, 0) - 1
        if left > 0:
            self._users[experiment_id] = left
            return
        self._users.pop(experiment_id, None)
        self._idle_since[experiment_id] = time.time()

    async def sweep(self, now: float | None = None) -> list[int]:
        """Removes the trees (and cached archives) of experiments idle here past `keep_idle_seconds`."""
        now = time.time() if now is None else now
        removed = []
        for experiment_id, since in sorted(self._idle_since.items()):
            if now - since < self.keep_idle_seconds:
                continue
            async with self._locks.setdefault(experiment_id, asyncio.Lock()):
                if experiment_id in self._users or self._idle_since.get(experiment_id) != since:
                    continue  # a run came for it meanwhile
                del self._idle_since[experiment_id]
                tree = self.path(experiment_id)
                going = tree.with_name(f"{_GOING}{tree.name}-{secrets.token_hex(4)}")
                with contextlib.suppress(FileNotFoundError):
                    tree.rename(going)  # out of `acquire`'s sight at once; removed below
                with contextlib.suppress(FileNotFoundError):
                    self._digest_path(experiment_id).unlink()
                self._cache.forget(experiment_id)
            await asyncio.to_thread(remove_tree, going)
            removed.append(experiment_id)
        return removed

    async def sweep_forever(self, every: float = 60.0) -> None:
        while True:
            try:
                removed = await self.sweep()
                if removed:
                    log.info("removed idle model definitions", experiment_ids=removed)
            except Exception:
                log.exception("sweeping model definitions failed")
            await asyncio.sleep(every)
