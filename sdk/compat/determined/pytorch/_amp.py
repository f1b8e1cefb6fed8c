"""Determined's automatic mixed precision (`context.experimental.use_amp()`) for a PyTorchTrial.

As Determined documents it: the wrapped models' forward passes run under torch autocast (their
half-precision outputs handed back as float32, so losses need no autocast), `context.backward`
scales the loss, `step_optimizer` unscales before `clip_grads` and steps through the scaler, and
the scaler is updated once after each `train_batch` that stepped. The GradScaler is checkpointed
like one passed to `wrap_scaler`.

Off a GPU Determined's use_amp does nothing (its CUDA autocast and GradScaler disable themselves),
so the trial trains in float32 here too, saying so once, rather than switching to bfloat16.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from pedl import _log

_HALF = (torch.float16, torch.bfloat16)


class AutoAmp:
    """Autocast and loss scaling for one trial; `dtype` None: AMP is off (no CUDA device)."""

    def __init__(self, device_type: str, dtype: torch.dtype | None) -> None:
        self.device_type = device_type
        self.dtype = dtype
        # float16 needs loss scaling; bfloat16 (or AMP off) gets a disabled scaler, which steps plainly.
        self.scaler = torch.amp.GradScaler(device_type, enabled=dtype is torch.float16)

    @classmethod
    def for_device(cls, device: torch.device) -> AutoAmp:
        if device.type == "cuda":
            return cls("cuda", torch.float16)
        _log.get_logger(component="trial").info(
            "use_amp(): no CUDA device, so the trial trains in float32 (as Determined's use_amp does "
            "off a GPU)"
        )
        return cls(device.type, None)

    @property
    def enabled(self) -> bool:
        return self.dtype is not None

    def wrap_forward(self, model: torch.nn.Module) -> None:
        """Runs `model`'s forward pass under autocast and hands half-precision outputs back as float32."""
        if not self.enabled:
            return
        forward: Callable[..., Any] = model.forward
        device_type, dtype = self.device_type, self.dtype

        def autocast_forward(*args: Any, **kwargs: Any) -> Any:
            with torch.autocast(device_type, dtype=dtype):
                return forward(*args, **kwargs)

        model.forward = autocast_forward
        model.register_forward_hook(lambda _module, _inputs, output: to_float32(output))


def to_float32(output: Any) -> Any:
    """`output` with its float16/bfloat16 tensors as float32, through dicts, lists and tuples."""
    if isinstance(output, torch.Tensor):
        return output.float() if output.dtype in _HALF else output
    if isinstance(output, dict):
        return {k: to_float32(v) for k, v in output.items()}
    if isinstance(output, list):
        return [to_float32(v) for v in output]
    if isinstance(output, tuple) and not hasattr(output, "_fields"):
        return tuple(to_float32(v) for v in output)
    return output
