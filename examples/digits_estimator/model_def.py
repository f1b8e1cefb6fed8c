"""A premade `tf.estimator.DNNClassifier` on scikit-learn's 8x8 digits (TensorFlow <= 2.15 only).

Run it where tf.estimator exists: `scripts/build-tf215-env` builds such a Python environment,
an agent offers it with `--environment tf215=.cache/envs/tf215/bin/python`, and const.yaml asks
for it with `environment: tf215`. Every checkpoint also holds an exported SavedModel in `serving/`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits

from pedl.tensorflow import EstimatorTrial

# The split must not depend on the trial's seed, so every trial validates on the same data.
SPLIT_SEED = 0
VALIDATION_FRACTION = 0.2
FEATURES = "pixels"


def _split() -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    images, labels = load_digits(return_X_y=True)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(labels))
    n_val = int(len(labels) * VALIDATION_FRACTION)
    features, targets = (images / 16.0).astype("float32"), labels.astype("int32")
    val, train = order[:n_val], order[n_val:]
    return (features[train], targets[train]), (features[val], targets[val])


def _input_fn(arrays: tuple[np.ndarray, np.ndarray], batch_size: int, shuffle: bool) -> Callable[[], Any]:
    def input_fn() -> tf.data.Dataset:
        x, y = arrays
        dataset = tf.data.Dataset.from_tensor_slices(({FEATURES: x}, y))
        if shuffle:
            dataset = dataset.shuffle(len(y), seed=SPLIT_SEED)
        return dataset.batch(batch_size)

    return input_fn


def serving_input_fn() -> Any:
    """Serves raw pixel rows (a float32 [batch, 64] tensor named `pixels`)."""
    pixels = tf.compat.v1.placeholder(tf.float32, [None, 64], name=FEATURES)
    return tf.estimator.export.ServingInputReceiver({FEATURES: pixels}, {FEATURES: pixels})


class DigitsEstimatorTrial(EstimatorTrial):
    def build_estimator(self, hparams: dict[str, Any]) -> Any:
        return tf.estimator.DNNClassifier(
            hidden_units=[int(hparams["hidden_size"])],
            feature_columns=[tf.feature_column.numeric_column(FEATURES, shape=[64])],
            n_classes=10,
            optimizer=lambda: tf.keras.optimizers.legacy.Adam(float(hparams["learning_rate"])),
            dropout=float(hparams["dropout"]),
        )

    def build_train_spec(self, hparams: dict[str, Any]) -> Any:
        training, _ = _split()
        return tf.estimator.TrainSpec(input_fn=_input_fn(training, int(hparams["batch_size"]), shuffle=True))

    def build_validation_spec(self, hparams: dict[str, Any]) -> Any:
        _, validation = _split()
        return tf.estimator.EvalSpec(input_fn=_input_fn(validation, 128, shuffle=False), steps=None)

    def build_serving_input_receiver_fns(self, hparams: dict[str, Any]) -> dict[str, Callable[[], Any]]:
        return {"serving": serving_input_fn}
