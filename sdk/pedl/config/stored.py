"""Re-reading a config the scheduler stored, possibly accepted by an older pedl with looser rules.

An experiment created before a field was refused (or a rule tightened) must still recover after an
upgrade: that older pedl ignored such fields, so they are dropped and the rest is parsed as usual.
"""

from __future__ import annotations

import copy
from typing import Any

from pedl.config.errors import ConfigError
from pedl.config.experiment import ExperimentConfig, parse_experiment_config
from pedl.config.fields import FIELDS

# Sections older pedl accepted without acting on them, whose rules are now checked.
_IGNORED_BEFORE = ("bind_mounts", "profiling", "optimizations", "log_policies", "tensorboard_storage")


def parse_stored_config(raw: dict[str, Any]) -> ExperimentConfig:
    try:
        return parse_experiment_config(raw)
    except ConfigError:
        cleaned = _drop_unsupported(copy.deepcopy(raw), ())
        for key in _IGNORED_BEFORE:
            cleaned.pop(key, None)
        return parse_experiment_config(cleaned)


def _drop_unsupported(mapping: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    for key in list(mapping):
        dotted = ".".join((*path, str(key)))
        field = FIELDS.get(dotted)
        value = mapping[key]
        by_value = FIELDS.get(f"{dotted}={value}") if isinstance(value, str) else None
        if (field is not None and field.status != "supported") or (
            by_value is not None and by_value.status != "supported"
        ):
            if dotted == "checkpoint_storage.type":
                mapping.clear()  # storage pedl cannot write: the cluster's own store, as a restart would
                return mapping
            del mapping[key]
        elif isinstance(value, dict) and field is not None:
            _drop_unsupported(value, (*path, str(key)))
    return mapping
