"""PyTorchTrial: the user-facing PyTorch interface (seed 002)."""

from __future__ import annotations

import abc
from typing import Any

import torch

from pedl.trial import Trial

TorchData = Any  # tensors, or tuples/lists/dicts of them, as the data loaders produce


class PyTorchTrial(Trial):
    """Subclass it and implement the abstract methods; PEDL runs the training loop.

    After PEDL builds the model it is available as `self.model` (also on a trial returned by
    `pedl.pytorch.load_trial_from_checkpoint_path`).
    """

    framework_interface = "PyTorchTrial"
    model: torch.nn.Module

    @abc.abstractmethod
    def build_model(self, hparams: dict[str, Any]) -> torch.nn.Module:
        """The model for this trial's hyperparameters."""

    @abc.abstractmethod
    def optimizer(self, model: torch.nn.Module) -> torch.optim.Optimizer:
        """The optimizer for `model` (already on the trial's device)."""

    @abc.abstractmethod
    def losses(self, predictions: TorchData, labels: TorchData) -> torch.Tensor | dict[str, torch.Tensor]:
        """A scalar loss tensor, or a dict of losses whose "loss" entry is backpropagated."""

    @abc.abstractmethod
    def batch_size(self) -> int:
        """The training batch size."""

    @abc.abstractmethod
    def validation_metrics(
        self, predictions: TorchData, labels: TorchData, losses: torch.Tensor | dict[str, torch.Tensor]
    ) -> dict[str, Any]:
        """Metrics of one validation batch; PEDL averages them over the validation set."""

    def training_metrics(
        self, predictions: TorchData, labels: TorchData, losses: torch.Tensor | dict[str, torch.Tensor]
    ) -> dict[str, Any]:
        """Optional metrics of one training batch besides the loss; averaged over each step."""
        return {}

    def create_lr_scheduler(self, optimizer: torch.optim.Optimizer) -> Any | None:
        """Optional learning-rate scheduler; PEDL calls its `step()` once per training batch."""
        return None
