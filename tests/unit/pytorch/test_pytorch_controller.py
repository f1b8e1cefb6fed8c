from typing import Any

import numpy as np
import pytest
import torch
from pytorch_toy_trials import ToyTrial, toy_loaders
from torch import nn
from torch.utils.data import TensorDataset

from pedl.harness.build import seed_all
from pedl.pytorch import DataLoader, PyTorchTrialController


def labelled_loader(n_batches: int, batch_size: int = 2) -> DataLoader:
    """Batch k holds labels all equal to k % 3, in order."""
    y = torch.arange(n_batches).repeat_interleave(batch_size) % 3
    return DataLoader(TensorDataset(torch.randn(len(y), 4), y), batch_size=batch_size)


class MetricsTrial(ToyTrial):
    def training_metrics(self, predictions: Any, labels: Any, losses: Any) -> dict[str, Any]:
        vector = torch.stack([labels[0].float(), torch.tensor(1.0)])
        return {"label_mean": labels.float().mean(), "vector": vector, "plain": 2.0}


def test_step_metrics_are_loss_plus_training_metrics_averaged_over_the_steps_batches() -> None:
    ctl = PyTorchTrialController(MetricsTrial({}), labelled_loader(6), labelled_loader(2))
    step = ctl.train_until(3)  # labels 0, 1, 2
    assert step.num_batches == 3 and step.num_inputs == 6 and ctl.batches_trained == 3
    assert step.metrics["label_mean"] == pytest.approx(1.0)
    assert step.metrics["vector"] == pytest.approx([1.0, 1.0])
    assert step.metrics["plain"] == 2.0
    assert isinstance(step.metrics["loss"], float)
    step = ctl.train_until(5)  # absolute target: two more batches, labels 0, 1
    assert step.num_batches == 2 and step.metrics["label_mean"] == pytest.approx(0.5)
    assert ctl.train_until(5).num_batches == 0  # already there: nothing to do
    # Training cycles over epochs: 6 batches per epoch, so batches 7..8 are labels 0, 1 again.
    assert ctl.train_until(8).metrics["label_mean"] == pytest.approx((2 + 0 + 1) / 3)


def test_training_metrics_average_in_float64_whatever_their_dtype() -> None:
    big = 2**40  # beyond float32's 24-bit mantissa: any float32 on the way would round it

    class IntMetricsTrial(ToyTrial):
        def training_metrics(self, predictions: Any, labels: Any, losses: Any) -> dict[str, Any]:
            k = int(labels[0])
            mixed = torch.tensor(0.5) if k == 1 else torch.tensor(big + k)  # int64, then float32
            # `losses` is still in the (freed) graph: kept without it, and averaged like the rest.
            return {"count": torch.tensor(big + k), "mixed": mixed, "same_loss": losses}

    ctl = PyTorchTrialController(IntMetricsTrial({}), labelled_loader(6), labelled_loader(2))
    step = ctl.train_until(3)  # labels 0, 1, 2
    assert step.metrics["count"] == big + 1
    assert step.metrics["mixed"] == (big + 0.5 + big + 2) / 3
    assert step.metrics["same_loss"] == step.metrics["loss"]


def test_validation_averages_metrics_and_losses_over_the_whole_set() -> None:
    class ConstTrial(ToyTrial):
        def validation_metrics(self, predictions: Any, labels: Any, losses: Any) -> dict[str, Any]:
            return {"label_mean": labels.float().mean()}

    ctl = PyTorchTrialController(ConstTrial({}), labelled_loader(2), labelled_loader(4))
    metrics = ctl.validate()
    assert metrics["label_mean"] == pytest.approx((0 + 1 + 2 + 0) / 4)
    assert set(metrics) == {"label_mean", "loss"}


