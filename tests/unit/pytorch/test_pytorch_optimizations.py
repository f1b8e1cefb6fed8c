"""`optimizations` in a PyTorchTrial: exact gradient aggregation and bfloat16 autocast on CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from pedl.harness.build import _apply_optimizations
from pedl.model_def import ModelDefinitionError
from pedl.pytorch import DataLoader, PyTorchTrial, PyTorchTrialController
from pedl.pytorch._optimizations import TorchOptimizations

X = torch.randn(48, 4, generator=torch.Generator().manual_seed(1))
Y = (X.sum(dim=1) > 0).long()


class Linear(PyTorchTrial):
    seen_dtypes: list[torch.dtype] = []

    def build_model(self, hparams: dict[str, Any]) -> nn.Module:
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)

    def losses(self, predictions: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        Linear.seen_dtypes.append(predictions.dtype)
        return nn.functional.cross_entropy(predictions.float(), labels)

    def batch_size(self) -> int:
        return 4

    def validation_metrics(self, predictions: Any, labels: Any, losses: Any) -> dict[str, Any]:
        return {}


def controller(batch_size: int, **opts: Any) -> PyTorchTrialController:
    loader = DataLoader(TensorDataset(X, Y), batch_size=batch_size)
    ctl = PyTorchTrialController(Linear({}), loader, loader, device=torch.device("cpu"))
    _apply_optimizations(ctl, {"optimizations": opts})
    return ctl


def params(ctl: PyTorchTrialController) -> list[torch.Tensor]:
    return [p.detach().clone() for p in ctl.model.parameters()]


def test_aggregating_n_batches_equals_one_n_times_larger_batch() -> None:
    aggregated = controller(4, aggregation_frequency=3)
    aggregated.train_until(12)  # 4 optimizer steps of 3 batches of 4
    large = controller(12)
    large.train_until(4)  # 4 optimizer steps of 1 batch of 12
    for a, b in zip(params(aggregated), params(large), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    plain = controller(4)
    plain.train_until(12)
    assert not all(torch.allclose(a, b) for a, b in zip(params(plain), params(large), strict=True))


def test_summed_gradients_are_n_times_the_average() -> None:
    averaged = controller(4, aggregation_frequency=2)
    summed = controller(4, aggregation_frequency=2, average_aggregated_gradients=False)
    averaged.train_until(1)
    summed.train_until(1)
    for a, s in zip(averaged.model.parameters(), summed.model.parameters(), strict=True):
        torch.testing.assert_close(s.grad, a.grad * 2)


def test_a_checkpoint_mid_aggregation_resumes_exactly(tmp_path: Path) -> None:
    whole = controller(4, aggregation_frequency=2)
    whole.train_until(6)
    first = controller(4, aggregation_frequency=2)
    first.train_until(3)  # one batch into the second aggregation
    first.save(tmp_path / "ckpt")
    resumed = controller(4, aggregation_frequency=2)
    resumed.load(tmp_path / "ckpt")
    resumed.train_until(6)
    for a, b in zip(params(whole), params(resumed), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_mixed_precision_runs_the_forward_pass_in_bfloat16_on_cpu() -> None:
    Linear.seen_dtypes.clear()
    controller(4, mixed_precision="O1").train_until(2)
    assert Linear.seen_dtypes == [torch.bfloat16, torch.bfloat16]
    Linear.seen_dtypes.clear()
    controller(4, mixed_precision="O0").train_until(1)
    assert Linear.seen_dtypes == [torch.float32]


def test_options_read_from_the_config() -> None:
    opts = TorchOptimizations.from_config(
        {"optimizations": {"aggregation_frequency": 4, "mixed_precision": "O2"}}
    )
    assert opts == TorchOptimizations(
        aggregation_frequency=4, average_aggregated_gradients=True, mixed_precision=True
    )
    assert TorchOptimizations.from_config({}) == TorchOptimizations()


def test_other_trial_types_refuse_them_naming_the_field() -> None:
    class Other:
        pass

    _apply_optimizations(Other(), {"optimizations": {"aggregation_frequency": 1, "mixed_precision": "O0"}})  # type: ignore[arg-type]
    with pytest.raises(ModelDefinitionError, match="optimizations.aggregation_frequency"):
        _apply_optimizations(Other(), {"optimizations": {"aggregation_frequency": 2}})  # type: ignore[arg-type]
