"""Model definitions in the shape Determined's PyTorchTrial documentation gives them."""

from __future__ import annotations

import textwrap
from pathlib import Path

CONTEXT_TRIAL = """
from typing import Any, Dict

import torch
from torch import nn
from torch.utils.data import TensorDataset

import determined as det
from determined.pytorch import DataLoader, PyTorchTrial, PyTorchTrialContext

CALLS = []


def dataset():
    x = torch.linspace(-1, 1, 96).reshape(48, 2)
    return TensorDataset(x, (x[:, 0] > x[:, 1]).long())


class MyTrial(PyTorchTrial):
    def __init__(self, context: PyTorchTrialContext) -> None:
        self.context = context
        CALLS.append(("init", context.get_hparam("hidden"), context.get_hparams()["hidden"],
                      context.get_per_slot_batch_size(), context.get_global_batch_size(),
                      context.get_data_config(), context.distributed.get_rank(),
                      context.distributed.get_size(),
                      context.get_experiment_config()["searcher"]["name"]))
        hidden = context.get_hparam("hidden")
        self.model = context.wrap_model(nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, 2)))
        self.head = context.wrap_model(nn.Linear(2, 2))
        self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.1))
        self.head_opt = context.wrap_optimizer(torch.optim.Adam(self.head.parameters(), lr=0.01))
        self.lr = context.wrap_lr_scheduler(
            torch.optim.lr_scheduler.StepLR(self.opt, step_size=1, gamma=0.9),
            step_mode=det.pytorch.LRScheduler.StepMode.STEP_EVERY_EPOCH,
        )

    def build_training_data_loader(self) -> DataLoader:
        return DataLoader(dataset(), batch_size=self.context.get_per_slot_batch_size(), shuffle=True)

    def build_validation_data_loader(self) -> DataLoader:
        return DataLoader(dataset(), batch_size=self.context.get_per_slot_batch_size())

    def train_batch(self, batch, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        CALLS.append(("train_batch", epoch_idx, batch_idx, self.context.current_train_batch()))
        data, labels = batch
        output = self.head(self.model(data))
        {train_body}

    {evaluate}
"""

GOOD_TRAIN = """loss = nn.functional.cross_entropy(output, labels)
        self.context.backward(loss)
        clip = lambda params: torch.nn.utils.clip_grad_norm_(params, 1.0)  # noqa: E731
        self.context.step_optimizer(self.opt, clip_grads=clip)
        self.context.step_optimizer(self.head_opt)
        return {"loss": loss, "lr": self.lr.get_last_lr()[0]}"""

EVALUATE_BATCH = """def evaluate_batch(self, batch, batch_idx: int) -> Dict[str, Any]:
        CALLS.append(("evaluate_batch", batch_idx))
        data, labels = batch
        output = self.head(self.model(data))
        {evaluate_return}"""

GOOD_EVALUATE = 'return {"validation_error": (output.argmax(1) != labels).float().mean()}'

EVALUATE_FULL = """def evaluate_full_dataset(self, data_loader) -> Dict[str, Any]:
        wrong = sum(int((self.head(self.model(x)).argmax(1) != y).sum()) for x, y in data_loader)
        return {"validation_error": wrong / 48}"""

EARLY_TRIAL = """
import torch
from torch import nn
from torch.utils.data import TensorDataset

from determined.pytorch import DataLoader, PyTorchTrial


class EarlyTrial(PyTorchTrial):
    def __init__(self, context):
        self.context = context

    def build_training_data_loader(self):
        x = torch.linspace(-1, 1, 32).reshape(16, 2)
        size = self.context.get_per_slot_batch_size()
        return DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=size)

    def build_validation_data_loader(self):
        return self.build_training_data_loader()

    def build_model(self):
        return nn.Linear(2, 2)

    def optimizer(self, model):
        return torch.optim.SGD(model.parameters(), lr=self.context.get_hparam("lr"))

    def train_batch(self, batch, model, epoch_idx, batch_idx):
        data, labels = batch
        return {"loss": nn.functional.cross_entropy(model(data), labels)}

    def evaluate_batch(self, batch, model):
        data, labels = batch
        return {"validation_error": (model(data).argmax(1) != labels).float().mean()}
"""

CONFIG = """
name: determined
entrypoint: model_def:MyTrial
data:
  url: http://127.0.0.1/data
hyperparameters:
  global_batch_size: 8
  hidden: 6
  lr: 0.1
searcher:
  name: single
  metric: validation_error
  smaller_is_better: true
  max_length:
    batches: 15
scheduling_unit: 5
min_validation_period:
  batches: 5
"""


def write_determined_model(
    directory: Path,
    train_body: str = GOOD_TRAIN,
    evaluate: str | None = None,
    evaluate_return: str = GOOD_EVALUATE,
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    evaluate = EVALUATE_BATCH.replace("{evaluate_return}", evaluate_return) if evaluate is None else evaluate
    source = CONTEXT_TRIAL.replace("{train_body}", train_body).replace("{evaluate}", evaluate)
    (directory / "model_def.py").write_text(textwrap.dedent(source))
    (directory / "early.py").write_text(textwrap.dedent(EARLY_TRIAL))
    return directory
