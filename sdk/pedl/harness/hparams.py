"""Hyperparameter values with their declared types back.

They travel as a protobuf Struct, where every number is a double, so an int hyperparameter
(`hidden_size: 64`) would reach user code as 64.0 and break `nn.Linear(8, 64.0)`, and a const list
of actions (`level: 20`) would break `logging.log(20.0, ...)`. The experiment config says which are
ints: `int` ranges, and the literals of consts, categoricals and nested hyperparameters, at any depth.
The one place this is decided: the harness, the SDK, the CLI and the web UI all call it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def typed_hparams(values: Mapping[str, Any], experiment_config: Mapping[str, Any]) -> dict[str, Any]:
    """`values` with integral floats turned back into ints where the config declares ints."""
    return typed_values(values, experiment_config.get("hyperparameters"))


def typed_values(values: Mapping[str, Any], space: Any) -> dict[str, Any]:
    """`values` typed by the config's hyperparameter `space` (its `hyperparameters:` mapping)."""
    space = space if isinstance(space, Mapping) else {}
    return {name: _typed(value, space.get(name)) for name, value in values.items()}


def _typed(value: Any, spec: Any) -> Any:
    if isinstance(spec, Mapping) and isinstance(spec.get("type"), str):
        kind = spec["type"]
        if kind == "int":
            return _as_int(value)
        if kind == "const":
            return _like(value, spec.get("val"))
        if kind == "categorical":
            for candidate in spec.get("vals") or ():
                if _equal(value, candidate):
                    return candidate
        return value
    if isinstance(value, Mapping):
        return typed_values(value, spec) if isinstance(spec, Mapping) else dict(value)
    return _like(value, spec)


def _like(value: Any, example: Any) -> Any:
    """`value` with ints where the config's literal `example` has them, inside lists and mappings too."""
    if isinstance(value, list) and isinstance(example, list) and len(value) == len(example):
        return [_like(v, e) for v, e in zip(value, example, strict=True)]
    if isinstance(value, Mapping) and isinstance(example, Mapping):
        return {k: _like(v, example.get(k)) for k, v in value.items()}
    if isinstance(example, bool) or not isinstance(example, int):
        return value
    return _as_int(value)


def _as_int(value: Any) -> Any:
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def _equal(value: Any, candidate: Any) -> bool:
    if isinstance(candidate, bool) or isinstance(value, bool):
        return value is candidate
    return bool(value == candidate)
