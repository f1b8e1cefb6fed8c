"""The on-disk checkpoint of a PyTorch trial.

Layout of a checkpoint directory:
  metadata.json        framework, format version, batches trained, hparams, trial class
  model_state_dict.pt  the model's state_dict (all inference needs)
  training_state.pt    optimizer, LR scheduler, RNG states, batches trained, data position
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any, Protocol

import torch

from pedl._metrics import to_plain
from pedl.pytorch._trial import PyTorchTrial


class Checkpointed(Protocol):
    """What saving and restoring touch of a PyTorchTrialController (named here, not imported, so the
    controller depends on this module and not the other way round)."""

    trial: PyTorchTrial
    device: torch.device
    model: torch.nn.Module

    @property
    def batches_trained(self) -> int: ...

    def _training_state(self) -> dict[str, Any]: ...

    def _restore_training_state(self, state: dict[str, Any]) -> None: ...

    def _restore_weights_state(self, state: dict[str, Any]) -> None: ...


FRAMEWORK = "pytorch"
FORMAT_VERSION = 1
METADATA = "metadata.json"
MODEL_FILE = "model_state_dict.pt"
TRAINING_FILE = "training_state.pt"


def _class_reference(cls: type) -> dict[str, str]:
    package = cls.__module__.split(".", 1)
    entrypoint = f"{package[1] if len(package) == 2 else ''}:{cls.__qualname__}"
    return {"trial_class": f"{cls.__module__}:{cls.__qualname__}", "entrypoint": entrypoint}


def read_metadata(path: Path) -> dict[str, Any]:
    file = Path(path) / METADATA
    if not file.is_file():
        raise FileNotFoundError(f"{path} is not a PEDL checkpoint: it has no {METADATA}")
    metadata = json.loads(file.read_text())
    if metadata.get("framework") != FRAMEWORK:
        raise ValueError(f"{file}: checkpoint of framework {metadata.get('framework')!r}, not {FRAMEWORK!r}")
    if metadata.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{file}: checkpoint format version {metadata.get('format_version')!r}; "
            f"this pedl reads version {FORMAT_VERSION}"
        )
    return metadata


def save(controller: Checkpointed, path: Path, training_state: dict[str, Any] | None = None) -> None:
    """Writes the checkpoint; `training_state` defaults to the controller's own."""
    path.mkdir(parents=True, exist_ok=True)
    torch.save(controller.model.state_dict(), path / MODEL_FILE)
    state = controller._training_state() if training_state is None else training_state
    torch.save(state, path / TRAINING_FILE)
    metadata = {
        "framework": FRAMEWORK,
        "format_version": FORMAT_VERSION,
        "batches_trained": controller.batches_trained,
        "hparams": to_plain(controller.trial.hparams),
        **_class_reference(type(controller.trial)),
        "pedl_version": importlib.metadata.version("pedl"),
        "torch_version": torch.__version__,
    }
    (path / METADATA).write_text(json.dumps(metadata, indent=2, sort_keys=True) + "\n")


def load(controller: Checkpointed, path: Path) -> None:
    read_metadata(path)
    state = torch.load(path / MODEL_FILE, map_location=controller.device, weights_only=True)
    controller.model.load_state_dict(state)
    controller._restore_training_state(_training_state(path))


def warm_start(controller: Checkpointed, path: Path) -> None:
    read_metadata(path)
    state = torch.load(path / MODEL_FILE, map_location=controller.device, weights_only=True)
    controller.model.load_state_dict(state)
    controller._restore_weights_state(_training_state(path))


def _training_state(path: Path) -> dict[str, Any]:
    """Our own file, written by save() above: RNG tuples and scheduler state, not just tensors.

    It loads onto the CPU whatever device the trial runs on: RNG states must stay CPU byte tensors
    (on a GPU, mapping them to CUDA made every restore fail), the optimizer moves its state to its
    parameters' device itself, and accumulated gradients follow their parameters."""
    return torch.load(path / TRAINING_FILE, map_location="cpu", weights_only=False)
