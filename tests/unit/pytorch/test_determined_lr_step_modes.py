"""Determined's `LRScheduler.StepMode`s as its API reference describes them, for a scheduler wrapped
with `context.wrap_lr_scheduler`: STEP_EVERY_BATCH steps after each batch, STEP_EVERY_EPOCH after each
epoch, STEP_EVERY_OPTIMIZER_STEP after each `step_optimizer` that stepped (with
`aggregation_frequency` 2, every second batch), and MANUAL_STEP never: the trial steps it itself."""

from __future__ import annotations

import pytest
import torch

from pedl.harness.build import _apply_optimizations
from pedl.harness.compat import ensure_determined_importable

ensure_determined_importable()

from determined import pytorch  # noqa: E402
from determined.pytorch._trial import controller_for  # noqa: E402

X = torch.randn(32, 4, generator=torch.Generator().manual_seed(3))
Y = (X.sum(dim=1) > 0).long()
MODE = pytorch.LRScheduler.StepMode


class Stepped(pytorch.PyTorchTrial):
    """Records the LR each batch saw; under MANUAL_STEP steps its scheduler every third batch."""

    def __init__(self, context: pytorch.PyTorchTrialContext) -> None:
        self.context = context
        self.model = context.wrap_model(torch.nn.Linear(4, 2))
        self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=1.0))
        self.mode = context.get_hparam("mode")
        scheduler = torch.optim.lr_scheduler.StepLR(self.opt, step_size=1, gamma=0.5)
        self.sched = context.wrap_lr_scheduler(scheduler, step_mode=self.mode)
        self.lrs: list[float] = []

    def build_training_data_loader(self) -> pytorch.DataLoader:
        data = torch.utils.data.TensorDataset(X, Y)
        return pytorch.DataLoader(data, batch_size=self.context.get_per_slot_batch_size())

    def build_validation_data_loader(self) -> pytorch.DataLoader:
        return self.build_training_data_loader()

    def train_batch(self, batch, epoch_idx, batch_idx):  # noqa: ANN001, ANN201
        self.lrs.append(self.sched.get_last_lr()[0])
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.opt)
        if self.mode is MODE.MANUAL_STEP and (batch_idx + 1) % 3 == 0:
            self.sched.step()
        return {"loss": loss}

    def evaluate_batch(self, batch):  # noqa: ANN001, ANN201
        x, y = batch
        return {"error": (self.model(x).argmax(1) != y).float().mean()}


@pytest.mark.parametrize(
    ("mode", "options", "seen"),
    [
        (MODE.STEP_EVERY_BATCH, {}, [1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125]),
        (MODE.STEP_EVERY_EPOCH, {}, [1.0, 1.0, 1.0, 1.0, 0.5, 0.5]),  # an epoch: 32 records, 4 batches
        (MODE.STEP_EVERY_OPTIMIZER_STEP, {"aggregation_frequency": 2}, [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]),
        (MODE.MANUAL_STEP, {}, [1.0, 1.0, 1.0, 0.5, 0.5, 0.5]),
    ],
    ids=lambda v: getattr(v, "name", None),
)
def test_each_step_mode_steps_the_lr_where_the_reference_says(mode, options, seen) -> None:  # noqa: ANN001
    context = pytorch.PyTorchTrialContext({"global_batch_size": 8, "mode": mode}, {})
    ctl = controller_for(Stepped(context), context)
    _apply_optimizations(ctl, {"optimizations": options})
    ctl.train_until(6)
    assert ctl.trial.lrs == seen
