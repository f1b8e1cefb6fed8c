"""The experiment config's `optimizations` that a PyTorchTrial honours.

- `aggregation_frequency: N` accumulates gradients over N batches and then steps the optimizer
  (and the LR scheduler) once: with `average_aggregated_gradients` (the default) and a loss that
  is a batch mean, that is the update of one N-times larger batch, up to float rounding.
- `mixed_precision: O1|O2|O3` runs the forward pass and the loss under torch.autocast: float16
  with a gradient scaler on CUDA, bfloat16 on CPU (which needs no scaler).
- `auto_tf32: true` lets CUDA matmuls and cuDNN use TF32.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class TorchOptimizations:
    aggregation_frequency: int = 1
    average_aggregated_gradients: bool = True
    mixed_precision: bool = False
    # None: the config does not say (the seed PyTorchTrial leaves TF32 off, Determined's trials turn it on).
    auto_tf32: bool | None = None

    @classmethod
    def from_config(cls, experiment_config: dict[str, Any]) -> TorchOptimizations:
        opts = experiment_config.get("optimizations") or {}
        return cls(
            aggregation_frequency=int(opts.get("aggregation_frequency") or 1),
            average_aggregated_gradients=opts.get("average_aggregated_gradients", True) is not False,
            mixed_precision=(opts.get("mixed_precision") or "O0") != "O0",
            auto_tf32=None if opts.get("auto_tf32") is None else bool(opts["auto_tf32"]),
        )


class Precision:
    """Autocast and (for float16 on CUDA) gradient scaling around one trial's training batches."""

    def __init__(self, opts: TorchOptimizations, device: torch.device) -> None:
        self.device_type = device.type
        self.enabled = opts.mixed_precision
        self.dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
        use_scaler = self.enabled and self.dtype is torch.float16
        self.scaler = torch.amp.GradScaler(device.type) if use_scaler else None
        if opts.auto_tf32 and torch.cuda.is_available():
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        if not self.enabled:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=self.dtype)

    def backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        if self.scaler is None:
            optimizer.step()
        else:
            self.scaler.step(optimizer)
            self.scaler.update()
