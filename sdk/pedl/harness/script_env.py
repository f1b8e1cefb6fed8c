"""The environment a Core API script runs in: its Core API socket and key, its cluster info, the
harness's interpreter as `python3`, and pedl's `determined` package where no real one is installed."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def script_environment(base: dict[str, str], socket_path: str, key: bytes, info_path: Path) -> dict[str, str]:
    """The script's environment: the harness's, its Core API socket and cluster info, `python3` on PATH
    being the harness's interpreter, and pedl's `determined` package where no real one is installed."""
    env = dict(base)
    env["PEDL_CORE_API_SOCKET"] = socket_path
    env["PEDL_CORE_API_KEY"] = key.hex()
    env["PEDL_CLUSTER_INFO"] = str(info_path)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    compat = compat_path()
    if compat is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(compat), env.get("PYTHONPATH", "")) if p)
    return env


def compat_path() -> Path | None:
    """sdk/compat (pedl's `determined`), unless a real Determined is importable in this environment."""
    import importlib.util

    from pedl.harness.compat import COMPAT_DIR as compat

    if not (compat / "determined").is_dir():
        return None
    spec = importlib.util.find_spec("determined")
    if spec is not None and spec.origin and compat not in Path(spec.origin).resolve().parents:
        return None
    return compat
