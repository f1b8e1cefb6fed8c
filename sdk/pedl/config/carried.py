"""The experiment config as it travels between processes: JSON of the parsed, normalised config.

One object everywhere: the scheduler stores `to_json(config)` and sends it to agents in
`StartTrial.config_json`; the harness, local mode and test mode read it back with `from_json`,
through the same parser as the CLI and the scheduler. Parsing a parsed config gives the same config,
so every process sees the defaults, aliases and lengths the scheduler filled in; a config that does
not parse stops the trial at its start with a line naming the field.
"""

from __future__ import annotations

import json

from pedl.config.errors import ConfigError
from pedl.config.experiment import ExperimentConfig, parse_experiment_config

FIELD = "config_json"


def to_json(config: ExperimentConfig) -> str:
    """The effective config (secrets unmasked: trials need them) as compact JSON."""
    return json.dumps(config.raw, separators=(",", ":"))


def from_json(text: str, *, source: str = FIELD) -> ExperimentConfig:
    """Loads a config written by `to_json`; ConfigError names `source` and the field that is wrong."""
    if not text:
        raise ConfigError("is empty (no experiment config arrived)", filename=source)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"not valid JSON: {exc.msg} (column {exc.colno})", line=exc.lineno, filename=source
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"must be a JSON object, got {type(data).__name__}", filename=source)
    try:
        return parse_experiment_config(data)
    except ConfigError as exc:
        raise ConfigError(exc.message, path=exc.path, filename=source) from None


def carried(config: ExperimentConfig) -> ExperimentConfig:
    """The config as a harness started by the scheduler would see it (local and test mode use this)."""
    return from_json(to_json(config))
