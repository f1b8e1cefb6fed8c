"""The experiment config as it travels between processes: a versioned JSON document with one decoder.

The scheduler parses the user's YAML once (`parse_experiment_config`) and sends agents and harnesses
`to_json(config)` in `StartTrial.config_json`: the normalised config plus what parsing derived from it
(trial length and unit, validation and checkpoint periods, the adaptive budget, the entrypoint, the
warnings). `from_json` is the one decoder: it rebuilds the same `ExperimentConfig` from those values
without parsing or deriving anything again (it only checks the config against pedl's JSON Schema, so a
document damaged on its way is refused naming the field), so an agent, a harness, local mode and test
mode all see exactly what the scheduler decided. A document without a version (an older scheduler's
plain config) is parsed as such; one from a newer pedl is refused naming the version.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from typing import Any

from pedl.config.entrypoint import Entrypoint
from pedl.config.environment_settings import Environment
from pedl.config.errors import ConfigError, FieldError, format_path
from pedl.config.experiment import ExperimentConfig, parse_experiment_config
from pedl.config.lengths import Length
from pedl.config.masking import mask_secrets
from pedl.config.schema_errors import check_schema
from pedl.config.searcher_settings import SearcherSettings
from pedl.config.storage_settings import CheckpointStorage

FIELD = "config_json"
VERSION = 1

# How many documents this process decoded; tests read it to show a config is decoded once per process.
decoded = 0


def to_json(config: ExperimentConfig) -> str:
    """The effective config (secrets unmasked: trials need them) and its derived values, as compact JSON."""
    entrypoint = config.entrypoint_spec
    document = {
        "version": VERSION,
        "config": config.raw,
        "max_length": config.max_length,
        "length_unit": config.length_unit,
        "min_validation_period": asdict(config.min_validation_period),
        "min_checkpoint_period": asdict(config.min_checkpoint_period),
        "budget": config.budget,
        "entrypoint": asdict(entrypoint) if entrypoint is not None else None,
        "warnings": list(config.warnings),
    }
    return json.dumps(document, separators=(",", ":"))


def masked_json(config: ExperimentConfig) -> str:
    """The document with secrets masked, for showing to people (`Experiment.config_document`, read by
    the web UI); it decodes like any other (a masked value is still a string where one is allowed)."""
    return to_json(replace(config, raw=mask_secrets(config.raw)))


def stored_json(config: ExperimentConfig) -> str:
    """The config alone, as the scheduler's database keeps it (listings read its fields)."""
    return json.dumps(config.raw, separators=(",", ":"))


def from_json(text: str, *, source: str = FIELD) -> ExperimentConfig:
    """Decodes a document written by `to_json`; ConfigError names `source` and what is wrong."""
    global decoded
    decoded += 1
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
    if "version" not in data:
        return _legacy(data, source)
    if data["version"] != VERSION:
        raise ConfigError(
            f"is version {data['version']!r} of the config document; this pedl reads version {VERSION} "
            "(run the same pedl version on the scheduler, agents and trials)",
            filename=source,
        )
    try:
        check_schema(data.get("config"))
    except FieldError as exc:
        raise ConfigError(exc.message, path=format_path(exc.path), filename=source) from None
    try:
        return _decode(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"is not a complete config document ({exc!r} is wrong)", filename=source) from None


def _decode(data: dict[str, Any]) -> ExperimentConfig:
    raw = data["config"]
    if not isinstance(raw, dict):
        raise TypeError("config")
    entrypoint = data["entrypoint"]
    return ExperimentConfig(
        raw=raw,
        max_length=int(data["max_length"]),
        length_unit=str(data["length_unit"]),
        min_validation_period=Length(**data["min_validation_period"]),
        min_checkpoint_period=Length(**data["min_checkpoint_period"]),
        budget=data["budget"],
        entrypoint_spec=_entrypoint(entrypoint) if entrypoint is not None else None,
        searcher=SearcherSettings.of(raw["searcher"]),
        checkpoint_storage=CheckpointStorage.of(raw["checkpoint_storage"]),
        environment=Environment.of(raw.get("environment")),
        warnings=tuple(data["warnings"]),
    )


def _entrypoint(data: dict[str, Any]) -> Entrypoint:
    return Entrypoint(
        kind=data["kind"],
        module=data["module"],
        object_ref=data["object_ref"],
        script=data["script"],
        args=tuple(data["args"]),
        command=tuple(data["command"]),
        shell=str(data.get("shell", "")),
    )


def _legacy(data: dict[str, Any], source: str) -> ExperimentConfig:
    """A plain config (an older scheduler's StartTrial): parsed, its errors naming `source`."""
    try:
        return parse_experiment_config(data)
    except ConfigError as exc:
        raise ConfigError(exc.message, path=exc.path, filename=source) from None


def carried(config: ExperimentConfig) -> ExperimentConfig:
    """The config as a harness started by the scheduler would see it (local and test mode use this)."""
    return from_json(to_json(config))
