"""`pedl cluster status`: each recorded service, whether its recorded pid runs, uptime and restarts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pedl.cluster import processes
from pedl.cluster.paths import ClusterPaths
from pedl.cluster.state import load_state
from pedl.cluster.supervisor import uptime_seconds


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    pid: int
    running: bool
    uptime_seconds: float
    restarts: int
    address: str


def cluster_status(home: Path) -> list[ServiceStatus] | None:
    """None when no cluster is recorded; the supervisor first, then the services in start order."""
    state = load_state(ClusterPaths(home).state_file)
    if state is None:
        return None
    rows = []
    if state.supervisor_pid:
        alive = processes.is_ours(state.supervisor_pid, state.supervisor_argv)
        rows.append(
            ServiceStatus("supervisor", state.supervisor_pid, alive, uptime_seconds(state.started_at), 0, "")
        )
    for svc in state.services:
        alive = processes.is_ours(svc.pid, svc.argv)
        rows.append(
            ServiceStatus(svc.name, svc.pid, alive, uptime_seconds(svc.started_at), svc.restarts, svc.address)
        )
    return rows


def human_duration(seconds: float) -> str:
    """One word ("1m53s", as kubectl writes ages), so the status table's columns split on spaces."""
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes}m"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"
