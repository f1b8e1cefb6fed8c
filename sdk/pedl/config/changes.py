"""Changing a parsed config's settings that nothing derived depends on, without parsing it again.

PatchExperiment renames an experiment, changes its share of the cluster (`resources.max_slots`,
`weight`, `priority`) and its checkpoint GC policy (`checkpoint_storage.save_*`). None of these feed
the trial length, the periods, the searcher's budget or the entrypoint, so the scheduler keeps the
typed config it holds and replaces only those sections, checked against pedl's JSON Schema as at
creation (errors name the field, as `create`'s do).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pedl.config.errors import ConfigError, FieldError, format_path
from pedl.config.experiment import ExperimentConfig
from pedl.config.schema_errors import check_schema
from pedl.config.storage_settings import CheckpointStorage

# The top-level keys a change may touch: none of them is an input of a derived value.
CHANGEABLE = frozenset({"name", "resources", "checkpoint_storage"})


def with_changes(config: ExperimentConfig, change: Callable[[dict[str, Any]], None]) -> ExperimentConfig:
    """`config` with `change` applied to a copy of its changeable sections; ConfigError names the
    field a changed value breaks. `change` may set or remove keys of `name`, `resources` and
    `checkpoint_storage` only (ValueError otherwise: the derived values would be stale)."""
    sections = {key: copy.deepcopy(config.raw[key]) for key in CHANGEABLE if key in config.raw}
    change(sections)
    stray = set(sections) - CHANGEABLE
    if stray:
        raise ValueError(f"{sorted(stray)} cannot change without parsing the config again")
    raw = {key: value for key, value in config.raw.items() if key not in CHANGEABLE} | sections
    try:
        check_schema(raw)
    except FieldError as exc:
        raise ConfigError(exc.message, path=format_path(exc.path)) from None
    # The typed sections a change may touch are built again; the others stay the same objects.
    return replace(config, raw=raw, checkpoint_storage=CheckpointStorage.of(raw["checkpoint_storage"]))
