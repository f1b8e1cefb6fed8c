"""The on-disk checkpoint of a TensorFlowTrial.

Layout of a checkpoint directory:
  metadata.json        framework, format version, batches trained, hparams, trial class
  variables.index, variables.data-*   every global variable, optimizer slots included
                       (`tf.compat.v1.train.Saver`; restore into the graph build_graph makes)
  training_state.json  batches trained and the training data position
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any, Protocol

import tensorflow as tf

from pedl._metrics import to_plain


class Checkpointed(Protocol):
    """What saving and restoring touch of a TensorFlowTrialController (named here, not imported, so
    the controller depends on this module and not the other way round)."""

    trial: Any
    _data_position: int

    @property
    def batches_trained(self) -> int: ...

    def _save_variables(self, prefix: Path) -> None: ...

    def _restore(self, prefix: Path, batches_trained: int, data_position: int) -> None: ...


FRAMEWORK = "tensorflow"
FORMAT_VERSION = 1
METADATA = "metadata.json"
VARIABLES = "variables"
TRAINING_FILE = "training_state.json"


def class_reference(cls: type) -> dict[str, str]:
    """Where the trial class lives: "module:qualname", and as an entrypoint of its model definition."""
    package = cls.__module__.split(".", 1)
    entrypoint = f"{package[1] if len(package) == 2 else ''}:{cls.__qualname__}"
    return {"trial_class": f"{cls.__module__}:{cls.__qualname__}", "entrypoint": entrypoint}


def write_metadata(path: Path, framework: str, batches_trained: int, trial: Any, **extra: Any) -> None:
    metadata = {
        "framework": framework,
        "format_version": FORMAT_VERSION,
        "batches_trained": batches_trained,
        "hparams": to_plain(getattr(trial, "hparams", {})),
        **class_reference(type(trial)),
        "pedl_version": importlib.metadata.version("pedl"),
        "tensorflow_version": tf.__version__,
        **extra,
    }
    (path / METADATA).write_text(json.dumps(metadata, indent=2, sort_keys=True) + "\n")


def read_metadata(path: Path, framework: str) -> dict[str, Any]:
    file = Path(path) / METADATA
    if not file.is_file():
        raise FileNotFoundError(f"{path} is not a PEDL checkpoint: it has no {METADATA}")
    metadata = json.loads(file.read_text())
    if metadata.get("framework") != framework:
        raise ValueError(f"{file}: checkpoint of framework {metadata.get('framework')!r}, not {framework!r}")
    if metadata.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{file}: checkpoint format version {metadata.get('format_version')!r}; "
            f"this pedl reads version {FORMAT_VERSION}"
        )
    return metadata


def save(controller: Checkpointed, path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    controller._save_variables(path / VARIABLES)
    state = {"batches_trained": controller.batches_trained, "data_position": controller._data_position}
    (path / TRAINING_FILE).write_text(json.dumps(state) + "\n")
    write_metadata(path, FRAMEWORK, controller.batches_trained, controller.trial)


def load(controller: Checkpointed, path: Path) -> None:
    read_metadata(path, FRAMEWORK)
    state = json.loads((path / TRAINING_FILE).read_text())
    controller._restore(path / VARIABLES, int(state["batches_trained"]), int(state["data_position"]))


def warm_start(controller: Checkpointed, path: Path) -> None:
    """The graph's variables only: the trial starts at batch 0 of its own data."""
    read_metadata(path, FRAMEWORK)
    controller._restore(path / VARIABLES, 0, 0)
