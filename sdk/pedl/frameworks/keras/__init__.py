"""PEDL 0.10/0.11's Keras interface (`from pedl.frameworks.keras import TFKerasTrial`), on the seed
Keras controller: `build_model(self, hparams)` (or `build_model(self)`) returns a compiled
tf.keras model; `make_data_loaders` returns the training and validation data, optionally wrapped
in `data.KerasDataAdapter`; `session_config()` sets TensorFlow's thread pools and soft placement."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pedl.frameworks._arity import accept_hparams
from pedl.frameworks.keras import data
from pedl.frameworks.keras.data import KerasDataAdapter
from pedl.keras._controller import KerasTrialController
from pedl.keras._keras2 import accept_keras2_spellings
from pedl.keras._tensorboard import TensorBoard, check_callbacks
from pedl.keras._trial import KerasTrial
from pedl.model_def.errors import describe


class TFKerasTensorBoard(TensorBoard):
    """PEDL 0.11's TensorBoard callback for `keras_callbacks()`; its curves are in `pedl tensorboard`."""


def wrap_dataset(dataset: Any) -> Any:
    """Returns `dataset`: pedl shards the batches across slots itself."""
    return dataset


def apply_session_config(config: Any) -> None:
    """What of a tf.compat.v1.ConfigProto applies to TensorFlow 2's eager runtime."""
    if config is None:
        return
    import tensorflow as tf

    if not isinstance(config, tf.compat.v1.ConfigProto):
        raise TypeError(
            f"session_config() must return a tf.compat.v1.ConfigProto, got {type(config).__name__}"
        )
    threading = tf.config.threading
    try:
        if config.intra_op_parallelism_threads:
            threading.set_intra_op_parallelism_threads(config.intra_op_parallelism_threads)
        if config.inter_op_parallelism_threads:
            threading.set_inter_op_parallelism_threads(config.inter_op_parallelism_threads)
    except RuntimeError:
        pass  # TensorFlow already started its pools in this process (a restored or second trial)
    tf.config.set_soft_device_placement(config.allow_soft_placement)


def unwrap_data(source: Any) -> Any:
    return source.data if isinstance(source, KerasDataAdapter) else source


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
        if isinstance(data_loaders, (tuple, list)):
            data_loaders = [unwrap_data(d) for d in data_loaders]
        controller = KerasTrialController.from_trial(trial, data_loaders, origin)
        controller.attach_tensorboards(tensorboards)
        return controller


__all__ = ["KerasDataAdapter", "TFKerasTensorBoard", "TFKerasTrial", "data", "wrap_dataset"]
