"""`pedl.experimental.create`: the seed-004 entry point for all three modes."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from pedl.config import ExperimentConfig, parse_experiment_config
from pedl.config.test_mode import test_mode_config
from pedl.experimental._local import LocalExperimentResult, run_local
from pedl.experimental._locate import data_functions, entrypoint_for
from pedl.experimental._submit import submit
from pedl.experimental.client import ExperimentClient
from pedl.model_def import ModelDefinition


def _config(config: str | os.PathLike | dict[str, Any] | None, entrypoint: str) -> ExperimentConfig:
    if config is None:
        raise ValueError("create() needs config: a path to the experiment config, a YAML string or a dict")
    parsed = parse_experiment_config(config)
    for warning in parsed.warnings:  # as `pedl experiment create` prints them
        print(f"warning: {warning}", file=sys.stderr)
    raw = dict(parsed.raw)
    raw["entrypoint"] = entrypoint
    return parse_experiment_config(raw)


def create(
    trial_def: type,
    context_dir: str | os.PathLike = ".",
    config: str | os.PathLike | dict[str, Any] | None = None,
    local: bool = False,
    test: bool = False,
    master: str | None = None,
) -> ExperimentClient | LocalExperimentResult:
    """Submits (`local=False`) or runs here (`local=True`) the experiment of `trial_def`.

    `test=True` runs the minimal loop instead of the full search, raising the user's own
    exception on the first error.
    """
    context = Path(context_dir)
    if not context.is_dir():
        raise FileNotFoundError(f"context_dir {context} is not a directory")
    parsed = _config(config, entrypoint_for(trial_def, context))
    if test:
        parsed = test_mode_config(parsed)
    if not local:
        return submit(parsed, context, master)
    make, download = data_functions(trial_def)
    model_def = ModelDefinition(
        context.resolve(),
        trial_def.__module__,
        trial_def,
        make,
        download,
    )
    return run_local(parsed, model_def, verify_restore=test)
