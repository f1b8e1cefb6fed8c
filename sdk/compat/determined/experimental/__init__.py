"""`det.experimental.create(trial_def=MyTrial, context_dir=".")`: pedl.experimental.create under
Determined's name (the seed document on the Trial API)."""

from __future__ import annotations

import os
from typing import Any

from determined.experimental import client
from determined.experimental.client import Determined
from pedl.experimental import Checkpoint, ExperimentClient, LocalExperimentResult, get_experiment
from pedl.experimental import create as _pedl_create


def create(
    trial_def: type,
    config: str | os.PathLike | dict[str, Any] | None = None,
    mode: Any = None,
    context_dir: str | os.PathLike = ".",
    local: bool = False,
    test: bool = False,
    master: str | None = None,
    **unsupported: Any,
) -> ExperimentClient | LocalExperimentResult:
    """Submits (`local=False`) or runs here (`local=True`) the experiment of `trial_def`;
    `test=True` runs the minimal loop (a few batches, a validation, a checkpoint restored)."""
    if unsupported:
        raise TypeError(
            "det.experimental.create(): pedl does not support the argument(s) "
            + ", ".join(sorted(unsupported))
        )
    if mode is not None:
        # Determined 0.12's Mode enum: CLUSTER, LOCAL, TEST.
        name = str(getattr(mode, "value", mode)).lower()
        if name not in ("cluster", "local", "test"):
            raise ValueError(f"det.experimental.create(): unknown mode {mode!r} (cluster, local or test)")
        local, test = name != "cluster", name == "test" or test
    return _pedl_create(
        trial_def, context_dir=context_dir, config=config, local=local, test=test, master=master
    )


__all__ = [
    "Checkpoint",
    "Determined",
    "ExperimentClient",
    "LocalExperimentResult",
    "client",
    "create",
    "get_experiment",
]
