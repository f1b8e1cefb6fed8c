"""DigitsTrial: a two-layer MLP classifying 8x8 digit images into 10 classes."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from pedl.pytorch import DataLoader, PyTorchTrial

from .data import digits_datasets

NUM_FEATURES = 64
NUM_CLASSES = 10


def make_data_loaders(
    experiment_config: dict[str, Any], hparams: dict[str, Any]
) -> tuple[DataLoader, DataLoader]:
    train, val = digits_datasets()
    batch_size = int(hparams["batch_size"])
    return (
        DataLoader(train, batch_size=batch_size, shuffle=True),
        DataLoader(val, batch_size=batch_size),
    )


class DigitsTrial(PyTorchTrial):
    def build_model(self, hparams: dict[str, Any]) -> nn.Module:
        hidden = int(hparams["hidden_size"])
        return nn.Sequential(
            nn.Linear(NUM_FEATURES, hidden),
            nn.ReLU(),
            nn.Dropout(float(hparams["dropout"])),
            nn.Linear(hidden, NUM_CLASSES),
        )

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.Adam(model.parameters(), lr=float(self.hparams["learning_rate"]))

    def losses(self, predictions: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(predictions, labels)

    def batch_size(self) -> int:
        return int(self.hparams["batch_size"])

    def training_metrics(
        self, predictions: torch.Tensor, labels: torch.Tensor, losses: torch.Tensor
    ) -> dict[str, Any]:
        return {"accuracy": (predictions.argmax(dim=1) == labels).float().mean()}

    def validation_metrics(
        self, predictions: torch.Tensor, labels: torch.Tensor, losses: torch.Tensor
    ) -> dict[str, Any]:
        accuracy = (predictions.argmax(dim=1) == labels).float().mean()
        return {"validation_error": 1.0 - accuracy, "accuracy": accuracy}
