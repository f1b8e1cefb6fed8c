"""A run's model directory (the harness's cwd): a copy-on-write view of its experiment's tree.

The tree is unpacked once per experiment on the agent (`model_trees`). A forked single-rank harness
mounts an overlay of it at the run's model directory in its own mount namespace
(`pedl.harness._model_view`); every other run gets a copy made here. Either way, what a run writes,
rewrites or deletes there stays its own.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from .model_trees import copy_view, mount_point

# In a run's trial directory: the overlay's upper (what the run changed in its model directory) and
# work directories, when a forked harness mounts its model directory as an overlay.
VIEW_DIR = ".pedl-view"


class RunModelDir:
    """Which tree the run holds (released when its processes have exited) and how it sees it."""

    def __init__(self, trial_dir: Path, name: str) -> None:
        self.path = trial_dir / name
        self._trial_dir = trial_dir
        self.tree: Path | None = None
        self.overlay = False

    async def prepare(self, tree: Path, overlay: bool) -> None:
        """An empty mount point for the forked harness's overlay, or the run's own copy of `tree`."""
        self.tree, self.overlay = tree, overlay
        if overlay:
            await asyncio.to_thread(mount_point, self.path)
        else:
            await asyncio.to_thread(copy_view, tree, self.path)

    def view(self) -> dict[str, str] | None:
        """The overlay a forked harness mounts at the model directory, or None (a copy is there)."""
        if not self.overlay or self.tree is None:
            return None
        work = self._trial_dir / VIEW_DIR
        return {
            "lower": str(self.tree),
            "target": str(self.path),
            "upper": str(work / "upper"),
            "work": str(work / "work"),
        }

    async def not_forked(self) -> None:
        """The harness is spawned after all (no fork server answered): a copy replaces the mount point."""
        if self.overlay and self.tree is not None:
            await asyncio.to_thread(copy_view, self.tree, self.path)
            self.overlay = False
