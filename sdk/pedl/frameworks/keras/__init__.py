"""PEDL 0.10/0.11's Keras interface (`from pedl.frameworks.keras import TFKerasTrial`), on the seed
Keras controller: `build_model(self, hparams)` (or `build_model(self)`) returns a compiled
tf.keras model; `make_data_loaders` returns the training and validation data, optionally wrapped
in `data.KerasDataAdapter`; `session_config()` sets TensorFlow's thread pools and soft placement.

It also exports `KerasTrial`, PEDL 0.11's other form: `build_model(hparams)` returns an uncompiled
Keras model and `optimizer()`, `loss()`, `training_metrics()`, `validation_metrics()` say how to
train it (`pedl.keras._compile`); `session_config(hparams)` is honoured as above."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pedl.frameworks._arity import accept_hparams
from pedl.frameworks.keras import data
from pedl.frameworks.keras.data import KerasDataAdapter
from pedl.keras._controller import KerasTrialController
from pedl.keras._keras2 import accept_keras2_spellings
from pedl.keras._session import apply_session_config
from pedl.keras._tensorboard import TensorBoard, check_callbacks
from pedl.keras._trial import KerasTrial
from pedl.model_def.errors import describe


def _accept_tf1_config_proto() -> None:
    """PEDL 0.11's Keras trials annotate `session_config` with `tf.ConfigProto`, TensorFlow 1's
    name, evaluated when their class is defined; TensorFlow 2 keeps it as tf.compat.v1.ConfigProto."""
    import tensorflow as tf

    if not hasattr(tf, "ConfigProto"):
        tf.ConfigProto = tf.compat.v1.ConfigProto


_accept_tf1_config_proto()


class TFKerasTensorBoard(TensorBoard):
    """PEDL 0.11's TensorBoard callback for `keras_callbacks()`; its curves are in `pedl tensorboard`."""


def wrap_dataset(dataset: Any) -> Any:
    """Returns `dataset`: pedl shards the batches across slots itself."""
    return dataset


class TFKerasTrial(KerasTrial):
    """Subclass it; PEDL constructs it as `TrialClass(hparams)`."""

    framework_interface = "TFKerasTrial"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        accept_hparams(cls, ("build_model", "keras_callbacks"))  # PEDL 0.11 passed hparams to both

    def session_config(self) -> Any:
        return None

    @classmethod
    def create_controller(
        cls, hparams: dict[str, Any], data_loaders: Sequence[Any] | Any, origin: str
    ) -> KerasTrialController:
        trial = cls(hparams)
        callbacks = getattr(trial, "keras_callbacks", None)
        tensorboards = check_callbacks(callbacks(hparams), describe(callbacks)) if callable(callbacks) else []
        apply_session_config(trial.session_config())
        accept_keras2_spellings()
        controller = KerasTrialController.from_trial(trial, data_loaders, origin)
        controller.attach_tensorboards(tensorboards)
        return controller


__all__ = ["KerasDataAdapter", "KerasTrial", "TFKerasTensorBoard", "TFKerasTrial", "data", "wrap_dataset"]
