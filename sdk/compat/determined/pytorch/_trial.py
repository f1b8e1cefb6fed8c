"""`determined.pytorch.PyTorchTrial` on pedl's PyTorch controller.

Two forms run unchanged: the current one (models and optimizers wrapped through the context in
`__init__`, `train_batch(batch, epoch_idx, batch_idx)` calling `context.backward` and
`context.step_optimizer`) and the early one (`build_model`, `optimizer(model)`,
`train_batch(batch, model, epoch_idx, batch_idx)` returning the loss that pedl backpropagates).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.utils.data

from determined.pytorch._callback import TrialCallbacks
from determined.pytorch._context import PyTorchTrialContext
from determined.pytorch._evaluation import evaluation_reducers, reduced_per_batch
from determined.pytorch._reducer import Reducer
from pedl.frameworks.pytorch._adapter import BatchTrialController, ModelArgController, Parts, call_flexible
from pedl.harness.controller import StepResult, TrialController
from pedl.model_def.errors import describe
from pedl.pytorch._optimizations import TorchOptimizations
from pedl.trial import Trial


def _loader(trial: Any, method: str) -> torch.utils.data.DataLoader:
    loader = getattr(trial, method)()
    if hasattr(loader, "get_data_loader") and not isinstance(loader, torch.utils.data.DataLoader):
        loader = loader.get_data_loader()
    if not isinstance(loader, torch.utils.data.DataLoader):
        raise TypeError(
            f"{describe(getattr(type(trial), method))} must return a determined.pytorch.DataLoader "
            f"(or torch.utils.data.DataLoader), got {type(loader).__module__}.{type(loader).__qualname__}"
        )
    return loader


class PyTorchTrial(Trial):
    """Subclass it; pedl constructs it as `TrialClass(context)`."""

    framework_interface = "determined.pytorch.PyTorchTrial"
    trial_context_class = PyTorchTrialContext
    # Data comes from build_training_data_loader/build_validation_data_loader.
    uses_make_data_loaders = False

    def __init__(self, context: PyTorchTrialContext) -> None:
        self.context = context
        self.hparams = context.get_hparams()

    @abc.abstractmethod
    def build_training_data_loader(self) -> Any:
        """The training DataLoader, batched at `context.get_per_slot_batch_size()`."""

    @abc.abstractmethod
    def build_validation_data_loader(self) -> Any:
        """The validation DataLoader."""

    @abc.abstractmethod
    def train_batch(self, *args: Any, **kwargs: Any) -> Any:
        """Trains one batch; returns a dict of metrics with 'loss' (or the loss tensor)."""

    def build_callbacks(self) -> dict[str, Any]:
        return {}

    @classmethod
    def create_controller(
        cls, hparams: dict[str, Any], data_loaders: Sequence[Any] | Any, origin: str
    ) -> TrialController:
        if not any(callable(getattr(cls, n, None)) for n in ("evaluate_batch", "evaluate_full_dataset")):
            raise TypeError(
                f"{cls.__qualname__} does not implement the determined.pytorch.PyTorchTrial method(s): "
                "evaluate_batch (or evaluate_full_dataset)"
            )
        context = cls.trial_context_class.for_running_trial(hparams)
        trial = cls(context)
        callbacks = TrialCallbacks(trial.build_callbacks(), describe(cls.build_callbacks))
        controller = controller_for(trial, context)
        if callbacks:
            if not isinstance(controller, ContextController):
                raise TypeError(
                    f"{describe(cls.build_callbacks)} returned callbacks; pedl runs PyTorchCallback "
                    "objects for trials that wrap their models through the context, not build_model()"
                )
            controller.callbacks = callbacks
        return controller


def controller_for(trial: PyTorchTrial, context: PyTorchTrialContext) -> BatchTrialController:
    """The controller that trains `trial` (either form) on pedl's PyTorch loop."""
    # A trial whose __init__ does not call PyTorchTrial.__init__ still has both.
    if not hasattr(trial, "context"):
        trial.context = context
    if not hasattr(trial, "hparams"):
        trial.hparams = context.get_hparams()
    training = _loader(trial, "build_training_data_loader")
    validation = _loader(trial, "build_validation_data_loader")
    kind = ModelArgController if callable(getattr(type(trial), "build_model", None)) else ContextController
    controller = kind(trial, training, validation, context.device)
    context._batches_trained = lambda: (
        controller.batches_trained if controller.current_batch is None else controller.current_batch
    )
    context._epoch = lambda: controller._stream.epoch
    return controller


