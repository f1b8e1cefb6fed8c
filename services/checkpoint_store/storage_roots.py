"""Which directories `shared_fs` checkpoint storage may use: only under roots the operator listed.

An experiment config names its `host_path`; without this check any user could have the store (often
running as root) write wherever they like. Paths are compared after resolving symlinks, so a link
inside an allowed root that points elsewhere is refused too. The scheduler runs the same check at
`experiment create`; the store runs it again on every use, whatever a request says.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

# The store's own default root (--storage-path), and so the default allowed root of both services.
DEFAULT_ROOT = Path("~/.pedl/checkpoints")


class OutsideAllowedRoots(ValueError):
    pass


def resolved_roots(roots: Iterable[str | os.PathLike[str]]) -> list[Path]:
    return [Path(r).expanduser().resolve() for r in roots]


def parse_roots(values: Sequence[str], env_value: str = "") -> list[str]:
    """Flag values (repeatable) or, when none, an env value holding several joined by os.pathsep."""
    return [v for v in values if v] or [v for v in env_value.split(os.pathsep) if v]


def is_under(path: Path, roots: Sequence[Path]) -> bool:
    """Whether `path`, symlinks followed, is one of `roots` (already resolved) or inside one."""
    target = path.expanduser().resolve()
    return any(target == root or target.is_relative_to(root) for root in roots)


def shared_fs_directory(config: Mapping[str, Any]) -> Path:
    return Path(str(config.get("host_path", ""))) / str(config.get("storage_path", "") or "")


def check_shared_fs(config: Mapping[str, Any], roots: Sequence[Path], flag: str) -> None:
    """Raises OutsideAllowedRoots naming the allowed roots unless the config's directory lies under one."""
    directory = shared_fs_directory(config)
    if not directory.is_absolute() or is_under(directory, roots):
        return  # a relative host_path is refused by the config's own validation
    resolved = directory.expanduser().resolve()
    via = f" (resolves to {resolved})" if resolved != directory else ""
    allowed = ", ".join(str(r) for r in roots) or "none"
    raise OutsideAllowedRoots(
        f"checkpoint_storage.host_path {directory}{via} is outside the storage roots this cluster "
        f"allows: {allowed} (set by the operator with {flag})"
    )
