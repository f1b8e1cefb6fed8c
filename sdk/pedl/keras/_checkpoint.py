"""The on-disk checkpoint of a Keras model trained by PEDL.

Layout of a checkpoint directory:
  metadata.json        framework, format version, batches trained, hparams, trial class
  model.weights.h5     the model's weights (`model.load_weights` of the same architecture)
  training_state.npz   every model variable (dropout seed states too) and the optimizer's
  training_state.json  batches trained, data position, variable paths, and for started
                       generators the replay record (pedl.keras._replay)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

import keras
import numpy as np

from pedl.keras import _replay
from pedl.keras._data import TrainingStream
from pedl.tensorflow._checkpoint import read_metadata, write_metadata


class Checkpointed(Protocol):
    """What saving and restoring touch of a KerasTrialController (named here, not imported, so the
    controller depends on this module and not the other way round)."""

    trial: Any
    model: keras.Model
    validation: Any
    stream: TrainingStream

    @property
    def batches_trained(self) -> int: ...

    def _restore_position(self, batches_trained: int, data_position: dict[str, int]) -> None: ...


FRAMEWORK = "keras"
WEIGHTS = "model.weights.h5"
STATE_ARRAYS = "training_state.npz"
STATE = "training_state.json"


def _variables(model: keras.Model) -> dict[str, list[Any]]:
    optimizer = model.optimizer
    if hasattr(optimizer, "built"):  # Keras 3
        if not optimizer.built:
            optimizer.build(model.trainable_variables)
    elif hasattr(optimizer, "_create_all_weights"):  # Keras 2's legacy optimizers (idempotent)
        optimizer._create_all_weights(model.trainable_variables)
    elif not getattr(optimizer, "_built", False):  # Keras 2's (TensorFlow <= 2.15)
        optimizer.build(model.trainable_variables)
    variables = optimizer.variables  # a method of Keras 2's legacy optimizers
    return {
        "model": list(model.variables),
        "optimizer": list(variables() if callable(variables) else variables),
    }


def save(controller: Checkpointed, path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    model = controller.model
    model.save_weights(path / WEIGHTS)
    groups = _variables(model)
    arrays: dict[str, Any] = {
        f"{group}_{i}": np.asarray(v.numpy()) for group, vs in groups.items() for i, v in enumerate(vs)
    }
    np.savez(path / STATE_ARRAYS, **arrays)
    state: dict[str, Any] = {
        "batches_trained": controller.batches_trained,
        "data_position": controller.stream.state(),
        # Keras 3's variable paths; Keras 2 (TensorFlow <= 2.15) has names only.
        "paths": {group: [getattr(v, "path", v.name) for v in vs] for group, vs in groups.items()},
    }
    replayed = _replay.replayed_sources(controller.stream.source, controller.validation)
    if replayed:
        state["replay"] = _replay.save_state(replayed)
    (path / STATE).write_text(json.dumps(state, indent=2) + "\n")
    write_metadata(
        path, FRAMEWORK, controller.batches_trained, controller.trial, keras_version=keras.__version__
    )


def load(controller: Checkpointed, path: Path) -> None:
    state = _load_variables(controller, path)
    controller._restore_position(int(state["batches_trained"]), state["data_position"])
    replayed = _replay.replayed_sources(controller.stream.source, controller.validation)
    if replayed or state.get("replay"):
        _replay.restore(replayed, state.get("replay") or {"log": [], "sources": {}}, path)


def warm_start(controller: Checkpointed, path: Path) -> None:
    """The model's and optimizer's variables only: the trial keeps its own batch 0 and data position."""
    _load_variables(controller, path)


def _load_variables(controller: Checkpointed, path: Path) -> dict[str, Any]:
    read_metadata(path, FRAMEWORK)
    state = json.loads((path / STATE).read_text())
    groups = _variables(controller.model)
    with np.load(path / STATE_ARRAYS) as arrays:
        for group, variables in groups.items():
            saved = state["paths"][group]
            if len(saved) != len(variables):
                raise ValueError(
                    f"{path}: the checkpoint has {len(saved)} {group} variables, the model built now has "
                    f"{len(variables)}; was it saved from a different architecture or optimizer?"
                )
            for i, variable in enumerate(variables):
                variable.assign(arrays[f"{group}_{i}"])
    return state
