"""Model definitions written against Determined's documented Trial APIs, for tests of pedl's
`determined` compatibility package."""

from __future__ import annotations

from pathlib import Path

# A Determined PyTorchTrial that calls `context.set_stop_requested(True)` once it has trained
# `stop_at` batches (0: never), as Determined's docs show for ending a trial from its own code, and
# raises `det.InvalidHP` when built with the hyperparameter `invalid: true`.
STOPPING_TRIAL = """
import torch
import determined as det
from determined import pytorch


class StoppingTrial(pytorch.PyTorchTrial):
    def __init__(self, context):
        if context.get_hparams().get("invalid"):
            raise det.InvalidHP("these hyperparameters cannot train")
        self.context = context
        self.model = context.wrap_model(torch.nn.Linear(4, 1))
        self.opt = context.wrap_optimizer(
            torch.optim.SGD(self.model.parameters(), lr=context.get_hparam("lr"))
        )

    def _data(self, n):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(n, 4, generator=g)
        return torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True))

    def build_training_data_loader(self):
        return pytorch.DataLoader(self._data(256), batch_size=self.context.get_per_slot_batch_size())

    def build_validation_data_loader(self):
        return pytorch.DataLoader(self._data(32), batch_size=self.context.get_per_slot_batch_size())

    def train_batch(self, batch, epoch_idx, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.opt)
        stop_at = self.context.get_hparam("stop_at")
        if stop_at and self.context.current_train_batch() + 1 >= stop_at:
            self.context.set_stop_requested(True)
        return {"loss": loss}

    def evaluate_batch(self, batch):
        x, y = batch
        return {"validation_loss": torch.nn.functional.mse_loss(self.model(x), y)}
"""


def write_stopping_trial(directory: Path) -> Path:
    directory.mkdir(parents=True)
    (directory / "model_def.py").write_text(STOPPING_TRIAL)
    return directory


def stopping_config(searcher: str, length: int, extra: str = "") -> str:
    """`searcher`: the searcher's YAML mapping without its length; lengths in batches, steps of 5."""
    return (
        "name: stop-requested\n"
        "entrypoint: model_def:StoppingTrial\n"
        "hyperparameters:\n"
        "  global_batch_size: 8\n"
        "  lr: {type: double, minval: 0.01, maxval: 0.05}\n"
        "  stop_at: {type: categorical, vals: [0, 7]}\n"
        f"searcher: {{{searcher}, metric: validation_loss, max_length: {{batches: {length}}}}}\n"
        "scheduling_unit: 5\n"
        "max_restarts: 0\n" + extra
    )
