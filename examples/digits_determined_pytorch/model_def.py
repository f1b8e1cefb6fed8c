"""A Determined PyTorchTrial (context API) on the digits images, run by pedl unchanged.

The trial wraps its model, optimizer and LR scheduler through the context, steps the optimizer
itself in `train_batch`, and builds its own data loaders at the per-slot batch size.
"""

from __future__ import annotations

from typing import Any

import determined as det
import numpy as np
import torch
from determined import pytorch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import TensorDataset

SPLIT_SEED = 0  # fixed, so every trial validates on the same images


def digits(train: bool) -> TensorDataset:
    images, labels = load_digits(return_X_y=True)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(labels))
    n_val = len(labels) // 5
    rows = order[n_val:] if train else order[:n_val]
    features = torch.tensor(images[rows] / 16.0, dtype=torch.float32)
    return TensorDataset(features, torch.tensor(labels[rows], dtype=torch.int64))


class DigitsTrial(pytorch.PyTorchTrial):
    def __init__(self, context: pytorch.PyTorchTrialContext) -> None:
        self.context = context
        hidden = context.get_hparam("hidden_size")
        self.model = context.wrap_model(
            nn.Sequential(
                nn.Linear(64, hidden),
                nn.ReLU(),
                nn.Dropout(context.get_hparam("dropout")),
                nn.Linear(hidden, 10),
            )
        )
        self.optimizer = context.wrap_optimizer(
            torch.optim.Adam(self.model.parameters(), lr=context.get_hparam("learning_rate"))
        )
        self.scheduler = context.wrap_lr_scheduler(
            torch.optim.lr_scheduler.ExponentialLR(self.optimizer, gamma=0.999),
            step_mode=det.pytorch.LRScheduler.StepMode.STEP_EVERY_BATCH,
        )

    def build_training_data_loader(self) -> pytorch.DataLoader:
        batch = self.context.get_per_slot_batch_size()
        return pytorch.DataLoader(digits(train=True), batch_size=batch, shuffle=True)

    def build_validation_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(digits(train=False), batch_size=self.context.get_per_slot_batch_size())

    def train_batch(self, batch: pytorch.TorchData, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        data, labels = batch
        output = self.model(data)
        loss = nn.functional.cross_entropy(output, labels)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        accuracy = (output.argmax(dim=1) == labels).float().mean()
        return {"loss": loss, "train_accuracy": accuracy}

    def evaluate_batch(self, batch: pytorch.TorchData, batch_idx: int) -> dict[str, Any]:
        data, labels = batch
        output = self.model(data)
        error = (output.argmax(dim=1) != labels).float().mean()
        return {"validation_loss": nn.functional.cross_entropy(output, labels), "validation_error": error}


if __name__ == "__main__":
    # `python model_def.py`: Determined's Trial API from Python (seed document), run here in test mode.
    det.experimental.create(
        trial_def=DigitsTrial, config="const.yaml", context_dir=".", local=True, test=True
    )
