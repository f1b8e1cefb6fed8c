"""A Determined TFKerasTrial on scikit-learn's digits, run by pedl unchanged: the model and its
optimizer are wrapped through the context, and the data are tf.data Datasets batched at the
per-slot batch size."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from determined import keras as det_keras
from sklearn.datasets import load_digits
from tensorflow import keras

SPLIT_SEED = 0  # fixed, so every trial validates on the same images


def digits(train: bool) -> tuple[np.ndarray, np.ndarray]:
    images, labels = load_digits(return_X_y=True)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(labels))
    n_val = len(labels) // 5
    rows = order[n_val:] if train else order[:n_val]
    return (images[rows] / 16.0).astype("float32"), labels[rows].astype("int64")


class DigitsTrial(det_keras.TFKerasTrial):
    def __init__(self, context: det_keras.TFKerasTrialContext) -> None:
        self.context = context

    def build_model(self) -> keras.Model:
        model = self.context.wrap_model(
            keras.Sequential(
                [
                    keras.Input((64,)),
                    keras.layers.Dense(self.context.get_hparam("hidden_size"), activation="relu"),
                    keras.layers.Dropout(self.context.get_hparam("dropout")),
                    keras.layers.Dense(10),
                ]
            )
        )
        optimizer = self.context.wrap_optimizer(
            keras.optimizers.Adam(self.context.get_hparam("learning_rate"))
        )
        model.compile(
            optimizer=optimizer,
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        )
        return model

    def build_training_data_loader(self) -> tf.data.Dataset:
        x, y = digits(train=True)
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(y), seed=SPLIT_SEED)
        return self.context.wrap_dataset(dataset).batch(self.context.get_per_slot_batch_size())

    def build_validation_data_loader(self) -> tf.data.Dataset:
        x, y = digits(train=False)
        dataset = tf.data.Dataset.from_tensor_slices((x, y))
        return self.context.wrap_dataset(dataset).batch(self.context.get_per_slot_batch_size())
