"""PyTorchTrialContext: what a Determined PyTorchTrial asks of the platform while it runs.

Models, optimizers and LR schedulers the trial wraps are recorded here; pedl's controller
checkpoints, distributes and steps them (the seed PyTorch controller, through
`pedl.frameworks.pytorch._adapter`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

import torch

from determined._trial_context import DistributedContext, TrialContext
from determined.pytorch._amp import AutoAmp
from determined.pytorch._reducer import MetricReducer, Reducers
from determined.pytorch._tensorboard import TensorboardMethods
from pedl.frameworks.pytorch._lr import LRScheduler
from pedl.pytorch import _distributed
from pedl.pytorch._data import to_device

logger = logging.getLogger("determined.pytorch")


def _ranks() -> DistributedContext:
    ranks = _distributed.current()
    return DistributedContext() if ranks is None else DistributedContext(ranks.rank, ranks.world_size)


class PyTorchTrialContext(TensorboardMethods, TrialContext):
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
        # optimizations.aggregation_frequency / average_aggregated_gradients (configure_aggregation).
        self._aggregation_frequency = 1
        self._average_aggregated_default = True
        self._averaged: dict[int, bool] = {}  # wrap_optimizer(average_aggregated_gradients=...), by id
        self._amp: AutoAmp | None = None
        self.experimental = PyTorchExperimentalContext(self)
        self.reducers = Reducers()

    # --- what the trial builds -------------------------------------------------------------------

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """Moves `model` to the trial's device; on several slots returns it wrapped for data parallelism."""
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"wrap_model() takes a torch.nn.Module, got {type(model).__name__}")
        model = model.to(self.device)
        if self._amp is not None:
            self._amp.wrap_forward(model)
        self.models.append(model)
        wrapped = model if self.distributed.get_size() <= 1 else _distributed.wrap_model(model, self.device)
        self.wrapped_models.append(wrapped)
        return wrapped

    def wrap_optimizer(
        self,
        optimizer: torch.optim.Optimizer,
        backward_passes_per_step: int = 1,
        fp16_compression: bool | None = None,
        average_aggregated_gradients: bool | None = None,
    ) -> torch.optim.Optimizer:
        """`backward_passes_per_step`: how many `context.backward` calls one `train_batch` makes
        before its `step_optimizer`; as in Determined with torch DDP, gradients simply add up over
        them. `average_aggregated_gradients` (default: the config's) divides the gradients that
        `optimizations.aggregation_frequency` sums by that frequency before the step.
        `fp16_compression` is Horovod's, which pedl (torch DDP) does not use."""
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"wrap_optimizer() takes a torch.optim.Optimizer, got {type(optimizer).__name__}")
        if isinstance(backward_passes_per_step, bool) or not isinstance(backward_passes_per_step, int):
            raise TypeError(
                f"wrap_optimizer(backward_passes_per_step=...) takes an int, got {backward_passes_per_step!r}"
            )
        if backward_passes_per_step < 1:
            raise ValueError(
                f"wrap_optimizer(backward_passes_per_step={backward_passes_per_step}): it must be at least 1"
            )
        if fp16_compression:
            logger.warning(
                "wrap_optimizer(fp16_compression=True) has no effect: it compresses Horovod's gradient "
                "exchange, and pedl exchanges gradients with torch DDP"
            )
        if average_aggregated_gradients is not None:  # else the config's, known once training starts
            self._averaged[id(optimizer)] = bool(average_aggregated_gradients)
        self.optimizers.append(optimizer)
        return optimizer

    def wrap_lr_scheduler(
        self, lr_scheduler: Any, step_mode: LRScheduler.StepMode, frequency: int = 1
    ) -> Any:
        self.lr_schedulers.append(LRScheduler(lr_scheduler, step_mode, frequency))
        return lr_scheduler

    def wrap_reducer(
        self,
        reducer: MetricReducer | Callable[[list[Any]], Any],
        name: str | None = None,
        for_training: bool = True,
        for_validation: bool = True,
    ) -> MetricReducer:
        """Registers a custom metric: a MetricReducer, or a function of every `update(value)` of a
        step or validation pass (returned wrapped, with `.update`); reported under `name`."""
        return self.reducers.wrap(reducer, name, for_training, for_validation)

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

    def use_amp(self) -> None:
        """Determined's `context.experimental.use_amp()`, also reachable here; see `_amp`."""
        self.experimental.use_amp()

    def _use_amp(self, amp: AutoAmp) -> None:
        if self.models:
            raise ValueError("use_amp() must be called before wrap_model(), as in Determined")
        self.wrap_scaler(amp.scaler)
        self._amp = amp

    def configure_apex_amp(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("configure_apex_amp(): pedl does not support NVIDIA Apex; use torch.amp")

    # --- training ---------------------------------------------------------------------------------

    def to_device(self, data: Any) -> Any:
        return to_device(data, self.device)

    def backward(
        self, loss: torch.Tensor, gradient: Any = None, retain_graph: bool = False, create_graph: bool = False
    ) -> None:
        if self._amp is not None:
            loss = self._amp.scaler.scale(loss)
        with self._no_sync_unless_updating():
            loss.backward(gradient=gradient, retain_graph=retain_graph, create_graph=create_graph)

    def step_optimizer(
        self,
        optimizer: torch.optim.Optimizer,
        clip_grads: Callable[[Iterator[torch.nn.Parameter]], None] | None = None,
        auto_zero_grads: bool = True,
        scaler: Any = None,
    ) -> None:
        """Steps `optimizer`, but with `optimizations.aggregation_frequency` N only on every N-th
        batch (gradients add up until then, averaged if average_aggregated_gradients), as Determined."""
        if optimizer not in self.optimizers:
            raise ValueError(
                "step_optimizer() was given an optimizer that was not passed to wrap_optimizer()"
            )
        every = self._aggregation_frequency
        if every > 1 and not auto_zero_grads:
            raise ValueError(
                f"step_optimizer(auto_zero_grads=False): optimizations.aggregation_frequency is {every}, "
                "which needs auto_zero_grads=True (as in Determined)"
            )
        if not self._updates_now():
            return
        parameters = [p for group in optimizer.param_groups for p in group["params"]]
        if every > 1 and self._averaged.get(id(optimizer), self._average_aggregated_default):
            for p in parameters:
                if p.grad is not None:
                    p.grad.div_(every)
        if clip_grads is not None:
            if self._amp is not None:
                self._amp.scaler.unscale_(optimizer)
            clip_grads(iter(parameters))
        if scaler is None and self._amp is not None:
            scaler = self._amp.scaler
        if scaler is not None:
            scaler.step(optimizer)
        else:
            optimizer.step()
        if auto_zero_grads:
            optimizer.zero_grad()
        for scheduler in self.lr_schedulers:
            scheduler.after_optimizer_step()

    # --- what the controller tells the context ----------------------------------------------------

    def _configure_aggregation(self, frequency: int, average: bool) -> None:
        self._aggregation_frequency = frequency
        self._average_aggregated_default = average

    def _updates_now(self) -> bool:
        """Whether the batch being trained ends an aggregation window (always, without aggregation)."""
        return (self.current_train_batch() + 1) % self._aggregation_frequency == 0

    def _after_train_batch(self) -> None:
        """use_amp: the scaler is updated once per batch that stepped, after all its optimizer steps."""
        if self._amp is not None and self._amp.scaler.is_enabled() and self._updates_now():
            self._amp.scaler.update()

    def _no_sync_unless_updating(self) -> contextlib.AbstractContextManager[Any]:
        """Within an aggregation window, DDP need not all-reduce the gradients of every backward pass."""
        stack = contextlib.ExitStack()
        if self._aggregation_frequency > 1 and not self._updates_now():
            for wrapped in self.wrapped_models:
                no_sync = getattr(wrapped, "no_sync", None)
                if no_sync is not None:
                    stack.enter_context(no_sync())
        return stack

    def current_train_batch(self) -> int:
        return self._batches_trained()

    def current_train_epoch(self) -> int:
        return self._epoch()


class PyTorchExperimentalContext:
    """`context.experimental`, as Determined names it."""

    def __init__(self, parent: PyTorchTrialContext) -> None:
        self._parent = parent

    def use_amp(self) -> None:
        """Automatic mixed precision with a default GradScaler (see determined.pytorch._amp); call it
        before wrap_model() and do not call wrap_scaler() too."""
        self._parent._use_amp(AutoAmp.for_device(self._parent.device))
