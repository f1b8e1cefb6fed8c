"""PEDL 0.10/0.11's PyTorch interface (`from pedl.frameworks.pytorch import PyTorchTrial`)."""

from __future__ import annotations

import torch

from pedl.frameworks.pytorch import data, util
from pedl.frameworks.pytorch._lr import LRScheduler
from pedl.frameworks.pytorch._trial import PyTorchTrial
from pedl.pytorch._data import DataLoader
from pedl.pytorch._trial import TorchData


def reset_parameters(model: torch.nn.Module) -> None:
    """Re-initialises every submodule that has `reset_parameters()` (drawing from the trial's
    seeded RNG, so each trial starts from its own reproducible weights)."""
    for module in model.modules():
        reset = getattr(module, "reset_parameters", None)
        if callable(reset):
            reset()


__all__ = ["DataLoader", "LRScheduler", "PyTorchTrial", "TorchData", "data", "reset_parameters", "util"]
