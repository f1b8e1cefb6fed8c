"""Where `import determined` resolves inside a trial, without ever shadowing a real Determined.

pedl ships Determined's Trial and Core APIs as a plain package in `sdk/compat/determined`. The
harness (and local mode) append that folder to `sys.path` only when no other `determined` is
importable, so a user's own Determined installation always wins; command entrypoints get the same
folder at the end of PYTHONPATH (`pythonpath_with_compat`).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

# An installed wheel: pedl/_compat (setup.py puts the package there); a checkout: sdk/compat.
_INSTALLED = Path(__file__).resolve().parents[1] / "_compat"
COMPAT_DIR = (
    _INSTALLED if (_INSTALLED / "determined").is_dir() else Path(__file__).resolve().parents[2] / "compat"
)


def compat_path() -> Path:
    """The folder holding pedl's `determined` package."""
    return COMPAT_DIR


def ensure_determined_importable() -> str:
    """Makes `import determined` work; returns where it resolves (a real install or pedl's)."""
    spec = importlib.util.find_spec("determined")
    if spec is None and COMPAT_DIR.is_dir():
        sys.path.append(str(COMPAT_DIR))
        importlib.invalidate_caches()
        spec = importlib.util.find_spec("determined")
    origin = spec.origin if spec is not None else None
    return str(origin) if origin else "unavailable"


def pythonpath_with_compat(existing: str | None = None) -> str:
    """A PYTHONPATH value with pedl's `determined` folder last (after anything already there)."""
    parts = [
        p
        for p in (existing if existing is not None else os.environ.get("PYTHONPATH", "")).split(os.pathsep)
        if p
    ]
    if str(COMPAT_DIR) not in parts:
        parts.append(str(COMPAT_DIR))
    return os.pathsep.join(parts)


if __name__ == "__main__":  # `python -m pedl.harness.compat` prints the folder, e.g. for PYTHONPATH
    print(COMPAT_DIR)
