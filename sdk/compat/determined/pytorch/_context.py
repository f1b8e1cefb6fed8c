"""PyTorchTrialContext: what a Determined PyTorchTrial asks of the platform while it runs.

Models, optimizers and LR schedulers the trial wraps are recorded here; pedl's controller
checkpoints, distributes and steps them (the seed PyTorch controller, through
`pedl.frameworks.pytorch._adapter`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch

from determined._trial_context import DistributedContext, TrialContext
from pedl.frameworks.pytorch._lr import LRScheduler
from pedl.pytorch import _distributed
from pedl.pytorch._data import to_device


def _ranks() -> DistributedContext:
    ranks = _distributed.current()
    return DistributedContext() if ranks is None else DistributedContext(ranks.rank, ranks.world_size)


class PyTorchTrialContext(TrialContext):
    """Handed to `PyTorchTrial.__init__`; see Determined's docs for each method."""

    def __init__(
        self,
        hparams: dict[str, Any],
        experiment_config: dict[str, Any],
        distributed: DistributedContext | None = None,
    ) -> None:
        super().__init__(hparams, experiment_config, distributed or _ranks())
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.models: list[torch.nn.Module] = []
        self.wrapped_models: list[torch.nn.Module] = []
        self.optimizers: list[torch.optim.Optimizer] = []
        self.lr_schedulers: list[LRScheduler] = []
        self.scalers: list[Any] = []
        self._batches_trained: Callable[[], int] = lambda: 0
        self._epoch: Callable[[], int] = lambda: 0

    # --- what the trial builds -------------------------------------------------------------------

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """Moves `model` to the trial's device; on several slots returns it wrapped for data parallelism."""
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"wrap_model() takes a torch.nn.Module, got {type(model).__name__}")
        model = model.to(self.device)
        self.models.append(model)
        wrapped = model if self.distributed.get_size() <= 1 else _distributed.wrap_model(model, self.device)
        self.wrapped_models.append(wrapped)
        return wrapped

    def wrap_optimizer(
        self, optimizer: torch.optim.Optimizer, backward_passes_per_step: int = 1, **_: Any
    ) -> torch.optim.Optimizer:
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"wrap_optimizer() takes a torch.optim.Optimizer, got {type(optimizer).__name__}")
        if backward_passes_per_step != 1:
            raise ValueError(
                f"wrap_optimizer(backward_passes_per_step={backward_passes_per_step}): pedl does not support "
                "gradient aggregation; use 1"
            )
        self.optimizers.append(optimizer)
        return optimizer

    def wrap_lr_scheduler(
        self, lr_scheduler: Any, step_mode: LRScheduler.StepMode, frequency: int = 1
    ) -> Any:
        self.lr_schedulers.append(LRScheduler(lr_scheduler, step_mode, frequency))
        return lr_scheduler

    def wrap_scaler(self, scaler: Any) -> Any:
        """Tracks the trial's torch.amp GradScaler so that checkpoints keep its loss scale. As
        Determined documents, the trial itself scales the loss, passes the scaler to step_optimizer,
        unscales before clipping and calls update() after stepping its optimizers."""
        if not all(callable(getattr(scaler, n, None)) for n in ("scale", "step", "update", "state_dict")):
            raise TypeError(f"wrap_scaler() takes a torch.amp.GradScaler, got {type(scaler).__name__}")
        if self.scalers:
            raise ValueError("wrap_scaler() was called twice: a trial has one gradient scaler")
        self.scalers.append(scaler)
        return scaler

    def use_amp(self) -> Any:
        raise NotImplementedError(
            "use_amp(): pedl has no automatic AMP for Determined trials; call "
            "wrap_scaler(torch.amp.GradScaler()) and run the forward pass under torch.autocast"
        )

    def configure_apex_amp(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("configure_apex_amp(): pedl does not support NVIDIA Apex; use torch.amp")

    # --- training ---------------------------------------------------------------------------------

    def to_device(self, data: Any) -> Any:
        return to_device(data, self.device)

    def backward(
        self, loss: torch.Tensor, gradient: Any = None, retain_graph: bool = False, create_graph: bool = False
    ) -> None:
        loss.backward(gradient=gradient, retain_graph=retain_graph, create_graph=create_graph)

    def step_optimizer(
        self,
        optimizer: torch.optim.Optimizer,
        clip_grads: Callable[[Iterator[torch.nn.Parameter]], None] | None = None,
        auto_zero_grads: bool = True,
        scaler: Any = None,
    ) -> None:
        if optimizer not in self.optimizers:
            raise ValueError(
                "step_optimizer() was given an optimizer that was not passed to wrap_optimizer()"
            )
        if clip_grads is not None:
            clip_grads(p for group in optimizer.param_groups for p in group["params"])
        if scaler is not None:
            scaler.step(optimizer)
        else:
            optimizer.step()
        if auto_zero_grads:
            optimizer.zero_grad()
        for scheduler in self.lr_schedulers:
            scheduler.after_optimizer_step()

    def current_train_batch(self) -> int:
        return self._batches_trained()

    def current_train_epoch(self) -> int:
        return self._epoch()
