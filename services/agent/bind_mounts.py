"""The experiment's `bind_mounts` on this agent: honoured as Determined documents, or the run fails
before its harness starts, naming the mount.

In a bubblewrap sandbox each mount's host_path is bound at its container_path (read-only when
`read_only`; `propagation` is accepted: nothing mounted later on the host reaches a trial either
way), provided the host path lies under a root the operator allows (`pedl-agent --allowed-bind-root`
or `--bind`) and outside what the agent hides, and the container path covers nothing the trial needs
(the system, its Python, its own directories). A plain process (`--isolation none`) sees the host as
it is: only a mount of a host path at that same path is honoured there.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pedl.config import ExperimentConfig
from pedl.v1 import agent_pb2

from .sandbox import Sandbox
from .trial_view import Mount


class BindMountRefused(ValueError):
    """This agent cannot honour one of the experiment's bind mounts: every run placed here fails the
    same way, so the run's exit carries a failure signature (the mount) and the scheduler ends the
    trial when its next run is refused too, instead of spending every restart."""

    def signature(self) -> agent_pb2.FailureSignature:
        return agent_pb2.FailureSignature(
            exception_type=f"{__name__}.{type(self).__qualname__}", location=str(self.args[1])
        )


def mounts_of(bind_mounts: Sequence[dict[str, Any]]) -> list[Mount]:
    """The config's bind_mounts (ExperimentConfig.bind_mounts, decoded once per run) as mounts; a
    missing container_path means the host path's own."""
    out: list[Mount] = []
    for m in bind_mounts:
        container = m.get("container_path") or m["host_path"]
        out.append(
            Mount(Path(m["host_path"]), Path(posixpath.normpath(container)), m.get("read_only") is True)
        )
    return out


def run_mounts(
    start: agent_pb2.StartTrial,
    config: ExperimentConfig | None,
    sandbox: Sandbox | None,
    trial_dir: Path,
    socket_path: Path,
) -> list[Mount]:
    """The run's bind mounts (none without a decoded config: the harness then refuses it), or
    BindMountRefused naming the one this agent cannot give it."""
    mounts = mounts_of(config.bind_mounts if config is not None else [])
    unmet = unmet_bind_mount(mounts, sandbox, trial_dir, socket_path)
    if unmet is not None:  # args: the message, and the mount ("bind_mounts[i]") as its signature
        raise BindMountRefused(f"experiment {start.experiment_id}: {unmet}", unmet.split(".", 1)[0])
    return mounts


def unmet_bind_mount(
    mounts: Sequence[Mount],
    sandbox: Sandbox | None,
    trial_dir: Path | None = None,
    socket_path: Path | None = None,
) -> str | None:
    """Why this agent cannot give a trial one of its bind mounts, or None."""
    for i, mount in enumerate(mounts):
        why = _unmet(mount, sandbox, trial_dir, socket_path)
        if why is not None:
            return f"bind_mounts[{i}].{why}"
    return None


def _unmet(
    mount: Mount, sandbox: Sandbox | None, trial_dir: Path | None, socket_path: Path | None
) -> str | None:
    if sandbox is None:
        if mount.container.is_absolute() and Path(mount.host) == mount.container and not mount.read_only:
            return None
        return (
            f"container_path {mount.container}: this agent runs trials as plain processes (--isolation "
            "none), which see host paths where they are, writable; mount at the host path or use an agent "
            "with --isolation bwrap"
        )
    host = mount.host.resolve()
    roots = [Path(p) for p in sandbox.bind_roots]
    if not any(host.is_relative_to(r) for r in roots):
        allowed = ", ".join(str(r) for r in roots) or "none"
        return (
            f"host_path {mount.host}: not under a directory this agent lets trials mount (allowed roots: "
            f"{allowed}); start the agent with --allowed-bind-root DIR, or remove the mount"
        )
    if not host.exists():
        return f"host_path {mount.host}: does not exist on this agent"
    covered = next((h for h in sandbox.hidden if host.is_relative_to(h) or h.is_relative_to(host)), None)
    if covered is not None:
        return f"host_path {mount.host}: holds or is inside {covered}, which this agent hides from trials"
    if mount.container.is_absolute():
        needed = sandbox.needed(trial_dir or Path("/nonexistent"), socket_path or Path("/nonexistent"))
        hit = next((n for n in needed if n.is_relative_to(mount.container)), None)
        if hit is not None or mount.container == Path("/"):
            return f"container_path {mount.container}: would cover {hit or '/'}, which the trial needs"
    return None