class ContextController(BatchTrialController):
    """The current form: the trial steps its own optimizers through the context."""

    auto_step = False
    _per_batch: list[dict[str, Any]] | None = None  # evaluate_batch's outputs, for SUM/MAX/MIN
    callbacks = TrialCallbacks({}, "build_callbacks()")  # the trial's, set by create_controller

    def _parts(self, trial: Any) -> Parts:
        context: PyTorchTrialContext = trial.context
        for what, items in (("wrap_model", context.models), ("wrap_optimizer", context.optimizers)):
            if not items:
                raise TypeError(
                    f"{type(trial).__qualname__}.__init__ called no context.{what}(); wrap each model and "
                    "optimizer so that pedl can checkpoint and distribute them"
                )
        return Parts(context.models, context.optimizers, context.lr_schedulers, context.wrapped_models)

    def configure_optimizations(self, opts: TorchOptimizations) -> None:
        super().configure_optimizations(opts)
        context = self.trial.context
        context._configure_aggregation(opts.aggregation_frequency, opts.average_aggregated_gradients)

    def _call_train(self, batch: Any, epoch_idx: int, batch_idx: int) -> Any:
        self.callbacks.before_batch(epoch_idx)
        out = self.trial.train_batch(batch, epoch_idx, batch_idx)
        self.trial.context._after_train_batch()
        # The stream has already drawn this batch: a new epoch there means this one ended it.
        self.callbacks.after_batch(epoch_idx, self._stream.epoch != epoch_idx)
        return out

    def _call_evaluate(self, batch: Any, batch_idx: int) -> Any:
        out = call_flexible(self.trial.evaluate_batch, batch, batch_idx)
        if isinstance(out, dict) and self._per_batch is not None:
            self._per_batch.append(dict(out))
        return out

    def train_until(self, total_batches: int) -> StepResult:
        reducers = self.trial.context.reducers
        reducers.reset(training=True)
        result = super().train_until(total_batches)
        if result.num_batches:
            result.metrics.update(reducers.metrics(training=True))
            self.callbacks.step_ended(result.metrics)
        return result

    def validate(self) -> dict[str, Any]:
        """Means of evaluate_batch's metrics over the batches, or what evaluation_reducer() names for
        each (SUM, MAX, MIN), plus the wrapped reducers' metrics."""
        self.callbacks.validation_started()
        reducers = self.trial.context.reducers
        reducers.reset(training=False)
        chosen = evaluation_reducers(self.trial)
        self._per_batch = [] if any(r is not Reducer.AVG for r in chosen.values()) else None
        try:
            metrics = super().validate()
            if self._per_batch is not None:
                metrics.update(reduced_per_batch(self._per_batch, metrics, chosen))
        finally:
            self._per_batch = None
        metrics.update(reducers.metrics(training=False))
        self.callbacks.validation_ended(metrics)
        return metrics

    def save(self, path: Path) -> None:
        super().save(path)
        self.callbacks.saved(str(path))

    def _call_full_dataset(self, loader: torch.utils.data.DataLoader) -> Any:
        return self.trial.evaluate_full_dataset(loader)

    def _training_state(self) -> dict[str, Any]:
        state = super()._training_state()
        state["wrapped_scalers"] = [s.state_dict() for s in self.trial.context.scalers]
        if self.callbacks:
            self.callbacks.saving(state)
        return state

    def _restore_training_state(self, state: dict[str, Any]) -> None:
        super()._restore_training_state(state)
        self.callbacks.loading(state)

    def _restore_weights_state(self, state: dict[str, Any]) -> None:
        super()._restore_weights_state(state)
        saved = state.get("wrapped_scalers") or []
        for scaler, scaler_state in zip(self.trial.context.scalers, saved, strict=False):
            if scaler_state:  # a disabled scaler (AMP on a CPU-only machine) saves {}: nothing to restore
                scaler.load_state_dict(scaler_state)

    def _build(self, trial: Any) -> None:
        super()._build(trial)
        # Training mode goes through the wrapped modules too (DDP forwards .train()).
        if len(self._parts_built.models) > 1:
            self._train_model = torch.nn.ModuleList(self._parts_built.models)
