"""Determined's native-AMP API: `context.wrap_scaler(GradScaler)` trains, and a checkpoint carries
the scaler's loss scale to the resumed trial (Determined's PyTorchTrialContext.wrap_scaler docs)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pedl.harness.compat import ensure_determined_importable

ensure_determined_importable()

from determined import pytorch  # noqa: E402
from determined.pytorch._trial import controller_for  # noqa: E402


def dataset() -> torch.utils.data.TensorDataset:
    x = torch.randn(64, 4, generator=torch.Generator().manual_seed(0))
    return torch.utils.data.TensorDataset(x, (x[:, 0] > 0).long())


class ScaledTrial(pytorch.PyTorchTrial):
    def __init__(self, context: pytorch.PyTorchTrialContext) -> None:
        self.context = context
        # growth_interval=1: the scale doubles after every step without overflow, so it tells steps apart.
        self.scaler = context.wrap_scaler(torch.amp.GradScaler("cpu", init_scale=2.0**4, growth_interval=1))
        self.model = context.wrap_model(torch.nn.Linear(4, 2))
        self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.1))

    def build_training_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(dataset(), batch_size=8)

    def build_validation_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(dataset(), batch_size=8)

    def train_batch(self, batch, epoch_idx, batch_idx):  # noqa: ANN001, ANN201
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.model(x), y)
        self.context.backward(self.scaler.scale(loss))
        self.context.step_optimizer(self.opt, scaler=self.scaler)
        self.scaler.update()
        return {"loss": loss}

    def evaluate_batch(self, batch):  # noqa: ANN001, ANN201
        x, y = batch
        return {"error": (self.model(x).argmax(1) != y).float().mean()}


def make_controller():  # noqa: ANN201
    context = pytorch.PyTorchTrialContext({}, {"hyperparameters": {"global_batch_size": 8}})
    return controller_for(ScaledTrial(context), context)


def test_a_wrapped_scaler_scales_steps_and_its_scale_survives_a_checkpoint(tmp_path: Path) -> None:
    first = make_controller()
    first.train_until(3)
    assert first.trial.scaler.get_scale() == 2.0**7
    first.save(tmp_path / "ckpt")

    resumed = make_controller()
    assert resumed.trial.scaler.get_scale() == 2.0**4
    resumed.load(tmp_path / "ckpt")
    assert resumed.trial.scaler.get_scale() == 2.0**7
    resumed.train_until(4)
    assert resumed.trial.scaler.get_scale() == 2.0**8


def test_wrap_scaler_takes_one_grad_scaler() -> None:
    context = pytorch.PyTorchTrialContext({}, {})
    with pytest.raises(TypeError, match="wrap_scaler\\(\\) takes a torch.amp.GradScaler, got float"):
        context.wrap_scaler(1.0)
    context.wrap_scaler(torch.amp.GradScaler("cpu"))
    with pytest.raises(ValueError, match="called twice"):
        context.wrap_scaler(torch.amp.GradScaler("cpu"))
