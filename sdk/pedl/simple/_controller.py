"""ScriptTrialController: a KerasTrialController for the model and data of a script's fit call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import keras
import numpy as np

from pedl import _log
from pedl.keras import _distributed
from pedl.keras._controller import KerasTrialController
from pedl.simple._capture import FitCall, run_until_fit
from pedl.simple._data import fit_data
from pedl.simple._trial import ScriptTrial
from pedl.tensorflow._checkpoint import METADATA


class ScriptTrialController(KerasTrialController):
    """Trains, validates and checkpoints exactly as for a KerasTrial (see `pedl.keras`)."""

    trial: ScriptTrial

    @classmethod
    def from_script(cls, trial: ScriptTrial) -> ScriptTrialController:
        # Keras draws initial weights and dropout seeds from its own global generator; this seed is
        # drawn from NumPy, which the harness seeds with the trial seed.
        keras.utils.set_random_seed(int(np.random.randint(2**31 - 1)))
        # On several slots the whole script runs under the strategy, so its model is distributed.
        with _distributed.scope():
            call = run_until_fit(trial.directory, trial.script, trial.args)
        return cls.from_fit_call(trial, call)

    @classmethod
    def from_fit_call(cls, trial: ScriptTrial, call: FitCall) -> ScriptTrialController:
        model = call.model
        if not model.compiled:
            raise ValueError(
                f"{call.where}: model.fit() on a model that is not compiled; call "
                "model.compile(optimizer, loss, metrics) before fit"
            )
        training, validation = fit_data(call)
        callbacks = call.arguments.get("callbacks") or []
        if callbacks:
            _log.get_logger(component="harness").warning(
                "model.fit() callbacks do not run under PEDL",
                callbacks=[type(c).__name__ for c in callbacks],
                where=call.where,
            )
        trial.model = model
        return cls(trial, model, training, validation, call.where)

    def save(self, path: Path) -> None:
        super().save(path)
        if self.workers is not None and not self.workers.is_chief:
            return  # only the chief writes checkpoints
        file = Path(path) / METADATA
        metadata: dict[str, Any] = json.loads(file.read_text())
        trial = self.trial
        metadata.update(
            trial_class="simple model definition",
            entrypoint={"script": trial.script, "args": list(trial.args)},
        )
        file.write_text(json.dumps(metadata, indent=2, sort_keys=True) + "\n")