def test_loss_dict_needs_a_loss_entry() -> None:
    class DictTrial(ToyTrial):
        def losses(self, predictions: Any, labels: Any) -> Any:
            return {"ce": nn.functional.cross_entropy(predictions, labels)}

    ctl = PyTorchTrialController(DictTrial({}), labelled_loader(2), labelled_loader(2))
    expected = r"training batch 1: losses\(\) returned a dict without .*'loss'.*'ce'"
    with pytest.raises(ValueError, match=expected):
        ctl.train_until(1)


def test_loss_dict_with_loss_trains_and_reports_every_loss_in_validation() -> None:
    class DictTrial(ToyTrial):
        def losses(self, predictions: Any, labels: Any) -> Any:
            ce = nn.functional.cross_entropy(predictions, labels)
            return {"loss": ce * 2, "ce": ce}

    ctl = PyTorchTrialController(DictTrial({}), labelled_loader(2), labelled_loader(2))
    assert "loss" in ctl.train_until(2).metrics
    metrics = ctl.validate()
    assert metrics["loss"] == pytest.approx(2 * metrics["ce"])


def test_non_finite_loss_names_the_batch() -> None:
    class NanTrial(ToyTrial):
        calls = 0

        def losses(self, predictions: Any, labels: Any) -> Any:
            self.calls += 1
            loss = nn.functional.cross_entropy(predictions, labels)
            return loss * float("nan") if self.calls == 4 else loss

    ctl = PyTorchTrialController(NanTrial({}), labelled_loader(6), labelled_loader(2))
    ctl.train_until(2)
    with pytest.raises(FloatingPointError, match="training batch 4: the loss is nan"):
        ctl.train_until(5)


def test_lr_scheduler_steps_once_per_batch() -> None:
    ctl = PyTorchTrialController(ToyTrial({"lr": 1.0}), labelled_loader(6), labelled_loader(2))
    ctl.train_until(6)  # StepLR(step_size=3, gamma=0.9)
    assert ctl.optimizer.param_groups[0]["lr"] == pytest.approx(0.81)


def test_unconvertible_batch_is_reported_with_its_batch_number() -> None:
    train = DataLoader([("text", 1)], batch_size=None)
    ctl = PyTorchTrialController(ToyTrial({}), train, labelled_loader(1))
    with pytest.raises(TypeError, match=r"training batch 1: batch\[0\]: builtins.str cannot be converted"):
        ctl.train_until(1)
    triple = DataLoader([(np.ones(1), np.ones(1), np.ones(1))] * 3, batch_size=None)
    ctl = PyTorchTrialController(ToyTrial({}), labelled_loader(1), triple)
    with pytest.raises(TypeError, match=r"validation batch 1: batch must be a pair \(input, target\)"):
        ctl.validate()


def test_make_data_loaders_result_is_checked() -> None:
    build = PyTorchTrialController.from_trial_class
    with pytest.raises(TypeError, match=r"must return a pair .* it returned a list of 3"):
        build(ToyTrial, {}, [1, 2, 3], "make_data_loaders()")
    expected = r"its validation loader is a builtins.list, not a pedl.pytorch.DataLoader"
    with pytest.raises(TypeError, match=expected):
        build(ToyTrial, {}, (labelled_loader(1), []), "make_data_loaders()")


def test_plain_torch_dataloader_and_numpy_batches_are_accepted() -> None:
    data = [(np.random.randn(3, 4).astype(np.float32), np.array([0, 1, 2])) for _ in range(2)]
    train = torch.utils.data.DataLoader(data, batch_size=None)
    ctl = PyTorchTrialController(ToyTrial({}), train, train)
    assert ctl.train_until(3).num_inputs == 9
    assert "error" in ctl.validate()


def test_validation_does_not_change_training() -> None:
    def run(validate: bool) -> list[float]:
        seed_all(3)
        ctl = PyTorchTrialController(ToyTrial({}), *toy_loaders())
        losses = []
        for step in range(1, 4):
            losses.append(ctl.train_until(step * 5).metrics["loss"])
            if validate:
                ctl.validate()
        return losses

    assert run(True) == run(False)
