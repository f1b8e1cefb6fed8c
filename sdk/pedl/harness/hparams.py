"""Hyperparameter values with their declared types back.

They travel as a protobuf Struct, where every number is a double, so an int hyperparameter
(`hidden_size: 64`) would reach user code as 64.0 and break `nn.Linear(8, 64.0)`. The
experiment config says which are ints.
"""

from __future__ import annotations

from typing import Any


def _typed(value: Any, spec: Any) -> Any:
    if not isinstance(value, float) or not value.is_integer():
        return value
    if isinstance(spec, dict):
        kind = spec.get("type")
        if kind == "int":
            return int(value)
        if kind == "const":
            spec = spec.get("val")
        elif kind == "categorical":
            for choice in spec.get("vals") or []:
                if not isinstance(choice, bool) and isinstance(choice, int) and choice == value:
                    return choice
            return value
        else:
            return value
    if not isinstance(spec, bool) and isinstance(spec, int):
        return int(value)
    return value


def typed_hparams(values: dict[str, Any], experiment_config: dict[str, Any]) -> dict[str, Any]:
    """`values` with integral floats turned back into ints where the config declares ints."""
    specs = experiment_config.get("hyperparameters") or {}
    if not isinstance(specs, dict):
        return dict(values)
    return {name: _typed(value, specs.get(name)) for name, value in values.items()}
