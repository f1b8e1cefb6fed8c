"""The experiment config: parse once, validate every field, fill defaults, expose typed values.

`ExperimentConfig.raw` is what user code receives as `experiment_config`; parsing it again gives
the same config, so it can be stored and reloaded (`parse_experiment_config(config.raw)`).
Bare integers for `min_validation_period` / `min_checkpoint_period` count steps of `batches_per_step`
(PEDL's format; Determined writes `{batches: N}`); a bare `max_length` counts batches. Lengths only
a trial can convert (`pedl.config.lengths`) keep their unit: the searcher then counts in it.
"""

from __future__ import annotations

import copy
import functools
import os
from dataclasses import dataclass
from typing import Any, Union

from pedl.config import sections, storage, yaml12
from pedl.config._checks import (
    describe,
    is_int,
)
from pedl.config._source import load_source
from pedl.config.entrypoint import Entrypoint, parse_config_entrypoint
from pedl.config.environment_settings import Environment
from pedl.config.errors import ConfigError, FieldError, FieldPath, format_path
from pedl.config.hyperparameters import check_grid, const_value, normalize_space
from pedl.config.lengths import Length, LengthContext, TrialLengths, resolve_length, trial_batch_size
from pedl.config.log_policies import validate_log_policies
from pedl.config.masking import mask_secrets
from pedl.config.policy import apply_field_policy, drop_nulls
from pedl.config.resources import Resources
from pedl.config.schema_errors import check_schema
from pedl.config.searcher import check_searcher_for_entrypoint, searcher_budget, validate_searcher
from pedl.config.searcher_settings import SearcherSettings
from pedl.config.storage_settings import CheckpointStorage

ConfigSource = Union[str, bytes, dict, "os.PathLike[str]"]

DEFAULT_BATCHES_PER_STEP = 100
DEFAULT_MAX_RESTARTS = 5


