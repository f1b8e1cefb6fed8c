"""`environment.environment_variables`: the variables every harness process of a trial starts with.

Determined's two forms: a list of `NAME=value` for every trial, or a mapping by device type
(`cpu`, `cuda` — alias `gpu` — and `rocm`) whose list applies to trials on that kind of slot.
Names pedl sets itself (PEDL_*, the distributed-training ranks, CUDA_VISIBLE_DEVICES) are refused,
so a config cannot break the harness's own wiring.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from typing import Any

from pedl.config._checks import check_keys, describe, expect_str_list
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
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_environment_variables(value: Any, path: FieldPath) -> None:
    if isinstance(value, dict):
        check_keys(value, path, DEVICE_TYPES)
        for key, items in value.items():
            if items is not None:
                _check_list(items, (*path, key))
    else:
        _check_list(value, path)


def _check_list(value: Any, path: FieldPath) -> None:
    for i, item in enumerate(expect_str_list(value, path)):
        name, eq, _ = item.partition("=")
        if not eq or not _NAME.match(name):
            raise FieldError((*path, i), f"expected NAME=value, got {describe(item)}")
        if name in RESERVED or name.startswith("PEDL_"):
            raise FieldError(
                (*path, i), f"{name} is set by pedl for every harness process; pick another name"
            )


def trial_variables(config: dict[str, Any], *, gpu: bool) -> dict[str, str]:
    """The variables for a trial on GPU slots (`gpu`) or CPU slots, later entries winning."""
    env = config.get("environment")
    value = env.get("environment_variables") if isinstance(env, dict) else None
    if isinstance(value, dict):
        keys = ("cuda", "gpu") if gpu else ("cpu",)
        items = [item for key in keys for item in value.get(key) or []]
    else:
        items = list(value or [])
    out: dict[str, str] = {}
    for item in items:
        name, _, val = str(item).partition("=")
        out[name] = val
    return out


def trial_variables_from_text(config_json: str, *, gpu: bool) -> dict[str, str]:
    """As trial_variables, for the config as the agent receives it (StartTrial.config_json); none for
    JSON that does not load: the harness then refuses the config, naming what is wrong."""
    try:
        config = json.loads(config_json) if config_json else None
    except ValueError:
        return {}
    return trial_variables(config, gpu=gpu) if isinstance(config, dict) else {}


@contextlib.contextmanager
def applied(config: dict[str, Any], *, gpu: bool = False) -> Iterator[None]:
    """Local mode runs trials in this process: set the variables for its duration, then restore."""
    values = trial_variables(config, gpu=gpu)
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
