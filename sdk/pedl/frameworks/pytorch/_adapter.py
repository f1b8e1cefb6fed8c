"""Trial interfaces built around `train_batch`/`evaluate_batch` (PEDL 0.11, Determined), on the seed
PyTorch controller.

`PyTorchTrialController` owns the loop, the data position, distribution, metric averaging and
checkpoints; these subclasses only say how one batch is trained or evaluated and what the models
and optimizers are, so every interface resumes exactly and trains distributed the same way.
"""

from __future__ import annotations

import abc
import inspect
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.utils.data

from pedl.frameworks.pytorch._lr import LRScheduler, StateGroup
from pedl.model_def.errors import ModelDefinitionError, describe
from pedl.pytorch import _rng
from pedl.pytorch._controller import PyTorchTrialController
from pedl.pytorch._data import BatchError, batch_length, to_device
from pedl.pytorch._optimizations import TorchOptimizations


def call_flexible(fn: Callable[..., Any], *args: Any) -> Any:
    """Calls `fn` with as many leading `args` as its signature takes (interfaces added arguments
    over releases: `build_model(self)` / `build_model(self, hparams)`)."""
    params = list(inspect.signature(fn).parameters.values())
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return fn(*args)
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return fn(*args[: len(positional)])


def as_lr_scheduler(value: Any, origin: str) -> LRScheduler | None:
    """An `LRScheduler`, or a bare torch scheduler stepped every batch (the seed interface's rule)."""
    if value is None or isinstance(value, LRScheduler):
        return value
    if callable(getattr(value, "step", None)) and callable(getattr(value, "state_dict", None)):
        return LRScheduler(value, LRScheduler.StepMode.STEP_EVERY_BATCH)
    raise TypeError(
        f"{origin} must return an LRScheduler or a torch LR scheduler, got {type(value).__name__}"
    )


@dataclass
class Parts:
    """What a trial built: models (plain, on the device), the modules `train_batch` is handed
    (DDP-wrapped on several slots), optimizers and LR schedulers."""

    models: list[torch.nn.Module]
    optimizers: list[torch.optim.Optimizer]
    schedulers: list[LRScheduler] = field(default_factory=list)
    train_models: list[torch.nn.Module] = field(default_factory=list)


