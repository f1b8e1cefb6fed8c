"""Experiment configs: parse Determined- and PEDL-format YAML into one validated, typed object.

The names below are imported when first used (PEP 562), so that a light submodule such as
`pedl.config.masking` does not drag in the schema, jsonschema and YAML: the CLI's start time."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pedl.config.entrypoint import Entrypoint, parse_entrypoint
    from pedl.config.errors import ConfigError
    from pedl.config.experiment import ExperimentConfig, parse_experiment_config
    from pedl.config.masking import MASK, mask_secrets

_HOMES = {
    "ConfigError": "errors",
    "Entrypoint": "entrypoint",
    "ExperimentConfig": "experiment",
    "MASK": "masking",
    "mask_secrets": "masking",
    "parse_entrypoint": "entrypoint",
    "parse_experiment_config": "experiment",
}

__all__ = [
    "ConfigError",
    "Entrypoint",
    "ExperimentConfig",
    "MASK",
    "mask_secrets",
    "parse_entrypoint",
    "parse_experiment_config",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
