"""KerasTrial: the Keras 3 (TensorFlow backend) interface; see the package docstring."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any

import keras

from pedl.trial import Trial

if TYPE_CHECKING:
    from pedl.harness.distributed import ProcessGroup


class KerasTrial(Trial):
    """Subclass it and return a compiled model from `build_model`; PEDL runs training and validation."""

    framework_interface = "KerasTrial"
    model: keras.Model

    @abc.abstractmethod
    def build_model(self, hparams: dict[str, Any]) -> keras.Model:
        """The model for this trial's hyperparameters, compiled (optimizer, loss, metrics); or
        uncompiled, with `optimizer()` and `loss()` defined for pedl to compile it (PEDL 0.11)."""

    def batch_size(self) -> int | None:
        """The batch size for data given as NumPy arrays; datasets and PyDatasets batch themselves."""
        return None

    @classmethod
    def start_workers(cls, group: ProcessGroup) -> None:
        """On several slots: starts this process's MultiWorkerMirroredStrategy (called by the harness
        before make_data_loaders and build_model, which then run under it)."""
        from pedl.keras._distributed import start_workers

        start_workers(group)
