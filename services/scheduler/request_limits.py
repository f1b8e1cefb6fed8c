"""What one request may ask of the scheduler: the sizes and counts an experiment may have.

Unbounded, a single careless or hostile request stalls the scheduler for everyone (a 5 MB
description parsed and stored, a 50,000-trial search that every `describe` walks) or asks for what
never ends (a step of 2**63 batches, which pause cannot interrupt). Each limit has a default an
operator raises with the scheduler flag named in its refusal; a refused create writes nothing.
The README's "Limits" table lists them; tests/unit/scheduler/test_request_limits.py tests each.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, fields
from typing import Any

from pedl.config.hyperparameters import HP_TYPES


class LimitExceeded(ValueError):
    """One line naming the limit and the flag that raises it."""


@dataclass(frozen=True)
class RequestLimits:
    max_config_bytes: int = 1024 * 1024
    max_description_length: int = 4096
    max_name_length: int = 256
    max_label_length: int = 255
    max_labels: int = 100
    max_hyperparameters: int = 1000
    max_trials: int = 10_000
    max_batches_per_step: int = 1_000_000
    # Any length in batches (searcher max_length / max_steps, budgets, validation and checkpoint
    # periods): far below int64, and a trial of this many batches still ends in human time.
    max_length_batches: int = 10**12

    # ---- before the config is parsed --------------------------------------------------------

    def check_config_size(self, config_yaml: str) -> None:
        size = len(config_yaml.encode("utf-8", errors="surrogatepass"))
        if size > self.max_config_bytes:
            what = f"the experiment config is {_bytes(size)}"
            raise _exceeded(what, "max_config_bytes", self.max_config_bytes)

    # ---- on the parsed config ---------------------------------------------------------------

    def check_config(self, config: Any) -> None:
        """`config`: a pedl.config.ExperimentConfig."""
        raw = config.raw
        self.check_text(raw.get("description") or "", "description", "max_description_length")
        self.check_text(raw.get("name") or "", "name", "max_name_length")
        self.check_labels(raw.get("labels") or [])
        count = count_hyperparameters(raw.get("hyperparameters") or {})
        if count > self.max_hyperparameters:
            what = f"the config has {count} hyperparameters"
            raise _exceeded(what, "max_hyperparameters", self.max_hyperparameters)
        trials, what = trial_count(config)
        if trials is not None and trials > self.max_trials:
            raise _exceeded(f"{what} is {trials}", "max_trials", self.max_trials)
        bps = int(raw.get("batches_per_step") or 0)
        if bps > self.max_batches_per_step:
            raise _exceeded(f"batches_per_step is {bps}", "max_batches_per_step", self.max_batches_per_step)
        for what, batches in (
            ("the searcher's length", config.max_length_batches),
            ("the searcher's budget", config.budget_batches),
            ("min_validation_period", config.min_validation_period_batches),
            ("min_checkpoint_period", config.min_checkpoint_period_batches),
        ):
            if batches is not None and batches > self.max_length_batches:
                raise _exceeded(f"{what} is {batches} batches", "max_length_batches", self.max_length_batches)

    def check_text(self, value: str, field: str, limit_name: str) -> None:
        limit = getattr(self, limit_name)
        if len(value) > limit:
            raise _exceeded(f"the {field} is {len(value)} characters long", limit_name, limit)

    def check_labels(self, labels: Any) -> None:
        if not isinstance(labels, (list, tuple)):
            return  # the config's own validation names a wrong type
        if len(labels) > self.max_labels:
            raise _exceeded(f"the experiment has {len(labels)} labels", "max_labels", self.max_labels)
        for label in labels:
            if isinstance(label, str) and len(label) > self.max_label_length:
                raise _exceeded(
                    f"the label {label[:40]!r}... is {len(label)} characters long",
                    "max_label_length",
                    self.max_label_length,
                )

    # ---- flags ------------------------------------------------------------------------------

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        defaults = RequestLimits()
        group = parser.add_argument_group("request limits (a create over one is refused, naming it)")
        for f in fields(RequestLimits):
            flag = _flag(f.name)
            env = f"PEDL_SCHEDULER_{f.name.upper()}"
            group.add_argument(
                flag,
                type=int,
                default=int(os.environ.get(env, getattr(defaults, f.name))),
                metavar="N",
                help=f"{_HELP[f.name]} (default {getattr(defaults, f.name)}; env {env})",
            )

    @staticmethod
    def from_args(args: argparse.Namespace) -> RequestLimits:
        values = {f.name: getattr(args, f.name) for f in fields(RequestLimits)}
        for name, value in values.items():
            if value < 1:
                raise LimitExceeded(f"{_flag(name)} must be at least 1, got {value}")
        return RequestLimits(**values)


_HELP = {
    "max_config_bytes": "largest experiment config, in bytes",
    "max_description_length": "longest experiment description, in characters",
    "max_name_length": "longest experiment name, in characters",
    "max_label_length": "longest experiment label, in characters",
    "max_labels": "most labels on one experiment",
    "max_hyperparameters": "most hyperparameters in one config (nested ones counted one by one)",
    "max_trials": "most trials one experiment's searcher may create (max_trials, grid points, PBT)",
    "max_batches_per_step": "largest batches_per_step",
    "max_length_batches": "longest searcher length, budget or period, in batches",
}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _bytes(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n} bytes"


def _exceeded(what: str, name: str, limit: int) -> LimitExceeded:
    shown = _bytes(limit) if name == "max_config_bytes" else str(limit)
    return LimitExceeded(f"{what}, over the scheduler's limit of {shown} ({_flag(name)} raises it)")


def _is_leaf(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("type"), str) and value["type"] in HP_TYPES


def _leaves(space: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for value in space.values():
        if _is_leaf(value):
            out.append(value)
        elif isinstance(value, dict):
            out.extend(_leaves(value))
        else:
            out.append({"type": "const", "val": value})
    return out


def count_hyperparameters(space: dict[str, Any]) -> int:
    return len(_leaves(space))


def _grid_axis_size(leaf: dict[str, Any]) -> int:
    kind = leaf["type"]
    if kind == "const":
        return 1
    if kind == "categorical":
        return len(leaf.get("vals") or [])
    count = int(leaf.get("count") or 1)
    if kind == "int":
        return max(1, min(count, int(leaf["maxval"]) - int(leaf["minval"]) + 1))
    return count


def trial_count(config: Any) -> tuple[int | None, str]:
    """How many trials the searcher of `config` (a pedl.config.ExperimentConfig) may create, without
    creating them, and what says so."""
    searcher = config.searcher
    if searcher.name == "grid":
        total = 1
        for leaf in _leaves(config.hyperparameters):
            total *= _grid_axis_size(leaf)
        return total, "the grid's number of points"
    if searcher.name == "pbt":
        return searcher.population_size * max(searcher.num_rounds, 1), "population_size x num_rounds"
    if searcher.max_trials is not None:
        return searcher.max_trials, "searcher.max_trials"
    return None, ""
