"""Determined's gradient aggregation for its PyTorchTrials, as its docs describe it:
`optimizations.aggregation_frequency` N makes `context.step_optimizer` step (and zero the gradients)
only on every N-th batch, the gradients of the N batches averaged when
`average_aggregated_gradients` (default true) and summed otherwise; LR schedulers step only with the
optimizer; `auto_zero_grads=False` is refused with it. `wrap_optimizer(backward_passes_per_step=N)`
is for a `train_batch` that calls `context.backward` N times before one `step_optimizer` (the
gradients add up). `optimizations.auto_tf32` (Determined's default true) is accepted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from pedl.harness.build import _apply_optimizations
from pedl.harness.compat import ensure_determined_importable

ensure_determined_importable()

from determined import pytorch  # noqa: E402
from determined.pytorch._trial import controller_for  # noqa: E402

X = torch.randn(64, 4, generator=torch.Generator().manual_seed(2))
Y = (X.sum(dim=1) > 0).long()


class Classifier(pytorch.PyTorchTrial):
    backward_passes = 1
    auto_zero_grads = True

    def __init__(self, context: pytorch.PyTorchTrialContext) -> None:
        self.context = context
        torch.manual_seed(0)
        layers = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
        self.model = context.wrap_model(layers)
        self.opt = context.wrap_optimizer(
            torch.optim.SGD(self.model.parameters(), lr=0.5), backward_passes_per_step=self.backward_passes
        )
        self.sched = context.wrap_lr_scheduler(
            torch.optim.lr_scheduler.StepLR(self.opt, step_size=1, gamma=0.5),
            pytorch.LRScheduler.StepMode.STEP_EVERY_BATCH,
        )
        self.lrs: list[float] = []

    def build_training_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(
            torch.utils.data.TensorDataset(X, Y), batch_size=self.context.get_per_slot_batch_size()
        )

    def build_validation_data_loader(self) -> pytorch.DataLoader:
        return self.build_training_data_loader()

    def train_batch(self, batch, epoch_idx, batch_idx):  # noqa: ANN001, ANN201
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.model(x), y)
        if self.backward_passes == 2:  # Determined's docstring example: two losses, two backward passes
            half = len(x) // 2
            self.context.backward(torch.nn.functional.cross_entropy(self.model(x[:half]), y[:half]) / 2)
            self.context.backward(torch.nn.functional.cross_entropy(self.model(x[half:]), y[half:]) / 2)
        else:
            self.context.backward(loss)
        self.context.step_optimizer(self.opt, auto_zero_grads=self.auto_zero_grads)
        self.lrs.append(self.sched.get_last_lr()[0])
        return {"loss": loss}

    def evaluate_batch(self, batch):  # noqa: ANN001, ANN201
        x, y = batch
        return {"error": (self.model(x).argmax(1) != y).float().mean()}


def make(batch_size: int, kind: type[Classifier] = Classifier, **opts: Any):  # noqa: ANN201
    context = pytorch.PyTorchTrialContext({"global_batch_size": batch_size}, {})
    ctl = controller_for(kind(context), context)
    _apply_optimizations(ctl, {"optimizations": opts})
    return ctl


def weights(ctl) -> list[torch.Tensor]:  # noqa: ANN001
    return [p.detach().clone() for p in ctl.trial.model.parameters()]


def test_aggregating_two_batches_steps_once_as_one_twice_larger_batch_would() -> None:
    aggregated = make(8, aggregation_frequency=2)
    larger = make(16)
    aggregated.train_until(2)
    larger.train_until(1)
    for a, b in zip(weights(aggregated), weights(larger), strict=True):
        assert torch.allclose(a, b, atol=1e-6)
    aggregated.train_until(4)
    # The LR scheduler (every batch) steps only with the optimizer: after batch 1 nothing, after 2 both.
    assert aggregated.trial.lrs == [0.5, 0.5, 0.125, 0.125]  # as each train_batch saw it
    assert aggregated.trial.sched.get_last_lr() == [0.03125]


def test_without_averaging_the_aggregated_gradients_are_summed() -> None:
    summed = make(8, aggregation_frequency=2, average_aggregated_gradients=False)
    averaged = make(8, aggregation_frequency=2)
    summed.train_until(2)
    averaged.train_until(2)
    start = weights(make(8))
    for s, a, w0 in zip(weights(summed), weights(averaged), start, strict=True):
        assert torch.allclose(s - w0, 2 * (a - w0), atol=1e-6)


def test_a_checkpoint_in_the_middle_of_an_aggregation_resumes_exactly(tmp_path: Path) -> None:
    whole = make(8, aggregation_frequency=2)
    whole.train_until(4)
    first = make(8, aggregation_frequency=2)
    first.train_until(3)
    first.save(tmp_path / "ckpt")
    resumed = make(8, aggregation_frequency=2)
    resumed.load(tmp_path / "ckpt")
    resumed.train_until(4)
    for a, b in zip(weights(whole), weights(resumed), strict=True):
        assert torch.equal(a, b)


class ManualZero(Classifier):
    auto_zero_grads = False


def test_aggregation_needs_auto_zero_grads() -> None:
    ctl = make(8, ManualZero, aggregation_frequency=2)
    with pytest.raises(ValueError, match="auto_zero_grads=False.*aggregation_frequency is 2"):
        ctl.train_until(1)


class TwoBackwardPasses(Classifier):
    backward_passes = 2


def test_two_backward_passes_per_step_add_up_their_gradients() -> None:
    two, one = make(8, TwoBackwardPasses), make(8)
    two.train_until(3)
    one.train_until(3)
    for a, b in zip(weights(two), weights(one), strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_backward_passes_per_step_must_be_a_positive_int() -> None:
    context = pytorch.PyTorchTrialContext({}, {})
    opt = torch.optim.SGD(context.wrap_model(torch.nn.Linear(2, 2)).parameters(), lr=0.1)
    with pytest.raises(ValueError, match="backward_passes_per_step=0\\): it must be at least 1"):
        context.wrap_optimizer(opt, backward_passes_per_step=0)


def test_fp16_compression_says_it_has_no_effect(caplog: pytest.LogCaptureFixture) -> None:
    """Horovod's option: accepted as Determined's DDP trials accept it, but never silently."""
    context = pytorch.PyTorchTrialContext({}, {})
    opt = torch.optim.SGD(context.wrap_model(torch.nn.Linear(2, 2)).parameters(), lr=0.1)
    with caplog.at_level("WARNING", logger="determined.pytorch"):
        context.wrap_optimizer(opt, fp16_compression=True)
    assert "fp16_compression=True) has no effect" in caplog.text


def test_auto_tf32_is_accepted_and_mixed_precision_names_determineds_amp() -> None:
    make(8, auto_tf32=True).train_until(1)
    make(8, auto_tf32=False).train_until(1)
    from pedl.model_def import ModelDefinitionError

    with pytest.raises(ModelDefinitionError, match="optimizations.mixed_precision.*use_amp"):
        make(8, mixed_precision="O1")


class EarlyForm(pytorch.PyTorchTrial):
    """Determined's early form (build_model, optimizer, train_batch returning the loss): the harness
    runs backward and step, and aggregates the same way."""

    def __init__(self, context: pytorch.PyTorchTrialContext) -> None:
        self.context = context

    def build_model(self) -> torch.nn.Module:
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))

    def optimizer(self, model: torch.nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.5)

    build_training_data_loader = Classifier.build_training_data_loader
    build_validation_data_loader = Classifier.build_validation_data_loader

    def train_batch(self, batch, model, epoch_idx, batch_idx):  # noqa: ANN001, ANN201
        x, y = batch
        return torch.nn.functional.cross_entropy(model(x), y)

    def evaluate_batch(self, batch, model):  # noqa: ANN001, ANN201
        x, y = batch
        return {"error": (model(x).argmax(1) != y).float().mean()}


def test_the_early_form_aggregates_as_well() -> None:
    aggregated = make(8, EarlyForm, aggregation_frequency=2)  # type: ignore[arg-type]
    larger = make(16, EarlyForm)  # type: ignore[arg-type]
    aggregated.train_until(4)
    larger.train_until(2)
    for a, b in zip(aggregated.model.parameters(), larger.model.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6)
