"""Model definitions for the GPU tests: each reports, as metrics, where its tensors live."""

from __future__ import annotations

import textwrap
from pathlib import Path

# The seed API (spec 002): the harness moves model and batches to the device and applies the
# config's optimizations (mixed_precision: autocast and a gradient scaler on CUDA).
SEED_TRIAL = """
import os

import numpy as np
import torch
from torch import nn

from pedl.pytorch import DataLoader, PyTorchTrial


class GpuTrial(PyTorchTrial):
    def build_model(self, hparams):
        print("visible", repr(os.environ.get("CUDA_VISIBLE_DEVICES")), torch.cuda.device_count(), flush=True)
        return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))

    def optimizer(self, model):
        return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def losses(self, predictions, labels):
        return nn.functional.cross_entropy(predictions, labels)

    def batch_size(self):
        return 8

    def training_metrics(self, predictions, labels, losses):
        return {
            "on_cuda": float(predictions.is_cuda),
            "half": float(predictions.dtype == torch.float16),
        }

    def validation_metrics(self, predictions, labels, losses):
        error = (predictions.argmax(1) != labels).float().mean()
        return {"error": error, "val_on_cuda": float(predictions.is_cuda)}


def make_data_loaders(experiment_config, hparams):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 16)).astype("float32")
    y = (x[:, 0] + x[:, 1] > 0).astype("int64")
    train = torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    val = torch.utils.data.TensorDataset(torch.from_numpy(x[:64]), torch.from_numpy(y[:64]))
    return DataLoader(train, batch_size=8, shuffle=True), DataLoader(val, batch_size=16)
"""

# Determined's PyTorchTrial (context API): wrap_model moves the model, the harness moves batches.
DETERMINED_TRIAL = """
import numpy as np
import torch
from torch import nn

from determined import pytorch


def dataset(n):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 16)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    return torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y))


class DetGpuTrial(pytorch.PyTorchTrial):
    def __init__(self, context):
        self.context = context
        self.model = context.wrap_model(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)))
        self.optimizer = context.wrap_optimizer(torch.optim.Adam(self.model.parameters(), lr=1e-3))

    def build_training_data_loader(self):
        batch_size = self.context.get_per_slot_batch_size()
        return pytorch.DataLoader(dataset(256), batch_size=batch_size, shuffle=True)

    def build_validation_data_loader(self):
        return pytorch.DataLoader(dataset(64), batch_size=self.context.get_per_slot_batch_size())

    def train_batch(self, batch, epoch_idx, batch_idx):
        data, labels = batch
        extra = self.context.to_device(torch.ones(1))
        output = self.model(data)
        loss = nn.functional.cross_entropy(output, labels)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        return {
            "loss": loss,
            "batch_on_cuda": float(data.is_cuda),
            "model_on_cuda": float(next(self.model.parameters()).is_cuda),
            "to_device_on_cuda": float(extra.is_cuda),
        }

    def evaluate_batch(self, batch):
        data, labels = batch
        return {"validation_error": (self.model(data).argmax(1) != labels).float().mean()}
"""

CONFIG = """
hyperparameters:
  global_batch_size: 8
searcher:
  name: single
  metric: {metric}
  smaller_is_better: true
  max_length:
    batches: {batches}
batches_per_step: 10
min_validation_period:
  batches: 10
"""


def write_model(directory: Path, source: str) -> Path:
    """A package `directory` whose __init__ holds `source`."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "__init__.py").write_text(source)
    return directory


def config(batches: int = 20, metric: str = "error", extra: str = "") -> str:
    return textwrap.dedent(CONFIG).format(batches=batches, metric=metric) + textwrap.dedent(extra)


# The same trial with Determined's native-AMP API: a wrapped GradScaler and an autocast forward pass.
DETERMINED_AMP_TRIAL = (
    DETERMINED_TRIAL.replace(
        "        self.optimizer = context.wrap_optimizer(",
        '        self.scaler = context.wrap_scaler(torch.amp.GradScaler("cuda"))\n'
        "        self.optimizer = context.wrap_optimizer(",
    )
    .replace(
        "        output = self.model(data)\n        loss = nn.functional.cross_entropy(output, labels)\n"
        "        self.context.backward(loss)\n        self.context.step_optimizer(self.optimizer)\n",
        '        with torch.autocast("cuda", dtype=torch.float16):\n'
        "            output = self.model(data)\n"
        "            loss = nn.functional.cross_entropy(output, labels)\n"
        "        self.context.backward(self.scaler.scale(loss))\n"
        "        self.context.step_optimizer(self.optimizer, scaler=self.scaler)\n"
        "        self.scaler.update()\n",
    )
    .replace('"loss": loss,', '"loss": loss, "half": float(output.dtype == torch.float16),')
)
assert DETERMINED_AMP_TRIAL.count("wrap_scaler") == 1 and DETERMINED_AMP_TRIAL.count("scaler.update()") == 1
