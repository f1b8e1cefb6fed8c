"""Small trials and data sets shared by the PyTorch unit tests."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

from pedl.pytorch import DataLoader, PyTorchTrial


class NoisyDataset(Dataset):
    """Samples with NumPy noise drawn in the main process, so resuming must restore NumPy's RNG."""

    def __init__(self, size: int = 37) -> None:
        gen = torch.Generator().manual_seed(0)
        self.x = torch.randn(size, 4, generator=gen)
        self.y = (self.x.sum(dim=1) > 0).long() + (self.x[:, 0] > 1).long()

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        noise = torch.from_numpy(np.random.normal(scale=0.1, size=4).astype(np.float32))
        return self.x[i] + noise, self.y[i]


class ToyTrial(PyTorchTrial):
    def build_model(self, hparams: dict[str, Any]) -> nn.Module:
        return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3))

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.Adam(model.parameters(), lr=self.hparams.get("lr", 0.01))

    def create_lr_scheduler(self, optimizer: torch.optim.Optimizer) -> Any:
        return torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.9)

    def losses(self, predictions: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(predictions, labels)

    def batch_size(self) -> int:
        return 5

    def training_metrics(self, predictions: Any, labels: Any, losses: Any) -> dict[str, Any]:
        return {"accuracy": (predictions.argmax(1) == labels).float().mean()}

    def validation_metrics(self, predictions: Any, labels: Any, losses: Any) -> dict[str, Any]:
        return {"error": (predictions.argmax(1) != labels).float().mean()}


def toy_loaders(
    generator: torch.Generator | None = None, num_workers: int = 0
) -> tuple[DataLoader, DataLoader]:
    return (
        DataLoader(NoisyDataset(), batch_size=5, shuffle=True, generator=generator, num_workers=num_workers),
        DataLoader(NoisyDataset(11), batch_size=4),
    )
