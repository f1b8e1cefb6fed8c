"""An experiment's bind_mounts checked at create against the roots the operator allows host paths
from (`pedl-scheduler --allowed-bind-root`, the same list its agents get), so a config the agents
would refuse at trial start is refused in one line when it is created."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pedl.config import ExperimentConfig
from pedl_checkpoint_store.storage_roots import is_under
from pedl_scheduler.storage_check import StorageCheckError

ALLOW_FLAG = "--allowed-bind-root"


class BindMountRefused(StorageCheckError):
    """Refused at create like storage outside the allowed roots (FAILED_PRECONDITION)."""


def check_bind_mounts(config: ExperimentConfig, roots: Sequence[Path] | None) -> None:
    """Raises BindMountRefused for a host_path outside `roots` (resolved); None allows any (the
    agents then decide)."""
    if roots is None:
        return
    mounts = config.raw.get("bind_mounts") or []
    for i, mount in enumerate(mounts):
        if not is_under(Path(mount["host_path"]), roots):
            allowed = ", ".join(str(r) for r in roots) or "none"
            raise BindMountRefused(
                f"bind_mounts[{i}].host_path {mount['host_path']}: not under a directory this cluster "
                f"lets trials mount (allowed roots: {allowed}; pedl-scheduler and pedl-agent "
                f"{ALLOW_FLAG} DIR)"
            )
