"""`environment.environment_variables`: the variables every harness process of a trial starts with.

Determined's two forms: a list of `NAME=value` for every trial, or a mapping by device type
(`cpu`, `cuda` — alias `gpu` — and `rocm`) whose list applies to trials on that kind of slot.
Names pedl sets itself (PEDL_*, the distributed-training ranks, CUDA_VISIBLE_DEVICES) are refused,
so a config cannot break the harness's own wiring.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from pedl.config.environment_settings import Environment
from pedl.config.errors import FieldError, FieldPath

DEVICE_TYPES = ("cpu", "cuda", "rocm", "gpu")
RESERVED = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TF_CONFIG",
    "CUDA_VISIBLE_DEVICES",
)


def check_environment_variables(value: Any, path: FieldPath) -> None:
    """The names pedl keeps for itself; the NAME=value form is the schema's."""
    if isinstance(value, dict):
        for key, items in value.items():
            if items is not None:
                _check_list(items, (*path, key))
    else:
        _check_list(value, path)


def _check_list(value: Any, path: FieldPath) -> None:
    for i, item in enumerate(value):
        name = item.partition("=")[0]
        if name in RESERVED or name.startswith("PEDL_"):
            raise FieldError(
                (*path, i), f"{name} is set by pedl for every harness process; pick another name"
            )


@contextlib.contextmanager
def applied(environment: Environment, *, gpu: bool = False) -> Iterator[None]:
    """Local mode runs trials in this process: set the variables for its duration, then restore.
    (An agent's harness processes start with them: `Environment.variables`.)"""
    values = environment.variables(gpu=gpu)
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old
