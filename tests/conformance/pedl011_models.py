"""Model definitions in the shape PEDL 0.10/0.11's documentation and published examples give them."""

from __future__ import annotations

import textwrap
from pathlib import Path

LAYERS = """
from torch import nn


class Flatten(nn.Module):
    def forward(self, x):
        return x.view(x.size(0), -1)
"""

DATA = """
import os

import numpy as np
import torch
from torch.utils.data import TensorDataset

import pedl
from pedl.frameworks.pytorch.data import DataLoader

DOWNLOADS = []


def download_data(experiment_config, hparams):
    DOWNLOADS.append(hparams)
    path = os.path.join(os.getcwd(), "downloaded")
    os.makedirs(path, exist_ok=True)
    return path


def make_data_loaders(experiment_config, hparams):
    assert pedl.get_download_data_dir().endswith("downloaded")
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.normal(size=(64, 1, 2, 2)), dtype=torch.float32)
    y = (x.sum(dim=(1, 2, 3)) > 0).long()
    size = hparams["batch_size"]
    ds = TensorDataset(x, y)
    return DataLoader(ds, batch_size=size, shuffle=True), DataLoader(ds, batch_size=size)
"""

MODEL_DEF = """
from typing import Any, Dict

import torch
from torch import nn

import pedl
import pedl.util
from layers import Flatten
from pedl.frameworks.pytorch import LRScheduler, PyTorchTrial, reset_parameters
from pedl.frameworks.pytorch.data import TorchData
from pedl.frameworks.pytorch.util import error_rate

CALLS = []


class MNistTrial(PyTorchTrial):
    def build_model(self) -> nn.Module:
        CALLS.append(("build_model", pedl.get_trial_seed(), pedl.util.get_experiment_config()["data"]))
        hidden = pedl.get_hyperparameter("hidden")
        model = nn.Sequential(
            Flatten(), nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, 2), nn.LogSoftmax(dim=1)
        )
        reset_parameters(model)
        return model

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        CALLS.append(("optimizer", type(model).__name__))
        return torch.optim.SGD(model.parameters(), lr=pedl.get_hyperparameter("learning_rate"), momentum=0.9)

    def create_lr_scheduler(self, optimizer):
        return LRScheduler(torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.5),
                           step_mode=LRScheduler.StepMode.STEP_EVERY_BATCH)

    def train_batch(
        self, batch: TorchData, model: nn.Module, epoch_idx: int, batch_idx: int
    ) -> Dict[str, Any]:
        CALLS.append(("train_batch", epoch_idx, batch_idx))
        data, labels = batch
        output = model(data)
        {train_return}

    {evaluate}
"""

EVALUATE_BATCH = """def evaluate_batch(self, batch: TorchData, model: nn.Module) -> Dict[str, Any]:
        data, labels = batch
        output = model(data)
        {evaluate_return}"""

EVALUATE_FULL = """def evaluate_full_dataset(self, data_loader, model) -> Dict[str, Any]:
        errors = [error_rate(model(x), y) for x, y in data_loader]
        return {"validation_error": sum(errors) / len(errors), "batches": len(errors)}"""

GOOD_TRAIN_RETURN = (
    'return {"loss": nn.functional.nll_loss(output, labels), "train_error": error_rate(output, labels)}'
)
GOOD_EVALUATE_RETURN = 'return {"validation_error": error_rate(output, labels)}'

CONFIG = """
description: pedl011
data:
  source: generated
entrypoints:
  trial_class: model_def:MNistTrial
  data_loaders_function: data:make_data_loaders
  download_data_function: data:download_data
hyperparameters:
  learning_rate: {type: const, val: 0.1}
  hidden: {type: const, val: 8}
  batch_size: {type: const, val: 8}
searcher:
  name: single
  metric: validation_error
  smaller_is_better: true
  max_steps: 3
batches_per_step: 5
"""


def write_pedl011_model(
    directory: Path,
    train_return: str = GOOD_TRAIN_RETURN,
    evaluate: str | None = None,
    evaluate_return: str = GOOD_EVALUATE_RETURN,
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    evaluate = EVALUATE_BATCH.replace("{evaluate_return}", evaluate_return) if evaluate is None else evaluate
    source = MODEL_DEF.replace("{train_return}", train_return).replace("{evaluate}", evaluate)
    (directory / "model_def.py").write_text(textwrap.dedent(source))
    (directory / "data.py").write_text(textwrap.dedent(DATA))
    (directory / "layers.py").write_text(textwrap.dedent(LAYERS))
    (directory / "const.yaml").write_text(CONFIG)
    return directory
