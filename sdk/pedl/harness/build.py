"""From a trial's description to a ready TrialController: shared by the harness and local mode."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pedl import _trial_context
from pedl.config import Entrypoint, ExperimentConfig
from pedl.harness import model_code, timeline
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

    _trial_context.set_trial_seed(seed)
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
    _trial_context.set_experiment_config(experiment_config)
    root = model_def.directory
    if model_def.package:  # a Trial class (not a script): its checkpoints carry its code
        model_code.record(root, experiment_config)
    else:
        model_code.forget()
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
    controller = create_controller(model_def.trial_class, hparams, loaders, origin)
    _apply_optimizations(controller, experiment_config)
    return controller


# optimizations.* that change training, with their "off" values.
_TRAINING_OPTIMIZATIONS = {"aggregation_frequency": 1, "mixed_precision": "O0", "auto_tf32": False}


def _apply_optimizations(controller: TrialController, experiment_config: dict[str, Any]) -> None:
    """PyTorchTrial honours `optimizations`; other trial types refuse the ones they cannot do."""
    configure = getattr(controller, "configure_optimizations", None)
    if configure is not None:
        from pedl.pytorch._optimizations import TorchOptimizations

        configure(TorchOptimizations.from_config(experiment_config))
        return
    opts = experiment_config.get("optimizations") or {}
    for key, off in _TRAINING_OPTIMIZATIONS.items():
        if opts.get(key) not in (None, off):
            raise ModelDefinitionError(
                f"optimizations.{key} is implemented for PyTorchTrial only; remove it for "
                f"{type(controller).__name__}"
            )


def load_for_config(model_definition_dir: Path, experiment_config: dict[str, Any]) -> ModelDefinition:
    """The model definition a plain config mapping's `entrypoint` names (tools, and checkpoints that
    carry their config); a trial's harness has the parsed entrypoint already (`load_for_spec`)."""
    from pedl.config.entrypoint import parse_entrypoint
    from pedl.config.errors import FieldError

    try:
        spec = parse_entrypoint(experiment_config.get("entrypoint"))
    except FieldError as e:
        raise ModelDefinitionError(f"invalid experiment config: {e}") from None
    return load_for_spec(model_definition_dir, spec, experiment_config)


def load_for_spec(
    model_definition_dir: Path, spec: Entrypoint | None, experiment_config: dict[str, Any]
) -> ModelDefinition:
    """The model definition the entrypoint names: a Trial class, or a script (the Simple Model
    Definition, `entrypoint: {script: train.py, args: [...]}` or `entrypoint: train.py`)."""
    from pedl.harness.compat import ensure_determined_importable

    # Model definitions written for Determined import `determined`; pedl's stands in for a missing one.
    ensure_determined_importable()
    raw = experiment_config.get("entrypoint")
    if spec is not None and spec.kind == "script":
        from pedl.simple import script_model_definition

        return script_model_definition(model_definition_dir, spec.script, spec.args)
    if spec is not None and spec.kind == "command":
        raise ModelDefinitionError(
            f"entrypoint {raw!r} is a command (a Core API script), which runs on a cluster; off one, run "
            "the script itself (det.core.init() then works in dummy mode)"
        )
    mapping = experiment_config.get("entrypoints")
    if isinstance(mapping, dict):
        return _load_pedl011(model_definition_dir, mapping)
    # A Trial class, also one a Determined launcher wraps (`... --trial model_def:MyTrial`).
    return load_model_definition(model_definition_dir, str(spec) if spec is not None else None)


def _load_pedl011(model_definition_dir: Path, mapping: dict[str, Any]) -> ModelDefinition:
    """PEDL 0.11's `entrypoints:` mapping: the trial class and the data functions, each by name."""
    model_def = load_model_definition(
        model_definition_dir,
        mapping["trial_class"],
        data_loaders_function=mapping.get("data_loaders_function"),
        download_data_function=mapping.get("download_data_function"),
    )
    own_data = not getattr(model_def.trial_class, "uses_make_data_loaders", True)
    if own_data and mapping.get("data_loaders_function"):
        raise ModelDefinitionError(
            f"entrypoints.trial_class names {model_def.trial_class.__qualname__}, a "
            f"{model_def.trial_class.framework_interface} that builds its own data loaders: the config mixes "
            "PEDL 0.11's entrypoints mapping with a Determined trial; use entrypoint: '<module>:<TrialClass>'"
        )
    return model_def


def start_trial(
    model_definition_dir: Path,
    config: ExperimentConfig | dict[str, Any],
    hparams: dict[str, Any],
    seed: int,
    checkpoint_dir: Path | None = None,
    once_per_machine: OncePerMachine = _call,
    before_build: Callable[[ModelDefinition], None] | None = None,
    warm_start: bool = False,
) -> TrialController:
    """Seeds, installs hparams, loads the model definition and restores `checkpoint_dir` if given
    (with `warm_start`, only its weights and optimizer state, at batch 0).

    `before_build` runs once the model definition is imported and before its data or model are
    built (a distributed harness starts TensorFlow's multi-worker runtime there, which must come
    before any TensorFlow op)."""
    seed_all(seed)
    _trial_context.set_hyperparameters(hparams)
    with timeline.phase("model definition loaded"):
        if isinstance(config, ExperimentConfig):  # a harness's: its entrypoint is parsed already
            experiment_config = config.raw
            model_def = load_for_spec(model_definition_dir, config.entrypoint_spec, experiment_config)
        else:  # a plain mapping (tools and tests that build a trial by hand)
            experiment_config = config
            model_def = load_for_config(model_definition_dir, experiment_config)
    if before_build is not None:
        before_build(model_def)
    # Again, now that the model definition has imported its framework (torch is not imported
    # before it is needed, so that starting the harness stays fast).
    seed_all(seed)
    with timeline.phase("data loaders and model built"):
        controller = build_controller(model_def, experiment_config, hparams, once_per_machine)
    if checkpoint_dir is not None:
        with timeline.phase("checkpoint restored"):
            if warm_start:
                controller.warm_start(checkpoint_dir)
            else:
                controller.load(checkpoint_dir)
    return controller
