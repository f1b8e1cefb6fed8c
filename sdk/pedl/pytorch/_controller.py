"""PyTorchTrialController: runs a PyTorchTrial's training, validation and checkpoints."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.utils.data

from pedl._metrics import to_plain
from pedl.harness.controller import StepResult
from pedl.model_def.errors import describe
from pedl.pytorch import _checkpoint, _distributed, _rng
from pedl.pytorch._averaging import MetricAverager, first_non_finite
from pedl.pytorch._data import BatchError, batch_length, split_batch, to_device
from pedl.pytorch._optimizations import Precision, TorchOptimizations
from pedl.pytorch._stream import EpochStream
from pedl.pytorch._trial import PyTorchTrial


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _check_loaders(data_loaders: Any, origin: str) -> tuple[torch.utils.data.DataLoader, ...]:
    expected = "a pair (training DataLoader, validation DataLoader)"
    if not isinstance(data_loaders, (tuple, list)) or len(data_loaders) != 2:
        got = type(data_loaders).__name__
        if isinstance(data_loaders, (tuple, list)):
            got += f" of {len(data_loaders)} items"
        raise TypeError(f"{origin} must return {expected}; it returned a {got}")
    for role, loader in zip(("training", "validation"), data_loaders, strict=True):
        if not isinstance(loader, torch.utils.data.DataLoader):
            raise TypeError(
                f"{origin} must return {expected}; its {role} loader is a "
                f"{type(loader).__module__}.{type(loader).__qualname__}, not a pedl.pytorch.DataLoader "
                "or torch.utils.data.DataLoader"
            )
    return tuple(data_loaders)


def _scalar_loss(losses: Any, where: str) -> torch.Tensor:
    loss = losses["loss"] if isinstance(losses, dict) and "loss" in losses else losses
    if isinstance(loss, torch.Tensor) and loss.ndim == 0:
        return loss
    if isinstance(losses, dict):
        raise ValueError(
            f"{where}: losses() returned a dict without a scalar tensor under the key 'loss' "
            f"(keys: {', '.join(map(repr, losses)) or 'none'}); the 'loss' entry is what gets backpropagated"
        )
    shape = f" of shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor) else ""
    raise ValueError(
        f"{where}: losses() must return a scalar tensor or a dict with a scalar 'loss' tensor, "
        f"got a {type(loss).__name__}{shape}"
    )


def _prepare(batch: Any, device: torch.device, kind: str, number: int) -> tuple[Any, Any]:
    """(input, target) on `device`; errors name the batch ("training batch 12: ...")."""
    if type(batch) in (tuple, list) and len(batch) == 2:
        # The common batch, a plain pair of tensors: what split_batch and to_device would do.
        inputs, labels = batch
        if isinstance(inputs, torch.Tensor) and isinstance(labels, torch.Tensor):
            return inputs.to(device, non_blocking=True), labels.to(device, non_blocking=True)
    try:
        inputs, labels = split_batch(batch)
        return to_device(inputs, device, "batch[0]"), to_device(labels, device, "batch[1]")
    except BatchError as exc:
        raise BatchError(f"{kind} batch {number}: {exc}") from None


class PyTorchTrialController:
    """Implements `pedl.harness.controller.TrialController` for PyTorchTrial."""

    def __init__(
        self,
        trial: PyTorchTrial,
        training_loader: torch.utils.data.DataLoader,
        validation_loader: torch.utils.data.DataLoader,
        device: torch.device | None = None,
    ) -> None:
        self.trial = trial
        self.device = device or default_device()
        # Set when the harness runs this trial on several slots (a torch.distributed group).
        self._ranks = _distributed.current()
        if self._ranks is not None:
            training_loader = _distributed.shard_loader(training_loader, self._ranks, pad=True)
            validation_loader = _distributed.shard_loader(validation_loader, self._ranks, pad=False)
        self.training_loader = training_loader
        self.validation_loader = validation_loader
        self._batches_trained = 0
        self._stream = EpochStream(training_loader)
        # One reusable context for every batch's training_metrics() (building one costs as much as
        # entering it).
        self._no_grad = torch.no_grad()
        self.configure_optimizations(TorchOptimizations())
        self._build(trial)

    # --- hooks: what one trial interface does per batch (the loop, checkpoints and distribution are
    # shared; `pedl.frameworks.pytorch` and `determined.pytorch` override these three) ---------------

    def _build(self, trial: Any) -> None:
        """Sets model, optimizer, lr_scheduler and `_metrics_origin` (None: no per-batch metrics)."""
        model = trial.build_model(trial.hparams)
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"{describe(trial.build_model)} must return a torch.nn.Module, got {type(model)}")
        self.model = model.to(self.device)
        trial.model = self.model
        # Training runs through DDP; validation and checkpoints use the plain module.
        self._train_model = self.model
        if self._ranks is not None:
            self._train_model = _distributed.wrap_model(self.model, self.device)
        optimizer = trial.optimizer(self.model)
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(
                f"{describe(trial.optimizer)} must return a torch.optim.Optimizer, got {type(optimizer)}"
            )
        self.optimizer = optimizer
        self.lr_scheduler = trial.create_lr_scheduler(optimizer)
        if self.lr_scheduler is not None and not callable(getattr(self.lr_scheduler, "step", None)):
            raise TypeError(
                f"{describe(trial.create_lr_scheduler)} must return an LR scheduler with step(), "
                f"got {type(self.lr_scheduler)}"
            )
        has_metrics = type(trial).training_metrics is not PyTorchTrial.training_metrics
        self._metrics_origin: str | None = "training_metrics()" if has_metrics else None

    def configure_optimizations(self, opts: TorchOptimizations) -> None:
        """The config's `optimizations` (gradient aggregation, mixed precision); see _optimizations."""
        self.optimizations = opts
        self._precision = Precision(opts, self.device)

    def _train_batch(self, number: int) -> tuple[torch.Tensor, dict[str, Any] | None, int]:
        """Trains training batch `number` (1-based, across restarts): (loss, extra metrics, inputs)."""
        trial, optimizer, scheduler = self.trial, self.optimizer, self.lr_scheduler
        precision, every = self._precision, self.optimizations.aggregation_frequency
        inputs, labels = _prepare(self._stream.next(), self.device, "training", number)
        if precision.enabled:
            with precision.autocast():
                predictions = self._train_model(inputs)
                losses = trial.losses(predictions, labels)
        else:
            predictions = self._train_model(inputs)
            losses = trial.losses(predictions, labels)
        if type(losses) is torch.Tensor and losses.ndim == 0:  # the common case, kept cheap
            loss = losses
        else:
            loss = _scalar_loss(losses, f"training batch {number}")
        if every == 1 and precision.scaler is None:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
        else:
            # Gradients add up over `every` batches (kept across steps and in checkpoints).
            scale = 1.0 / every if self.optimizations.average_aggregated_gradients else 1.0
            precision.backward(loss * scale if every > 1 else loss)
            if number % every == 0:
                precision.step(optimizer)
                optimizer.zero_grad()
                if scheduler is not None:
                    scheduler.step()
        metrics = None
        if self._metrics_origin is not None:
            with self._no_grad:
                metrics = trial.training_metrics(predictions, labels, losses)
        return loss, metrics, batch_length(inputs)

    def _evaluate_batch(self, batch: Any, index: int) -> dict[str, Any]:
        """The metrics of validation batch `index` (0-based), losses included."""
        trial = self.trial
        inputs, labels = _prepare(batch, self.device, "validation", index + 1)
        predictions = self.model(inputs)
        losses = trial.losses(predictions, labels)
        metrics = trial.validation_metrics(predictions, labels, losses)
        if not isinstance(metrics, dict):
            raise TypeError(f"{describe(trial.validation_metrics)} must return a dict, got {type(metrics)}")
        loss_values = losses if isinstance(losses, dict) else {"loss": losses}
        return {**loss_values, **metrics}

    @classmethod
    def from_trial_class(
        cls,
        trial_class: type[PyTorchTrial],
        hparams: dict[str, Any],
        data_loaders: Sequence[Any] | Any,
        origin: str = "make_data_loaders()",
        device: torch.device | None = None,
    ) -> PyTorchTrialController:
        training, validation = _check_loaders(data_loaders, origin)
        return cls(trial_class(hparams), training, validation, device)

    def epoch_batches(self) -> int | None:
        """One epoch in batches: this rank's training data loader's length (None: it has no length).
        Determined's definition of a PyTorch trial's epoch where records_per_epoch does not give one."""
        try:
            return len(self.training_loader)
        except TypeError:
            return None

    @property
    def batches_trained(self) -> int:
        return self._batches_trained

    def train_until(self, total_batches: int) -> StepResult:
        count = total_batches - self._batches_trained
        if count <= 0:
            return StepResult()
        averager = MetricAverager if self._ranks is None else _distributed.ShardAverager
        extra = averager(self._metrics_origin) if self._metrics_origin is not None else None
        losses_seen: list[torch.Tensor] = []
        num_inputs = 0
        self._train_model.train()
        first = self._batches_trained + 1
        for i in range(count):
            loss, metrics, inputs = self._train_batch(first + i)
            num_inputs += inputs
            losses_seen.append(loss.detach())
            if extra is not None and metrics is not None:
                extra.add(metrics)
        self._batches_trained += count
        losses = torch.stack(losses_seen)
        bad = first_non_finite(losses)
        if bad is not None:
            raise FloatingPointError(
                f"training batch {total_batches - count + bad + 1}: the loss is {losses_seen[bad].item()}"
            )
        if self._ranks is not None:
            return self._reduced_step(extra, losses, count, num_inputs)
        metrics = extra.result() if extra is not None else {}
        metrics["loss"] = to_plain(losses.to(torch.float64).mean())
        return StepResult(metrics=metrics, num_batches=count, num_inputs=num_inputs)

    def _reduced_step(
        self, extra: MetricAverager | None, losses: torch.Tensor, count: int, num_inputs: int
    ) -> StepResult:
        """The step's metrics over every rank's batches; `num_inputs` counts every rank's samples."""
        assert self._ranks is not None
        sums = extra.sums() if isinstance(extra, _distributed.ShardAverager) else {}
        sums["loss"] = (losses.to(torch.float64).sum().cpu().numpy(), len(losses))
        metrics, _, inputs = _distributed.reduce_means(self._ranks, sums, num_inputs)
        return StepResult(metrics=metrics, num_batches=count, num_inputs=sum(inputs))

    def validate(self) -> dict[str, Any]:
        # Validation must not change training's randomness: a trial validated at different
        # points (or resumed) trains identically.
        saved = _rng.capture()
        kind = MetricAverager if self._ranks is None else _distributed.ShardAverager
        averager = kind("validation_metrics()")
        self.model.eval()
        try:
            with torch.no_grad():
                for index, batch in enumerate(self.validation_loader):
                    averager.add(self._evaluate_batch(batch, index))
        finally:
            self.model.train()
            _rng.restore(saved)
        if isinstance(averager, _distributed.ShardAverager):
            assert self._ranks is not None
            metrics, batches, _ = _distributed.reduce_means(self._ranks, averager.sums())
            if batches == 0:
                raise RuntimeError("the validation data loader produced no batches")
            return metrics
        if averager.batches == 0:
            raise RuntimeError("the validation data loader produced no batches")
        return averager.result()

    def save(self, path: Path) -> None:
        """Writes the checkpoint; with several ranks every rank must call it, and only the chief writes."""
        state = self._training_state()
        if self._ranks is not None:
            # Every rank's RNG states and data position, so that each resumes exactly.
            own = {"rng": state["rng"], "data_position": state["data_position"]}
            state["ranks"] = _distributed.gather(self._ranks, own)
            if not self._ranks.is_chief:
                return
        _checkpoint.save(self, Path(path), state)

    def load(self, path: Path) -> None:
        _checkpoint.load(self, Path(path))

    def warm_start(self, path: Path) -> None:
        _checkpoint.warm_start(self, Path(path))

    # Used by _checkpoint.
    def _training_state(self) -> dict[str, Any]:
        return {
            "batches_trained": self._batches_trained,
            "optimizer": self.optimizer.state_dict(),
            "lr_scheduler": None if self.lr_scheduler is None else self.lr_scheduler.state_dict(),
            "data_position": self._stream.state(),
            "rng": _rng.capture(),
            # Mid-way through an aggregation of gradients, the partial sums go with the checkpoint.
            "accumulated_grads": self._partial_grads(),
            "grad_scaler": None if self._precision.scaler is None else self._precision.scaler.state_dict(),
        }

    def _partial_grads(self) -> list[torch.Tensor | None] | None:
        if self._batches_trained % self.optimizations.aggregation_frequency == 0:
            return None
        return [None if p.grad is None else p.grad.detach().clone() for p in self.model.parameters()]

    def _restore_weights_state(self, state: dict[str, Any]) -> None:
        """What a warm start takes over: optimizer, LR scheduler and gradient-scaler state."""
        self.optimizer.load_state_dict(state["optimizer"])
        if self.lr_scheduler is not None and state["lr_scheduler"] is not None:
            self.lr_scheduler.load_state_dict(state["lr_scheduler"])
        if self._precision.scaler is not None and state.get("grad_scaler") is not None:
            self._precision.scaler.load_state_dict(state["grad_scaler"])

    def _restore_training_state(self, state: dict[str, Any]) -> None:
        self._restore_weights_state(state)
        self._batches_trained = int(state["batches_trained"])
        grads = state.get("accumulated_grads")
        if grads is not None:
            for param, grad in zip(self.model.parameters(), grads, strict=True):
                param.grad = None if grad is None else grad.to(param.device)
        own = state
        per_rank = state.get("ranks")
        # A checkpoint of as many ranks gives each rank its own states; otherwise all take the chief's.
        if self._ranks is not None and per_rank is not None and len(per_rank) == self._ranks.world_size:
            own = per_rank[self._ranks.rank]
        self._stream.restore(own["data_position"])
        _rng.restore(own["rng"])
