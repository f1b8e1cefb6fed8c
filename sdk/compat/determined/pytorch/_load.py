"""`det.pytorch.load_trial_from_checkpoint_path`: a downloaded pedl checkpoint of a PyTorchTrial,
rebuilt with its saved hyperparameters and config (the model definition travels in the checkpoint's
model_definition/ directory)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pedl.harness.checkpoint_trial import read_saved_trial
from pedl.pytorch._checkpoint import FRAMEWORK, MODEL_FILE, read_metadata
from pedl.pytorch._load import trial_model


def load_trial_from_checkpoint_path(path: str, **kwargs: Any) -> Any:
    """The trial, constructed with a context of the checkpoint's hyperparameters, its wrapped models
    holding the trained weights. A trial of the early form (`build_model(self)`) gives the model
    itself, as Determined does. `kwargs` go to `torch.load` (e.g. `map_location="cpu"`)."""
    saved = read_saved_trial(path, (FRAMEWORK,))
    read_metadata(Path(path))
    kwargs.setdefault("weights_only", True)
    state = torch.load(Path(path) / MODEL_FILE, **kwargs)
    trial = saved.construct()
    if callable(getattr(saved.trial_class, "build_model", None)):
        model = trial_model(trial, saved.uses_context)
        model.load_state_dict(state)
        return model
    models = list(getattr(trial.context, "models", []))
    if not models:
        raise TypeError(
            f"{saved.trial_class.__qualname__}.__init__ called no context.wrap_model(); there is no "
            "model to load the checkpoint's weights into"
        )
    (models[0] if len(models) == 1 else torch.nn.ModuleList(models)).load_state_dict(state)
    return trial
