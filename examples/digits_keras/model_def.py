"""A compiled Keras MLP; the data are NumPy arrays that PEDL batches with `batch_size()`."""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
from sklearn.datasets import load_digits

from pedl.keras import KerasTrial

# The split must not depend on the trial's seed, so every trial validates on the same data.
SPLIT_SEED = 0
VALIDATION_FRACTION = 0.2


def make_data_loaders(experiment_config: dict[str, Any], hparams: dict[str, Any]) -> tuple[Any, Any]:
    images, labels = load_digits(return_X_y=True)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(labels))
    n_val = int(len(labels) * VALIDATION_FRACTION)
    features, targets = (images / 16.0).astype("float32"), labels.astype("int64")
    val, train = order[:n_val], order[n_val:]
    return (features[train], targets[train]), (features[val], targets[val])


class DigitsKerasTrial(KerasTrial):
    def build_model(self, hparams: dict[str, Any]) -> keras.Model:
        model = keras.Sequential(
            [
                keras.Input((64,)),
                keras.layers.Dense(int(hparams["hidden_size"]), activation="relu"),
                keras.layers.Dropout(float(hparams["dropout"])),
                keras.layers.Dense(10),
            ]
        )
        model.compile(
            optimizer=keras.optimizers.Adam(float(hparams["learning_rate"])),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        )
        return model

    def batch_size(self) -> int:
        return int(self.hparams["batch_size"])
