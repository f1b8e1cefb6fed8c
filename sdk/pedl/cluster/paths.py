"""Where a local cluster keeps its state, logs, database, checkpoints and agent work dirs."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# Most disk one trial run may fill in its agent's work dir under the cluster's home (each agent's
# --trial-disk-limit): a local cluster shares its disk with its user.
DEFAULT_TRIAL_DISK_LIMIT = "20G"


def harness_warm_file(work_dir: Path) -> Path:
    """Written by an agent in its work dir once a trial's harness starts warm there: the default
    environment's fork server has its imports (torch, TensorFlow) done, or the agent will not fork.
    `pedl cluster up` waits for it, so that a cluster's first trials do not wait on those imports."""
    return work_dir / "harness-warm"


def pedl_home(explicit: str | os.PathLike[str] | None = None) -> Path:
    """`--home`, else $PEDL_HOME, else ~/.pedl: one place so every command agrees."""
    if explicit:
        return Path(explicit).expanduser().absolute()
    env = os.environ.get("PEDL_HOME")
    if env:
        return Path(env).expanduser().absolute()
    return Path.home() / ".pedl"


@dataclass(frozen=True)
class ClusterPaths:
    home: Path

    @property
    def root(self) -> Path:
        return self.home / "cluster"

    @property
    def state_file(self) -> Path:
        return self.root / "cluster.json"

    @property
    def db(self) -> Path:
        return self.root / "pedl.db"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def agents(self) -> Path:
        return self.root / "agents"

    def log(self, name: str) -> Path:
        return self.root / f"{name}.log"

    def port_file(self, name: str) -> Path:
        return self.root / f"{name}.port"
