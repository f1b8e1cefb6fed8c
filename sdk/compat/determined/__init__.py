"""Determined's Python API on top of pedl, for model definitions and training scripts written for
Determined (`import determined as det`).

This package lives outside `sdk/pedl` on purpose: it is put on a trial's path only when no real
Determined installation is importable, so it never shadows one (see the README, "Code written for
Determined"). Submodules load on first use, so `import determined` stays cheap (no torch or
TensorFlow until `det.pytorch` or `det.keras` is touched).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.38.0+pedl"

# Determined's log format for scripts' logging.basicConfig(format=det.LOG_FORMAT).
LOG_FORMAT = "%(levelname)s: [%(process)s] %(name)s: %(message)s"


class InvalidHP(Exception):
    """Raised by a training script inside `with det.core.init()`: the trial's hyperparameters are
    invalid. The context reports EarlyExitReason.INVALID_HP and the script exits 0; the trial ends
    COMPLETED (no restart) and the searcher hears it exited early."""

    def __init__(self, message: str = "...") -> None:
        super().__init__(message)


# Submodules reachable as attributes of `det` (Determined's own layout).
_SUBMODULES = ("core", "launch", "pytorch", "keras", "estimator", "experimental")


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        globals()[name] = module
        return module
    if name == "TrialContext":
        from determined._trial_context import TrialContext

        globals()[name] = TrialContext
        return TrialContext
    if name in ("get_cluster_info", "ClusterInfo"):
        from determined import _cluster_info

        value = getattr(_cluster_info, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'determined' has no attribute {name!r}")
