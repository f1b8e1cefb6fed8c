"""Determined's Keras APIs on pedl. Determined 0.38's: a script's own `model.fit()` with
`det.keras.DeterminedCallback` and `det.keras.TensorBoard` (determined.keras._callback). The older
`det.keras.TFKerasTrial` with a TFKerasTrialContext runs on pedl's Keras controller: the trial wraps
its model and optimizer through the context in `build_model(self)`, compiles the model, and builds
its own data (`tf.data.Dataset`, Keras Sequence/PyDataset, or arrays batched at the per-slot batch
size). `keras_callbacks()` may return the TensorBoard callback (`callbacks.TensorBoard`, or
`TFKerasTensorBoard`): the trial's metric curves are in `pedl tensorboard` (pedl.keras._tensorboard)."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

from determined._trial_context import DistributedContext, TrialContext
from determined.keras import callbacks
from determined.keras._callback import DeterminedCallback, TensorBoard
from pedl.keras import _distributed
from pedl.keras._adapter import unwrap_data
from pedl.keras._controller import KerasTrialController
from pedl.keras._keras2 import accept_keras2_spellings
from pedl.keras._load import load_model_from_checkpoint_path as _load_model
from pedl.keras._session import apply_session_config
from pedl.keras._tensorboard import TensorBoard as _TrialTensorBoard
from pedl.keras._tensorboard import check_callbacks
from pedl.keras._trial import KerasTrial
from pedl.model_def.errors import describe

# What build_training_data_loader/build_validation_data_loader return (annotations in Determined's
# examples): a tf.data.Dataset, a Keras Sequence/PyDataset, or (x, y[, sample_weight]) arrays.
InputData = Any


def _ranks() -> DistributedContext:
    workers = _distributed.current()
    return DistributedContext() if workers is None else DistributedContext(workers.index, workers.count)


class TFKerasTrialContext(TrialContext):
    """Handed to `TFKerasTrial.__init__`."""

    def __init__(
        self,
        hparams: dict[str, Any],
        experiment_config: dict[str, Any],
        distributed: DistributedContext | None = None,
    ) -> None:
        super().__init__(hparams, experiment_config, distributed or _ranks())

    def wrap_model(self, model: Any) -> Any:
        """Returns `model`: pedl builds it under the trial's distribution strategy already."""
        return model

    def wrap_optimizer(self, optimizer: Any) -> Any:
        return optimizer

    def wrap_dataset(self, dataset: Any, shard_dataset: bool = True) -> Any:
        """Returns `dataset`: pedl gives each slot its own share of the batches."""
        return dataset


class TFKerasTrial(KerasTrial):
    """Subclass it; pedl constructs it as `TrialClass(context)`."""

    framework_interface = "determined.keras.TFKerasTrial"
    trial_context_class = TFKerasTrialContext
    uses_make_data_loaders = False

    def __init__(self, context: TFKerasTrialContext) -> None:
        self.context = context
        self.hparams = context.get_hparams()

    @abc.abstractmethod
    def build_model(self) -> Any:  # type: ignore[override]  # Determined's takes no hparams
        """The compiled tf.keras model (wrapped with context.wrap_model)."""

    @abc.abstractmethod
    def build_training_data_loader(self) -> Any:
        """Training data: a batched tf.data.Dataset, a Keras Sequence/PyDataset, or arrays."""

    @abc.abstractmethod
    def build_validation_data_loader(self) -> Any:
        """Validation data, in the same forms."""

    def keras_callbacks(self) -> list[Any]:
        return []

    def session_config(self) -> Any:
        return None

    def batch_size(self) -> int | None:
        """Arrays are batched at the per-slot batch size."""
        hparams = self.context.get_hparams()
        return self.context.get_per_slot_batch_size() if "global_batch_size" in hparams else None

    @classmethod
    def create_controller(
        cls, hparams: dict[str, Any], data_loaders: Sequence[Any] | Any, origin: str
    ) -> KerasTrialController:
        context = cls.trial_context_class.for_running_trial(hparams)
        trial = cls(context)
        if not hasattr(trial, "context"):
            trial.context = context
        trial.hparams = context.get_hparams()
        tensorboards = check_callbacks(trial.keras_callbacks(), describe(cls.keras_callbacks))
        accept_keras2_spellings()
        apply_session_config(trial.session_config())
        loaders = [
            unwrap_data(trial.build_training_data_loader()),
            unwrap_data(trial.build_validation_data_loader()),
        ]
        origin = f"{cls.__qualname__}.build_training_data_loader/build_validation_data_loader"
        controller = KerasTrialController.from_trial(trial, loaders, origin, build=trial.build_model)
        controller.attach_tensorboards(tensorboards)
        return controller


class TFKerasTensorBoard(_TrialTensorBoard):
    """Determined's older name for `det.keras.callbacks.TensorBoard`."""


def load_model_from_checkpoint_path(path: str, tags: list[str] | None = None) -> Any:
    """The trial's compiled model (its `build_model()`, with a context of the checkpoint's
    hyperparameters) holding the checkpoint's trained weights."""
    if tags is not None:
        raise ValueError(
            "load_model_from_checkpoint_path(tags=...): pedl's Keras checkpoints hold weights, not a "
            "TensorFlow SavedModel with tagged graphs; leave tags out"
        )
    return _load_model(path)


__all__ = [
    "DeterminedCallback",
    "InputData",
    "TensorBoard",
    "TFKerasTensorBoard",
    "TFKerasTrial",
    "TFKerasTrialContext",
    "callbacks",
    "load_model_from_checkpoint_path",
]
