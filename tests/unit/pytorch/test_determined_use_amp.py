"""Determined's `context.experimental.use_amp()`, as its docs describe it: "wraps forward pass in an
autocast context, scales loss before backward pass, unscales before clipping gradients, uses scaler
when stepping optimizer(s), and updates scaler afterwards"; the scaler is checkpointed. Off a GPU,
Determined's use_amp does nothing (its CUDA autocast and scaler disable themselves): float32 here
too. The GPU path (float16 + loss scaling) is run on the CPU through CPU float16 autocast."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pedl.harness.compat import ensure_determined_importable

ensure_determined_importable()

from determined import pytorch  # noqa: E402
from determined.pytorch._amp import AutoAmp  # noqa: E402
from determined.pytorch._trial import controller_for  # noqa: E402


def dataset() -> torch.utils.data.TensorDataset:
    x = torch.randn(64, 4, generator=torch.Generator().manual_seed(0))
    return torch.utils.data.TensorDataset(x, (x[:, 0] > 0).long())


class AmpTrial(pytorch.PyTorchTrial):
    """Determined's documented use: use_amp() before wrap_model, nothing else changes."""

    amp: AutoAmp | None = None  # None: context.experimental.use_amp(); else that AutoAmp
    use_amp = True

    def __init__(self, context: pytorch.PyTorchTrialContext) -> None:
        self.context = context
        if self.use_amp:
            if self.amp is None:
                context.experimental.use_amp()
            else:
                context._use_amp(self.amp)
        torch.manual_seed(1)
        self.model = context.wrap_model(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2)))
        self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.1))
        self.clipped: list[float] = []
        self.inner_dtypes: list[torch.dtype] = []
        self.model[0].register_forward_hook(lambda _m, _i, out: self.inner_dtypes.append(out.dtype))

    def build_training_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(dataset(), batch_size=8)

    def build_validation_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(dataset(), batch_size=8)

    def train_batch(self, batch, epoch_idx, batch_idx):  # noqa: ANN001, ANN201
        x, y = batch
        out = self.model(x)
        assert out.dtype == torch.float32  # handed back as float32: the loss needs no autocast
        loss = torch.nn.functional.cross_entropy(out, y)
        self.context.backward(loss)
        self.context.step_optimizer(self.opt, clip_grads=self._clip)
        return {"loss": loss}

    def _clip(self, params) -> None:  # noqa: ANN001
        self.clipped.append(float(torch.nn.utils.clip_grad_norm_(params, 1e6)))

    def evaluate_batch(self, batch):  # noqa: ANN001, ANN201
        x, y = batch
        return {"error": (self.model(x).argmax(1) != y).float().mean()}


def make(kind: type[AmpTrial]):  # noqa: ANN201
    context = pytorch.PyTorchTrialContext({}, {"hyperparameters": {"global_batch_size": 8}})
    return controller_for(kind(context), context)


class Float32(AmpTrial):
    use_amp = False


class Float16OnCpu(AmpTrial):
    amp = None  # set per test: each trial gets a fresh scaler


def test_off_a_gpu_use_amp_trains_in_float32_exactly_as_without_it(capsys) -> None:
    amp, plain = make(AmpTrial), make(Float32)
    amp.train_until(3)
    plain.train_until(3)
    assert "no CUDA device, so the trial trains in float32" in capsys.readouterr().out
    assert set(amp.trial.inner_dtypes) == {torch.float32}
    for a, b in zip(amp.trial.model.parameters(), plain.trial.model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert amp.trial.clipped == plain.trial.clipped


def test_use_amp_autocasts_the_forward_pass_scales_unscales_before_clipping_and_checkpoints_the_scaler(
    tmp_path: Path,
) -> None:
    Float16OnCpu.amp = AutoAmp("cpu", torch.float16)
    first = make(Float16OnCpu)
    reference = make(Float32)
    first.train_until(1)
    reference.train_until(1)
    assert first.trial.inner_dtypes[0] == torch.float16  # the forward pass ran under autocast
    scaler = first.trial.context.scalers[0]
    assert scaler.is_enabled() and scaler.get_scale() == 2.0**16
    # clip_grads saw unscaled gradients: the float32 trial's norm, not 65536 times it.
    assert first.trial.clipped[0] == pytest.approx(reference.trial.clipped[0], rel=1e-2)
    first.train_until(3)
    # update() ran once per batch: three steps without an overflow so far.
    assert scaler.state_dict()["_growth_tracker"] == 3
    first.save(tmp_path / "ckpt")

    Float16OnCpu.amp = AutoAmp("cpu", torch.float16)
    resumed = make(Float16OnCpu)
    resumed.load(tmp_path / "ckpt")
    assert resumed.trial.context.scalers[0].state_dict() == scaler.state_dict()


def test_use_amp_comes_before_wrap_model_and_takes_the_place_of_wrap_scaler() -> None:
    context = pytorch.PyTorchTrialContext({}, {})
    context.wrap_model(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="use_amp\\(\\) must be called before wrap_model\\(\\)"):
        context.experimental.use_amp()
    other = pytorch.PyTorchTrialContext({}, {})
    other.use_amp()  # the name pedl accepted before, the same call
    with pytest.raises(ValueError, match="wrap_scaler\\(\\) was called twice"):
        other.wrap_scaler(torch.amp.GradScaler("cpu"))
