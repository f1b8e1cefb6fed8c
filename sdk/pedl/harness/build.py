"""From a trial's description to a ready TrialController: shared by the harness and local mode."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

from pedl import _trial_context
from pedl.harness.controller import TrialController
from pedl.model_def import ModelDefinition, ModelDefinitionError, describe, load_model_definition


def seed_all(seed: int) -> None:
    """Seeds Python and NumPy, and torch if it is imported (never importing it just for this)."""
    import numpy as np

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)


def build_controller(
    model_def: ModelDefinition, experiment_config: dict[str, Any], hparams: dict[str, Any]
) -> TrialController:
    """Runs download_data and make_data_loaders, then builds the framework's controller."""
    root = model_def.directory
    if model_def.download_data is not None:
        what = describe(model_def.download_data, root)
        data_dir = model_def.download_data(experiment_config, hparams)
        if not isinstance(data_dir, (str, Path)):
            raise ModelDefinitionError(
                f"{what} must return the data directory as a str, got {type(data_dir).__name__}"
            )
        _trial_context.set_download_data_dir(str(data_dir))
    loaders = model_def.make_data_loaders(experiment_config, hparams)
    origin = describe(model_def.make_data_loaders, root)
    return model_def.trial_class.create_controller(hparams, loaders, origin)


def start_trial(
    model_definition_dir: Path,
    experiment_config: dict[str, Any],
    hparams: dict[str, Any],
    seed: int,
    checkpoint_dir: Path | None = None,
) -> TrialController:
    """Seeds, installs hparams, loads the model definition and restores `checkpoint_dir` if given."""
    seed_all(seed)
    _trial_context.set_hyperparameters(hparams)
    entrypoint = experiment_config.get("entrypoint")
    if entrypoint is not None and not isinstance(entrypoint, str):
        raise ModelDefinitionError(
            f"config field 'entrypoint' must be a string, got {type(entrypoint).__name__}"
        )
    model_def = load_model_definition(model_definition_dir, entrypoint or None)
    # Again, now that the model definition has imported its framework (torch is not imported
    # before it is needed, so that starting the harness stays fast).
    seed_all(seed)
    controller = build_controller(model_def, experiment_config, hparams)
    if checkpoint_dir is not None:
        controller.load(checkpoint_dir)
    return controller
