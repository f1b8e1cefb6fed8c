"""`det.keras.callbacks`: the callbacks a TFKerasTrial may return from `keras_callbacks()` on pedl."""

from pedl.keras._tensorboard import TensorBoard

__all__ = ["TensorBoard"]
