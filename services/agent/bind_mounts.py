"""The experiment's `bind_mounts` on this agent: honoured as Determined documents, or the run fails
before its harness starts, naming the mount.

A config reaches here with only mounts of a host path at that same path, writable (the rest are refused
at create, `pedl.config.sections`). A plain process (`--isolation none`) sees such a path as it is. In a
bubblewrap sandbox the host is read-only and /tmp is the run's own, so a mount is honoured only inside a
directory the operator shares with trials (`pedl-agent --bind DIR`) and outside what the agent hides.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pedl.v1 import agent_pb2

from .sandbox import Sandbox


class BindMountRefused(ValueError):
    """This agent cannot honour one of the experiment's bind mounts: every run placed here fails the
    same way, so the run's exit carries a failure signature (the mount) and the scheduler ends the
    trial when its next run is refused too, instead of spending every restart."""

    def signature(self) -> agent_pb2.FailureSignature:
        return agent_pb2.FailureSignature(
            exception_type=f"{__name__}.{type(self).__qualname__}", location=str(self.args[1])
        )


def bind_mounts_from_json(config_json: str) -> list[dict[str, Any]]:
    """The mounts of the config as the agent receives it (StartTrial.config_json); none for JSON that
    does not load: the harness then refuses the config, naming what is wrong."""
    try:
        config = json.loads(config_json) if config_json else None
    except ValueError:
        return []
    mounts = config.get("bind_mounts") if isinstance(config, dict) else None
    return [m for m in mounts or () if isinstance(m, dict) and isinstance(m.get("host_path"), str)]


def refuse_unmet_bind_mount(mounts: list[dict[str, Any]], sandbox: Sandbox | None) -> None:
    """BindMountRefused naming the first mount this agent cannot give a trial."""
    unmet = unmet_bind_mount(mounts, sandbox)
    if unmet is not None:
        raise BindMountRefused(unmet, unmet.split(".host_path", 1)[0])  # "bind_mounts[i]"


def unmet_bind_mount(mounts: list[dict[str, Any]], sandbox: Sandbox | None) -> str | None:
    """Why this agent cannot give a trial one of its bind mounts (writable, at host_path), or None."""
    if sandbox is None:
        return None
    shared = [Path(p).resolve() for p in sandbox.shared]
    hidden = [Path(p).resolve() for p in sandbox.hidden]
    for i, mount in enumerate(mounts):
        host = Path(mount["host_path"]).resolve()
        inside = any(host.is_relative_to(s) for s in shared)
        covered = next((h for h in hidden if host.is_relative_to(h)), None)
        if inside and covered is None:
            continue
        why = (
            f"holds {covered}, which this agent hides from trials"
            if covered is not None
            else "is not among the directories this agent's sandbox lets trials write (pedl-agent --bind)"
        )
        return (
            f"bind_mounts[{i}].host_path {mount['host_path']}: {why}; start the agent with "
            f"--bind {mount['host_path']} (or --isolation none), or remove the mount"
        )
    return None
