"""Small model definitions written for tests, straight from the seed API (spec 002)."""

from __future__ import annotations

import io
import tarfile
import textwrap
from pathlib import Path

TINY_TRIAL = """
import numpy as np
import torch
from torch import nn

import pedl
from pedl.pytorch import DataLoader, PyTorchTrial


class TinyTrial(PyTorchTrial):
    def build_model(self, hparams):
        {build_model_body}
        return nn.Linear(4, 2)

    def optimizer(self, model):
        return torch.optim.SGD(model.parameters(), lr=pedl.get_hyperparameter("learning_rate"))

    def losses(self, predictions, labels):
        return nn.functional.cross_entropy(predictions, labels)

    def batch_size(self):
        return 8

    def training_metrics(self, predictions, labels, losses):
        return {{"accuracy": (predictions.argmax(1) == labels).float().mean()}}

    def validation_metrics(self, predictions, labels, losses):
        return {{"validation_loss": losses, "error": (predictions.argmax(1) != labels).float().mean()}}


def make_data_loaders(experiment_config, hparams):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    train = torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    val = torch.utils.data.TensorDataset(torch.from_numpy(x[:64]), torch.from_numpy(y[:64]))
    return DataLoader(train, batch_size=8, shuffle=True), DataLoader(val, batch_size=16)
"""

TINY_CONFIG = """
description: tiny
hyperparameters:
  learning_rate: 0.1
searcher:
  name: single
  metric: error
  smaller_is_better: true
  max_length:
    batches: {max_batches}
batches_per_step: {batches_per_step}
min_validation_period:
  batches: {validation_period}
"""


def write_tiny_model(directory: Path, build_model_body: str = "pass") -> Path:
    """A package `directory` whose __init__ exposes TinyTrial and make_data_loaders."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "__init__.py").write_text(TINY_TRIAL.format(build_model_body=build_model_body))
    return directory


def write_model_with_prelude(directory: Path, prelude: str) -> Path:
    """The tiny model with `prelude` (a hostile or slow snippet) run first, at import of its __init__."""
    model = write_tiny_model(directory)
    (model / "hostile.py").write_text(prelude)
    init = model / "__init__.py"
    init.write_text("from . import hostile  # noqa\n" + init.read_text())
    return model


def tiny_config(
    max_batches: int = 40, batches_per_step: int = 10, validation_period: int = 20, extra: str = ""
) -> str:
    """A single-trial config; `extra` is appended YAML (e.g. "max_restarts: 0")."""
    return textwrap.dedent(TINY_CONFIG).format(
        max_batches=max_batches, batches_per_step=batches_per_step, validation_period=validation_period
    ) + textwrap.dedent(extra)


def plain_tar(files: dict[str, bytes]) -> bytes:
    """A plain (uncompressed) tar of `files`, a model definition as the scheduler takes it."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()
