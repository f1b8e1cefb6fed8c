"""From a trial's description to a ready TrialController: shared by the harness and local mode."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pedl import _trial_context
from pedl.harness.controller import TrialController
from pedl.harness.controllers import create_controller
from pedl.model_def import ModelDefinition, ModelDefinitionError, describe, load_model_definition

T = TypeVar("T")
# Runs a function once on this machine and gives every process of the trial there its result.
OncePerMachine = Callable[[Callable[[], T]], T]


def _call(fn: Callable[[], T]) -> T:
    return fn()


def seed_all(seed: int) -> None:
    """Seeds Python and NumPy, and torch and TensorFlow if imported (never importing them just for this)."""
    import numpy as np

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)
    tensorflow = sys.modules.get("tensorflow")
    if tensorflow is not None:
        # Also fixes the shuffle order of tf.data datasets made without an explicit seed.
        tensorflow.random.set_seed(seed % 2**31)


def build_controller(
    model_def: ModelDefinition,
    experiment_config: dict[str, Any],
    hparams: dict[str, Any],
    once_per_machine: OncePerMachine = _call,
) -> TrialController:
    """Runs download_data (once per machine) and make_data_loaders, then builds the controller."""
    root = model_def.directory
    reproducibility = experiment_config.get("reproducibility") or {}
    _trial_context.set_replay_mismatch(reproducibility.get("replay_mismatch"))
    download = model_def.download_data
    if download is not None:
        what = describe(download, root)
        data_dir = once_per_machine(lambda: download(experiment_config, hparams))
        if not isinstance(data_dir, (str, Path)):
            raise ModelDefinitionError(
                f"{what} must return the data directory as a str, got {type(data_dir).__name__}"
            )
        _trial_context.set_download_data_dir(str(data_dir))
    if model_def.make_data_loaders is None:  # a trial class whose data needs none (EstimatorTrial)
        loaders, origin = None, model_def.trial_class.__qualname__
    else:
        loaders = model_def.make_data_loaders(experiment_config, hparams)
        origin = describe(model_def.make_data_loaders, root)
    return create_controller(model_def.trial_class, hparams, loaders, origin)


def load_for_config(model_definition_dir: Path, experiment_config: dict[str, Any]) -> ModelDefinition:
    """The model definition the config's `entrypoint` names: a Trial class, or a script (the Simple
    Model Definition, `entrypoint: {script: train.py, args: [...]}` or `entrypoint: train.py`)."""
    from pedl.config.entrypoint import parse_entrypoint
    from pedl.config.errors import FieldError

    raw = experiment_config.get("entrypoint")
    try:
        spec = parse_entrypoint(raw)
    except FieldError as e:
        raise ModelDefinitionError(f"invalid experiment config: {e}") from None
    if spec is not None and spec.kind == "script":
        from pedl.simple import script_model_definition

        return script_model_definition(model_definition_dir, spec.script, spec.args)
    if spec is not None and spec.kind == "command":
        raise ModelDefinitionError(
            f"entrypoint {raw!r} is a command, which the PEDL harness does not run; name a Trial class "
            "('<module>:<TrialClass>') or a script ({script: train.py, args: [...]})"
        )
    return load_model_definition(model_definition_dir, raw.strip() if isinstance(raw, str) else None)


def start_trial(
    model_definition_dir: Path,
    experiment_config: dict[str, Any],
    hparams: dict[str, Any],
    seed: int,
    checkpoint_dir: Path | None = None,
    once_per_machine: OncePerMachine = _call,
    before_build: Callable[[ModelDefinition], None] | None = None,
) -> TrialController:
    """Seeds, installs hparams, loads the model definition and restores `checkpoint_dir` if given.

    `before_build` runs once the model definition is imported and before its data or model are
    built (a distributed harness starts TensorFlow's multi-worker runtime there, which must come
    before any TensorFlow op)."""
    seed_all(seed)
    _trial_context.set_hyperparameters(hparams)
    model_def = load_for_config(model_definition_dir, experiment_config)
    if before_build is not None:
        before_build(model_def)
    # Again, now that the model definition has imported its framework (torch is not imported
    # before it is needed, so that starting the harness stays fast).
    seed_all(seed)
    controller = build_controller(model_def, experiment_config, hparams, once_per_machine)
    if checkpoint_dir is not None:
        controller.load(checkpoint_dir)
    return controller
