"""A downloaded PyTorch checkpoint rebuilt as its trial (pedl.harness.checkpoint_trial finds the class)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pedl.harness.checkpoint_trial import read_saved_trial
from pedl.pytorch._checkpoint import FRAMEWORK, MODEL_FILE, read_metadata


def load_trial_from_checkpoint_path(
    path: str | Path,
    *,
    trial_class: type[Any] | None = None,
    model_definition_dir: str | Path | None = None,
    map_location: str | torch.device | None = "cpu",
) -> Any:
    """The trial saved in a checkpoint directory, with its trained model as `trial.model`.

    Every PyTorch interface loads: the seed's and PEDL 0.11's (`TrialClass(hparams)`,
    `build_model`), and Determined's (`TrialClass(context)`, models wrapped through the context,
    which then hold the trained weights). The trial class comes from `trial_class`, else
    `model_definition_dir`, else the checkpoint's model_definition/ directory (pedl.harness.checkpoint_trial).
    """
    path = Path(path)
    saved = read_saved_trial(path, (FRAMEWORK,), trial_class, model_definition_dir)
    read_metadata(path)
    state = torch.load(path / MODEL_FILE, map_location=map_location, weights_only=True)
    trial = saved.construct()
    if not saved.uses_context or callable(getattr(saved.trial_class, "build_model", None)):
        model = trial_model(trial, saved.uses_context)
    else:
        models = list(trial.context.models)
        if not models:
            raise TypeError(
                f"{saved.trial_class.__qualname__}.__init__ called no context.wrap_model(); "
                "there is no model to load the checkpoint's weights into"
            )
        model = models[0] if len(models) == 1 else torch.nn.ModuleList(models)
    model.load_state_dict(state)
    if map_location is not None:
        model.to(map_location)
    trial.model = model
    return trial


def trial_model(trial: Any, uses_context: bool) -> torch.nn.Module:
    """`build_model` of any generation: `build_model(self, hparams)` or `build_model(self)`."""
    model = trial.build_model() if uses_context else trial.build_model(trial.hparams)
    if not isinstance(model, torch.nn.Module):
        raise TypeError(
            f"{type(trial).__qualname__}.build_model must return a torch.nn.Module, "
            f"got {type(model).__name__}"
        )
    return model