@dataclass(frozen=True)
class ExperimentConfig:
    raw: dict[str, Any]
    # The trial length the searcher works with, in `length_unit`: batches, or records or epochs when
    # only each trial can count them in batches (its sequencer converts; `pedl.config.lengths`).
    max_length: int
    min_validation_period: Length
    min_checkpoint_period: Length
    budget: int | None  # the adaptive searcher's, in `length_unit`
    entrypoint_spec: Entrypoint | None
    searcher: SearcherSettings  # typed once where the config is parsed; raw["searcher"] as written
    checkpoint_storage: CheckpointStorage  # likewise; raw["checkpoint_storage"] as written
    environment: Environment  # likewise; raw["environment"] as written (a name or a mapping)
    # Fields accepted that have no effect in pedl (fields.FIELDS status "warn"); `create` prints them.
    warnings: tuple[str, ...] = ()

    length_unit: str = "batches"

    @property
    def max_length_batches(self) -> int | None:
        """The trial length in batches where the config decides it (None: each trial converts)."""
        return self.max_length if self.length_unit == "batches" else None

    @property
    def min_validation_period_batches(self) -> int | None:
        p = self.min_validation_period
        return p.amount if p.unit == "batches" else None

    @property
    def min_checkpoint_period_batches(self) -> int | None:
        p = self.min_checkpoint_period
        return p.amount if p.unit == "batches" else None

    @property
    def budget_batches(self) -> int | None:
        return self.budget if self.length_unit == "batches" else None

    def trial_length_batches(self, hparams: dict[str, Any], epoch_batches: int = 0) -> int | None:
        """One trial's length in batches as its sequencer counts it (records by its own
        global_batch_size, epochs by records_per_epoch or the epoch its harness measured); None for an
        open-ended trial or a length in epochs not measured yet."""
        if not self.max_length:
            return None
        lengths = TrialLengths(trial_batch_size(hparams), self.records_per_epoch or 0, epoch_batches)
        if not lengths.known(self.length_unit):
            return None
        return lengths.to_batches(self.max_length, self.length_unit)

    @property
    def max_trials(self) -> int | None:
        """The searcher's planned number of trials, where it has one."""
        return self.searcher.max_trials

    @property
    def resource_pool(self) -> str:
        return self.resources.resource_pool or "default"

    @property
    def needs_trial_epoch_length(self) -> bool:
        """Some length is in epochs that only the trial's training data loader can measure."""
        units = (self.length_unit, self.min_validation_period.unit, self.min_checkpoint_period.unit)
        by_records = bool(self.records_per_epoch) and _has_int_batch_size(self.hyperparameters)
        return "epochs" in units and not by_records

    @property
    def script_length_unit(self) -> str:
        """The unit a Core API script counts its searcher lengths in: searcher.max_length's, as written."""
        return self.searcher.written_length_unit

    def describe_lengths(self) -> list[str]:
        """The lengths as the trials count them, for `describe` (records and epochs each trial converts)."""
        command = self.entrypoint_spec is not None and self.entrypoint_spec.kind == "command"
        if command:
            unit = self.script_length_unit
            return (
                [f"max_length {_amount(self.max_length, unit)}, counted by the script"]
                if self.max_length
                else []
            )
        out = [f"max_length {_amount(self.max_length, self.length_unit)}"] if self.max_length else []
        for key, value in (
            ("min_validation_period", self.min_validation_period),
            ("min_checkpoint_period", self.min_checkpoint_period),
        ):
            if value.amount:
                out.append(f"{key} {_amount(value.amount, value.unit)}")
        if self.needs_trial_epoch_length:
            out.append("an epoch is each trial's training data loader's length, measured when it starts")
        return out

    @property
    def description(self) -> str:
        return self.raw.get("description") or ""

    @property
    def name(self) -> str | None:
        return self.raw.get("name")

    @property
    def data(self) -> dict[str, Any]:
        return self.raw["data"]

    @property
    def hyperparameters(self) -> dict[str, Any]:
        return self.raw["hyperparameters"]

    @property
    def searcher_name(self) -> str:
        return self.searcher.name

    @property
    def searcher_metric(self) -> str:
        return self.searcher.metric

    @property
    def smaller_is_better(self) -> bool:
        return self.searcher.smaller_is_better

    @property
    def batches_per_step(self) -> int:
        return self.raw["batches_per_step"]

    @functools.cached_property
    def resources(self) -> Resources:
        """Typed once per config (a changed config is a new object: `pedl.config.changes`)."""
        return Resources.of(self.raw["resources"])

    @property
    def slots_per_trial(self) -> int:
        return self.resources.slots_per_trial

    @property
    def max_restarts(self) -> int:
        return self.raw["max_restarts"]

    @property
    def checkpoint_policy(self) -> str:
        """`best` when the config leaves it out: Determined's default (a checkpoint after every
        validation better than all earlier ones of the experiment)."""
        return self.raw.get("checkpoint_policy") or "best"

    @property
    def entrypoint(self) -> str | dict[str, Any] | list[str] | None:
        """The raw field; for PEDL 0.11's `entrypoints:` mapping, its trial_class."""
        if self.raw.get("entrypoints") is not None:
            return self.raw["entrypoints"]["trial_class"]
        return self.raw.get("entrypoint")

    @property
    def environment_name(self) -> str | None:
        return self.environment.name

    @property
    def experiment_seed(self) -> int | None:
        return (self.raw.get("reproducibility") or {}).get("experiment_seed")

    @property
    def bind_mounts(self) -> list[dict[str, Any]]:
        """The mounts, as validated at create (`sections.validate_bind_mounts`)."""
        return list(self.raw.get("bind_mounts") or [])

    @property
    def records_per_epoch(self) -> int | None:
        return self.raw.get("records_per_epoch") or None

    def masked(self) -> dict[str, Any]:
        """The config with secrets replaced by "********", for showing to users."""
        return mask_secrets(self.raw)

    def masked_yaml(self) -> str:
        return yaml12.dump(self.masked())


def parse_experiment_config(source: ConfigSource, *, filename: str | None = None) -> ExperimentConfig:
    """Parse and validate a config from a file path, YAML text/bytes, or a mapping.

    Raises ConfigError naming the field (and file/line for YAML) on any problem.
    """
    src = load_source(source, filename)
    try:
        return _build(src.data)
    except FieldError as e:
        raise ConfigError(
            e.message, path=format_path(e.path), line=src.line_for(e.path), filename=src.filename
        ) from None


