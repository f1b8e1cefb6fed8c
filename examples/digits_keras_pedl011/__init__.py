"""A PEDL 0.11 TFKerasTrial on scikit-learn's digits: the package exposes the trial class and
make_data_loaders (no entrypoint in the config), and the data is a Keras PyDataset wrapped in
`pedl.frameworks.keras.data.KerasDataAdapter`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits
from tensorflow import keras

import pedl
from pedl.frameworks.keras import TFKerasTrial
from pedl.frameworks.keras.data import KerasDataAdapter

SPLIT_SEED = 0  # fixed, so every trial validates on the same images


class DigitBatches(keras.utils.PyDataset):
    def __init__(self, x: np.ndarray, y: np.ndarray, batch_size: int) -> None:
        super().__init__()
        self.x, self.y, self.batch_size = x, y, batch_size

    def __len__(self) -> int:
        return math.ceil(len(self.y) / self.batch_size)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        rows = slice(index * self.batch_size, (index + 1) * self.batch_size)
        return self.x[rows], self.y[rows]


def make_data_loaders(experiment_config: dict[str, Any], hparams: dict[str, Any]) -> tuple[Any, Any]:
    images, labels = load_digits(return_X_y=True)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(labels))
    features, targets = (images / 16.0).astype("float32"), labels.astype("int64")
    n_val = len(labels) // 5
    val, train = order[:n_val], order[n_val:]
    size = pedl.get_hyperparameter("batch_size")
    return (
        KerasDataAdapter(DigitBatches(features[train], targets[train], size), workers=1),
        KerasDataAdapter(DigitBatches(features[val], targets[val], size)),
    )


class DigitsTrial(TFKerasTrial):
    def session_config(self) -> tf.compat.v1.ConfigProto:
        return tf.compat.v1.ConfigProto(allow_soft_placement=True, intra_op_parallelism_threads=1)

    def build_model(self, hparams: dict[str, Any]) -> keras.Model:
        model = keras.Sequential(
            [
                keras.Input((64,)),
                keras.layers.Dense(hparams["hidden_size"], activation="relu"),
                keras.layers.Dense(10, activation="softmax"),
            ]
        )
        model.compile(
            optimizer=keras.optimizers.SGD(learning_rate=hparams["learning_rate"], momentum=0.9),
            loss="sparse_categorical_crossentropy",
            metrics=["accuracy"],
        )
        return model
