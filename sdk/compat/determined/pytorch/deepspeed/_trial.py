"""`determined.pytorch.deepspeed.DeepSpeedTrial`: a trial whose engines DeepSpeed builds, run by pedl.

The trial makes its engines with `deepspeed.initialize` in `__init__` and wraps them through the
context; `train_batch(dataloader_iter, epoch_idx, batch_idx)` and `evaluate_batch(dataloader_iter,
batch_idx)` draw micro-batches from the iterator they are given. One pedl batch is one optimizer
step: `train_batch` is called once per micro-batch of it (the engine's gradient accumulation
steps) unless the trial called `context.disable_auto_grad_accumulation()`.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

from determined.pytorch._trial import _loader
from determined.pytorch.deepspeed._context import DeepSpeedTrialContext
from pedl.harness.controller import TrialController
from pedl.model_def.errors import describe
from pedl.trial import Trial


class DeepSpeedTrial(Trial):
    """Subclass it; pedl constructs it as `TrialClass(context)`."""

    framework_interface = "determined.pytorch.deepspeed.DeepSpeedTrial"
    trial_context_class = DeepSpeedTrialContext
    uses_make_data_loaders = False

    def __init__(self, context: DeepSpeedTrialContext) -> None:
        self.context = context
        self.hparams = context.get_hparams()

    @abc.abstractmethod
    def build_training_data_loader(self) -> Any:
        """The training DataLoader, batched at `context.train_micro_batch_size_per_gpu`."""

    @abc.abstractmethod
    def build_validation_data_loader(self) -> Any:
        """The validation DataLoader."""

    @abc.abstractmethod
    def train_batch(self, dataloader_iter: Any, epoch_idx: int, batch_idx: int) -> Any:
        """Trains one micro-batch drawn from `dataloader_iter`; returns a dict of metrics (or the
        loss tensor, reported as 'loss')."""

    @classmethod
    def create_controller(
        cls, hparams: dict[str, Any], data_loaders: Sequence[Any] | Any, origin: str
    ) -> TrialController:
        from determined.pytorch.deepspeed._controller import skip_shm_comm_op

        skip_shm_comm_op()
        context = cls.trial_context_class.for_running_trial(hparams)
        return deepspeed_controller(cls(context), context)


def deepspeed_controller(trial: Any, context: DeepSpeedTrialContext) -> Any:
    """pedl's DeepSpeed controller for a built trial (by the harness, or by a script for
    `det_ds.Trainer`), once the trial is known to evaluate and to have wrapped its engines."""
    from determined.pytorch.deepspeed._controller import DeepSpeedController

    cls = type(trial)
    if not any(callable(getattr(cls, n, None)) for n in ("evaluate_batch", "evaluate_full_dataset")):
        raise TypeError(
            f"{cls.__qualname__} does not implement the determined.pytorch.deepspeed.DeepSpeedTrial "
            "method(s): evaluate_batch (or evaluate_full_dataset)"
        )
    if not hasattr(trial, "context"):
        trial.context = context
    if not context.models:
        raise TypeError(
            f"{describe(cls.__init__)} called no context.wrap_model_engine(); wrap each engine "
            "deepspeed.initialize() returns so that pedl can train and checkpoint it"
        )
    return DeepSpeedController(
        trial,
        context,
        _loader(trial, "build_training_data_loader"),
        _loader(trial, "build_validation_data_loader"),
    )
