"""The trial of a downloaded checkpoint, rebuilt outside any cluster for inference or inspection.

A checkpoint of a Trial class holds metadata.json (framework, hyperparameters, trial class) and,
since pedl writes them (`pedl.harness.model_code`), the model definition under model_definition/
and the experiment config. The trial class is taken from, in order: the `trial_class` argument,
the `model_definition_dir` argument, the checkpoint's model_definition/, or the module that
metadata.json names (when it is importable). Trials built with a context (Determined's Trial APIs)
get a context of the saved hyperparameters and config; the others get the hyperparameters.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pedl import _trial_context
from pedl.harness.hparams import typed_hparams
from pedl.harness.model_code import CODE_DIR, CONFIG_FILE

METADATA = "metadata.json"


@dataclass(frozen=True)
class SavedTrial:
    path: Path
    trial_class: type[Any]
    hparams: dict[str, Any]
    experiment_config: dict[str, Any]
    metadata: dict[str, Any]

    @property
    def uses_context(self) -> bool:
        """True for Determined's Trial APIs: `TrialClass(context)`, `build_model(self)`."""
        return hasattr(self.trial_class, "trial_context_class")

    def construct(self) -> Any:
        """The trial object, built as the harness builds it (hparams or a context of them)."""
        _trial_context.set_hyperparameters(self.hparams)
        _trial_context.set_experiment_config(self.experiment_config)
        if self.uses_context:
            context = self.trial_class.trial_context_class(self.hparams, self.experiment_config)
            trial = self.trial_class(context)
            if not hasattr(trial, "context"):
                trial.context = context
        else:
            trial = self.trial_class(self.hparams)
        if not hasattr(trial, "hparams"):
            trial.hparams = dict(self.hparams)
        return trial


def read_saved_trial(
    path: str | Path,
    frameworks: Iterable[str],
    trial_class: type | None = None,
    model_definition_dir: str | Path | None = None,
) -> SavedTrial:
    """Reads the checkpoint at `path`, which must be of one of `frameworks`, and finds its trial class."""
    path = Path(path)
    file = path / METADATA
    if not file.is_file():
        raise FileNotFoundError(f"{path} is not a pedl checkpoint of a Trial class: it has no {METADATA}")
    metadata = json.loads(file.read_text())
    frameworks = tuple(frameworks)
    if metadata.get("framework") not in frameworks:
        raise ValueError(
            f"{file}: a checkpoint of framework {metadata.get('framework')!r}; this loader reads "
            f"{' or '.join(repr(f) for f in frameworks)} checkpoints"
        )
    config_file = path / CONFIG_FILE
    config: dict[str, Any] = json.loads(config_file.read_text()) if config_file.is_file() else {}
    # JSON keeps 6.0 for an int hyperparameter that travelled as a protobuf double; the config knows.
    hparams = typed_hparams(dict(metadata.get("hparams") or {}), config)
    if trial_class is None:
        source = model_definition_dir if model_definition_dir is not None else path / CODE_DIR
        if Path(source).is_dir():
            trial_class = _from_model_definition(Path(source), config, metadata)
        else:
            trial_class = _import_recorded(metadata)
    return SavedTrial(path, trial_class, hparams, config, metadata)


def _from_model_definition(directory: Path, config: dict[str, Any], metadata: dict[str, Any]) -> type:
    from pedl.harness.build import load_for_config

    if not config:  # written before checkpoints carried the config: the class's own place
        config = {"entrypoint": metadata.get("entrypoint")}
    return load_for_config(directory, config).trial_class


def _import_recorded(metadata: dict[str, Any]) -> type:
    module_name, _, qualname = str(metadata.get("trial_class", "")).partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(
            f"the checkpoint has no {CODE_DIR}/ directory (written before pedl kept the model definition "
            f"in checkpoints) and its trial class's module {module_name!r} cannot be imported; load it with "
            "pedl.pytorch.load_trial_from_checkpoint_path or pedl.keras.load_model_from_checkpoint_path "
            "and model_definition_dir= (or trial_class=), or put the model definition's parent directory "
            "on sys.path"
        ) from exc
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj
