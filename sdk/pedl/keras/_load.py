"""A downloaded checkpoint of a Keras trial as its compiled model with the trained weights."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pedl.harness.checkpoint_trial import read_saved_trial
from pedl.keras._checkpoint import FRAMEWORK, WEIGHTS


def load_model_from_checkpoint_path(
    path: str | Path,
    *,
    trial_class: type[Any] | None = None,
    model_definition_dir: str | Path | None = None,
) -> Any:
    """The trial's model, built by its own `build_model` (seed and PEDL 0.11: `build_model(hparams)`;
    Determined's TFKerasTrial: `build_model()` with a context) and loaded with the checkpoint's
    weights. The trial class comes from `trial_class`, else `model_definition_dir`, else the
    checkpoint's model_definition/ directory."""
    saved = read_saved_trial(path, (FRAMEWORK,), trial_class, model_definition_dir)
    trial = saved.construct()
    model = trial.build_model() if saved.uses_context else trial.build_model(trial.hparams)
    model.load_weights(str(Path(path) / WEIGHTS))
    return model
