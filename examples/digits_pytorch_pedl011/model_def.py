"""A PEDL 0.11 PyTorchTrial on the digits images: PEDL backpropagates the "loss" train_batch returns."""

from __future__ import annotations

from typing import Any

import torch
from layers import Flatten  # noqa: I100  (a sibling module of the model definition)
from torch import nn

import pedl
from pedl.frameworks.pytorch import LRScheduler, PyTorchTrial, reset_parameters
from pedl.frameworks.pytorch.data import TorchData
from pedl.frameworks.pytorch.util import error_rate


class DigitsTrial(PyTorchTrial):
    def build_model(self) -> nn.Module:
        model = nn.Sequential(
            nn.Conv2d(1, pedl.get_hyperparameter("n_filters"), kernel_size=3, padding=1),
            nn.ReLU(),
            Flatten(),
            nn.Dropout(pedl.get_hyperparameter("dropout")),
            nn.Linear(64 * pedl.get_hyperparameter("n_filters"), 10),
            nn.LogSoftmax(dim=1),
        )
        reset_parameters(model)
        return model

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=pedl.get_hyperparameter("learning_rate"), momentum=0.9)

    def create_lr_scheduler(self, optimizer: torch.optim.Optimizer) -> LRScheduler:
        decay = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.9)
        return LRScheduler(decay, step_mode=LRScheduler.StepMode.STEP_EVERY_EPOCH)

    def train_batch(
        self, batch: TorchData, model: nn.Module, epoch_idx: int, batch_idx: int
    ) -> dict[str, Any]:
        data, labels = batch
        output = model(data)
        loss = nn.functional.nll_loss(output, labels)
        return {"loss": loss, "train_error": error_rate(output, labels)}

    def evaluate_batch(self, batch: TorchData, model: nn.Module) -> dict[str, Any]:
        data, labels = batch
        output = model(data)
        return {
            "validation_loss": nn.functional.nll_loss(output, labels),
            "validation_error": error_rate(output, labels),
        }