def _build(data: Any) -> ExperimentConfig:
    if not isinstance(data, dict):
        raise FieldError((), f"the top level of the config must be a mapping, got {describe(data)}")
    raw = copy.deepcopy(data)
    _check_json(raw, ())
    raw = drop_nulls(raw)
    warnings = apply_field_policy(raw)
    check_schema(raw)
    raw["data"] = {} if raw.get("data") is None else raw["data"]
    raw["hyperparameters"] = normalize_space(raw.get("hyperparameters"))
    raw["batches_per_step"] = _batches_per_step(raw)
    entrypoint = parse_config_entrypoint(raw)
    ctx = LengthContext(
        batches_per_step=raw["batches_per_step"],
        global_batch_size=_global_batch_size(raw["hyperparameters"]),
        records_per_epoch=raw.get("records_per_epoch") or None,
        batch_size_per_trial=_has_int_batch_size(raw["hyperparameters"]),
        command=entrypoint is not None and entrypoint.kind == "command",
    )
    raw["searcher"], max_length = validate_searcher(raw["searcher"], ctx)
    if raw["searcher"]["name"] == "grid":
        check_grid(raw["hyperparameters"])
    periods = {
        key: _period(raw.get(key), key, ctx) for key in ("min_validation_period", "min_checkpoint_period")
    }
    raw["checkpoint_storage"] = storage.validate_checkpoint_storage(raw.get("checkpoint_storage"))
    raw["resources"] = sections.validate_resources(raw.get("resources"))
    raw.setdefault("max_restarts", DEFAULT_MAX_RESTARTS)
    check_searcher_for_entrypoint(
        raw["searcher"],
        max_length.amount,
        ctx.command,
        periods["min_checkpoint_period"].amount,
    )
    _validate_optional_sections(raw)
    budget = searcher_budget(raw["searcher"], ctx)
    return ExperimentConfig(
        raw=raw,
        max_length=max_length.amount,
        min_validation_period=periods["min_validation_period"],
        min_checkpoint_period=periods["min_checkpoint_period"],
        budget=budget.amount if budget is not None else None,
        entrypoint_spec=entrypoint,
        searcher=SearcherSettings.of(raw["searcher"]),
        checkpoint_storage=CheckpointStorage.of(raw["checkpoint_storage"]),
        environment=Environment.of(raw.get("environment")),
        warnings=tuple(warnings),
        length_unit=max_length.unit,
    )


def _validate_optional_sections(raw: dict[str, Any]) -> None:
    if raw.get("environment") is not None:
        raw["environment"] = sections.validate_environment(raw["environment"])
    if raw.get("bind_mounts") is not None:
        raw["bind_mounts"] = sections.validate_bind_mounts(raw["bind_mounts"])
    if raw.get("profiling") is not None:
        sections.check_profiling(raw["profiling"])
    if "log_policies" in raw:
        raw["log_policies"] = validate_log_policies(raw["log_policies"])


def _batches_per_step(raw: dict[str, Any]) -> int:
    """`scheduling_unit` is Determined's name for `batches_per_step`; both may be given if equal."""
    bps = raw.get("batches_per_step")
    unit = raw.get("scheduling_unit")
    if bps is not None and unit is not None and bps != unit:
        raise FieldError(
            ("scheduling_unit",), f"is an alias of batches_per_step but differs ({unit} != {bps})"
        )
    return bps if bps is not None else unit if unit is not None else DEFAULT_BATCHES_PER_STEP


def _global_batch_size(space: dict[str, Any]) -> int | None:
    value = const_value(space, "global_batch_size")
    if value is None:
        return None
    if not is_int(value) or value < 1:
        raise FieldError(
            ("hyperparameters", "global_batch_size"), f"expected a positive integer, got {describe(value)}"
        )
    return value


def _check_json(value: Any, path: FieldPath) -> None:
    """Reject values that cannot travel as JSON (only possible when a dict is passed in)."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, (str, int, float, bool)) and k is not None:
                raise FieldError(path, f"keys must be strings, got {describe(k)}")
            _check_json(v, (*path, k if isinstance(k, str) else str(k)))
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_json(v, (*path, i))
        return
    raise FieldError(path, f"cannot be stored as JSON: {describe(value)}")


def _period(value: Any, key: str, ctx: LengthContext) -> Length:
    """A bare integer is PEDL's count of steps; a mapping is Determined's `{batches|records|epochs: N}`."""
    if value is None:
        return Length(0)
    if is_int(value):
        return Length(value * ctx.batches_per_step)
    return resolve_length(value, (key,), ctx, allow_zero=True)


def _amount(amount: int, unit: str) -> str:
    return f"{amount} {unit.removesuffix('es' if unit == 'batches' else 's') if amount == 1 else unit}"


def _has_int_batch_size(space: dict[str, Any]) -> bool:
    """Every trial gets an integer `global_batch_size`: const, int, or categorical of integers."""
    leaf = space.get("global_batch_size")
    if not isinstance(leaf, dict):
        return False
    kind = leaf.get("type")
    if kind == "const":
        return is_int(leaf.get("val"))
    if kind == "int":
        return True
    if kind == "categorical":
        return all(is_int(v) and v > 0 for v in leaf.get("vals") or ())
    return False
