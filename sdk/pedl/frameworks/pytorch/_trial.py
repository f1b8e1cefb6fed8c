"""`pedl.frameworks.pytorch.PyTorchTrial`: PEDL 0.10's and 0.11's PyTorch interface.

PEDL 0.11 model definitions implement `build_model(self)`, `optimizer(self, model)`,
`train_batch(self, batch, model, epoch_idx, batch_idx)` (a dict with "loss", which PEDL
backpropagates) and `evaluate_batch(self, batch, model)` or `evaluate_full_dataset(self,
data_loader, model)`. PEDL 0.10 ones still implement the seed's `losses`/`validation_metrics`
(with `build_model(self, hparams)`, `optimizer(self, model, hparams)`). Both run on the seed
PyTorch controller.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from typing import Any, cast

import torch

from pedl.frameworks._arity import accept_hparams
from pedl.frameworks.pytorch._adapter import ModelArgController
from pedl.harness.controller import TrialController
from pedl.pytorch._controller import PyTorchTrialController, _check_loaders
from pedl.trial import Trial

# Methods each generation needs; one of the evaluate methods is enough for 0.11.
PEDL_011_METHODS = ("build_model", "optimizer", "train_batch")
PEDL_010_METHODS = ("build_model", "optimizer", "losses", "validation_metrics")


def _missing(cls: type, names: Sequence[str]) -> list[str]:
    return [n for n in names if not callable(getattr(cls, n, None))]


def check_interface(cls: type) -> str:
    """ "0.11" or "0.10" for a complete trial class; else one error naming the missing methods."""
    if callable(getattr(cls, "train_batch", None)):
        missing = _missing(cls, PEDL_011_METHODS)
        if not any(callable(getattr(cls, n, None)) for n in ("evaluate_batch", "evaluate_full_dataset")):
            missing.append("evaluate_batch (or evaluate_full_dataset)")
        generation = "0.11"
    elif callable(getattr(cls, "losses", None)):
        missing, generation = _missing(cls, PEDL_010_METHODS), "0.10"
    else:
        raise TypeError(
            f"{cls.__qualname__} implements neither train_batch() (PEDL 0.11's PyTorchTrial) nor losses() "
            "(PEDL 0.10's); implement build_model, optimizer, train_batch and evaluate_batch"
        )
    if missing:
        raise TypeError(
            f"{cls.__qualname__} does not implement the PyTorchTrial (PEDL {generation}) method(s): "
            f"{', '.join(missing)}"
        )
    return generation


class PyTorchTrial(Trial):
    """Subclass it; PEDL builds it as `TrialClass(hparams)` and runs the training loop."""

    framework_interface = "PyTorchTrial"
    model: torch.nn.Module

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """The seed controller calls `build_model(hparams)` and `optimizer(model)`; 0.11's
        `build_model(self)` and 0.10's `optimizer(self, model, hparams)` are adapted to that."""
        super().__init_subclass__(**kwargs)
        accept_hparams(cls, ("build_model",))
        optimizer = cls.__dict__.get("optimizer")
        if inspect.isfunction(optimizer) and len(inspect.signature(optimizer).parameters) == 3:

            def make(method: Any) -> Any:
                @functools.wraps(method)
                def with_hparams(self: PyTorchTrial, model: torch.nn.Module, *rest: Any) -> Any:
                    return method(self, model, *(rest or (self.hparams,)))

                return with_hparams

            cast(Any, cls).optimizer = make(optimizer)  # a 0.10 trial's optimizer, wrapped

    def create_lr_scheduler(self, optimizer: torch.optim.Optimizer) -> Any | None:
        """Optional: an `LRScheduler` (or a torch scheduler, stepped every batch)."""
        return None

    def training_metrics(self, predictions: Any, labels: Any, losses: Any) -> dict[str, Any]:
        """PEDL 0.10 only: extra metrics of a training batch."""
        return {}

    @classmethod
    def create_controller(
        cls, hparams: dict[str, Any], data_loaders: Sequence[Any] | Any, origin: str
    ) -> TrialController:
        generation = check_interface(cls)
        training, validation = _check_loaders(data_loaders, origin)
        trial = cls(hparams)
        if generation == "0.11":
            return ModelArgController(trial, training, validation)
        return PyTorchTrialController(cast(Any, trial), training, validation)  # a 0.10 trial, duck-typed
