"""cluster.json: what `cluster up` started, so `cluster down` (a later process) can stop it."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path


class StateError(Exception):
    pass


@dataclass
class ServiceRecord:
    name: str
    pid: int
    # The argv it was started with; its arguments identify the process in /proc/<pid>/cmdline.
    argv: list[str]
    log: str
    address: str = ""
    # When the running process started (RFC 3339) and how often the supervisor restarted it.
    started_at: str = ""
    restarts: int = 0


@dataclass
class ClusterRecord:
    home: str
    master: str = ""
    checkpoint_store: str = ""
    # The web UI's URL (http://host:port/).
    webui: str = ""
    started_at: str = ""
    services: list[ServiceRecord] = field(default_factory=list)
    # The process that restarts crashed services (`pedl.cluster.supervisor`); 0 before it runs.
    supervisor_pid: int = 0
    supervisor_argv: list[str] = field(default_factory=list)


def load_state(path: Path) -> ClusterRecord | None:
    if not path.exists():
        return None
    try:
        raw = json.loads(path.read_text())
        services = [ServiceRecord(**s) for s in raw.pop("services", [])]
        return ClusterRecord(**raw, services=services)
    except (OSError, ValueError, TypeError) as e:
        raise StateError(f"{path}: unreadable cluster state ({e}); remove it if no cluster is running") from e


def save_state(path: Path, state: ClusterRecord) -> None:
    """Atomic, so a concurrent `cluster down` never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(asdict(state), indent=2) + "\n")
    os.replace(tmp, path)