class BatchTrialController(PyTorchTrialController, abc.ABC):
    """A trial that trains and evaluates one batch per call; subclasses bind one interface."""

    # True when the harness runs zero_grad/backward/step itself (train_batch returns the loss).
    auto_step = True
    # A trial of a later interface (checked by check_interface), called by duck typing.
    trial: Any
    # One optimizer, or a StateGroup of several that steps and checkpoints them together.
    optimizer: Any

    def __init__(
        self,
        trial: Any,
        training_loader: torch.utils.data.DataLoader,
        validation_loader: torch.utils.data.DataLoader,
        device: torch.device | None = None,
    ) -> None:
        self._full_validation_loader = validation_loader
        # Epochs that ended since the optimizers last stepped (optimizations.aggregation_frequency).
        self._epochs_ended = 0
        # The batch being trained (0-based, across restarts) while train_batch runs, else None.
        self.current_batch: int | None = None
        super().__init__(trial, training_loader, validation_loader, device)

    @abc.abstractmethod
    def _parts(self, trial: Any) -> Parts:
        """What the trial built (models on the device, optimizers, LR schedulers)."""

    @abc.abstractmethod
    def _call_train(self, batch: Any, epoch_idx: int, batch_idx: int) -> Any:
        """The interface's train_batch call on a batch already on the device."""

    @abc.abstractmethod
    def _call_evaluate(self, batch: Any, batch_idx: int) -> Any:
        """The interface's evaluate_batch call on a batch already on the device."""

    @abc.abstractmethod
    def _call_full_dataset(self, loader: torch.utils.data.DataLoader) -> Any:
        """The interface's evaluate_full_dataset call."""

    def _has(self, name: str) -> bool:
        return callable(getattr(self.trial, name, None))

    # --- PyTorchTrialController hooks -----------------------------------------------------------

    def configure_optimizations(self, opts: TorchOptimizations) -> None:
        """As Determined runs these trials: `aggregation_frequency` (with `average_aggregated_gradients`)
        steps the optimizers on every N-th batch, and `auto_tf32`, true unless the config says false,
        sets torch's TF32 flags. `mixed_precision` is Apex's in Determined: refused (use_amp or
        wrap_scaler are the torch AMP these trials use)."""
        if opts.mixed_precision:
            raise ModelDefinitionError(
                "optimizations.mixed_precision is implemented for the seed PyTorchTrial only; remove it for "
                f"{type(self.trial).__qualname__} (Determined's torch AMP: context.experimental.use_amp() "
                "or context.wrap_scaler())"
            )
        if opts.auto_tf32 is None:
            opts = replace(opts, auto_tf32=True)
        super().configure_optimizations(opts)

    def _build(self, trial: Any) -> None:
        parts = self._parts(trial)
        if not parts.models:
            raise TypeError(f"{type(trial).__qualname__} built no model")
        if not parts.optimizers:
            raise TypeError(f"{type(trial).__qualname__} built no optimizer")
        self._parts_built = parts
        self.model = parts.models[0] if len(parts.models) == 1 else torch.nn.ModuleList(parts.models)
        self._train_model = self.model
        self.optimizer = parts.optimizers[0] if len(parts.optimizers) == 1 else StateGroup(parts.optimizers)
        self.lr_scheduler = StateGroup(parts.schedulers) if parts.schedulers else None
        self._metrics_origin = describe(type(trial).train_batch)

    def _train_batch(self, number: int) -> tuple[torch.Tensor, dict[str, Any] | None, int]:
        batch_idx = number - 1
        self.current_batch = batch_idx
        epoch_idx = self._stream.epoch
        raw = self._stream.next()
        epoch_ended = self._stream.epoch != epoch_idx
        batch = self._on_device(raw, "training", number)
        every = self.optimizations.aggregation_frequency
        updates = number % every == 0  # the batch ends an aggregation window (always, without one)
        if self.auto_step and (number - 1) % every == 0:
            self.optimizer.zero_grad()
        out = self._call_train(batch, epoch_idx, batch_idx)
        metrics = self._training_output(out, number)
        loss = metrics.pop("loss")
        if self.auto_step:
            if not loss.requires_grad:
                raise TypeError(
                    f"{self._metrics_origin}: training batch {number}: the 'loss' tensor has no gradient "
                    "(was it detached or computed under torch.no_grad()?)"
                )
            averaged = every > 1 and self.optimizations.average_aggregated_gradients
            (loss / every if averaged else loss).backward()
            if updates:
                self.optimizer.step()
                for scheduler in self._parts_built.schedulers:
                    scheduler.after_optimizer_step()
        self._epochs_ended += epoch_ended
        if updates:  # as Determined: LR schedulers step only with the optimizers
            for scheduler in self._parts_built.schedulers:
                scheduler.after_update(range(batch_idx - every + 1, batch_idx + 1), self._epochs_ended)
            self._epochs_ended = 0
        self.current_batch = None
        return loss, metrics, batch_length(batch)

    def _evaluate_batch(self, batch: Any, index: int) -> dict[str, Any]:
        out = self._call_evaluate(self._on_device(batch, "validation", index + 1), index)
        if not isinstance(out, dict):
            raise TypeError(
                f"{describe(type(self.trial).evaluate_batch)} must return a dict of metrics, "
                f"got {type(out).__name__}"
            )
        return out

    def validate(self) -> dict[str, Any]:
        if self._has("evaluate_batch"):
            return super().validate()
        # evaluate_full_dataset: the trial sees the whole (unsharded) validation set, on every rank.
        saved = _rng.capture()
        self.model.eval()
        try:
            with torch.no_grad():
                out = self._call_full_dataset(self._full_validation_loader)
        finally:
            self.model.train()
            _rng.restore(saved)
        if not isinstance(out, dict):
            raise TypeError(
                f"{describe(type(self.trial).evaluate_full_dataset)} must return a dict of metrics, "
                f"got {type(out).__name__}"
            )
        from pedl._metrics import to_plain

        return {str(k): to_plain(v) for k, v in out.items()}

    # --- helpers ---------------------------------------------------------------------------------

    def _on_device(self, batch: Any, kind: str, number: int) -> Any:
        try:
            return to_device(batch, self.device)
        except BatchError as exc:
            raise BatchError(f"{kind} batch {number}: {exc}") from None

    def _training_output(self, out: Any, number: int) -> dict[str, Any]:
        where = f"{self._metrics_origin}: training batch {number}"
        if isinstance(out, torch.Tensor):
            out = {"loss": out}
        if not isinstance(out, dict):
            raise TypeError(f"{where}: must return a dict of metrics with 'loss', got {type(out).__name__}")
        if "loss" not in out:
            raise ValueError(
                f"{where}: the returned dict has no 'loss' (keys: {', '.join(map(repr, out)) or 'none'}); "
                "return the training loss under 'loss'"
            )
        loss = out["loss"]
        if isinstance(loss, numbers.Real) and not self.auto_step:
            loss = torch.tensor(float(loss))
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            shape = f" of shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor) else ""
            raise TypeError(f"{where}: 'loss' must be a scalar tensor, got a {type(loss).__name__}{shape}")
        metrics = dict(out)
        metrics["loss"] = loss.reshape(())
        return metrics


class ModelArgController(BatchTrialController):
    """PEDL 0.11 and Determined's early form: `build_model`, `optimizer(model)`,
    `train_batch(batch, model, epoch_idx, batch_idx)`, `evaluate_batch(batch, model)`."""

    def _parts(self, trial: Any) -> Parts:
        from pedl.pytorch import _distributed

        model = call_flexible(trial.build_model, trial.hparams)
        if not isinstance(model, torch.nn.Module):
            raise TypeError(
                f"{describe(type(trial).build_model)} must return a torch.nn.Module, got {type(model)}"
            )
        model = model.to(self.device)
        trial.model = model
        optimizer = call_flexible(trial.optimizer, model, trial.hparams)
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(
                f"{describe(type(trial).optimizer)} must return a torch.optim.Optimizer, "
                f"got {type(optimizer)}"
            )
        schedulers = []
        if self._has("create_lr_scheduler"):
            scheduler = as_lr_scheduler(
                trial.create_lr_scheduler(optimizer), describe(type(trial).create_lr_scheduler)
            )
            if scheduler is not None:
                schedulers.append(scheduler)
        train_model = model if self._ranks is None else _distributed.wrap_model(model, self.device)
        return Parts([model], [optimizer], schedulers, [train_model])

    def _call_train(self, batch: Any, epoch_idx: int, batch_idx: int) -> Any:
        return self.trial.train_batch(batch, self._parts_built.train_models[0], epoch_idx, batch_idx)

    def _call_evaluate(self, batch: Any, batch_idx: int) -> Any:
        return self.trial.evaluate_batch(batch, self.model)

    def _call_full_dataset(self, loader: torch.utils.data.DataLoader) -> Any:
        return call_flexible(self.trial.evaluate_full_dataset, loader, self.model)
