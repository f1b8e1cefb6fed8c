"""A Determined EstimatorTrial on scikit-learn's digits, run by pedl unchanged (TensorFlow <= 2.15:
agents offer `scripts/build-tf215-env`'s environment as `tf215`, which const.yaml asks for)."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
from determined import estimator
from sklearn.datasets import load_digits

SPLIT_SEED = 0  # fixed, so every trial validates on the same images
FEATURES = "pixels"


def digits(train: bool) -> tuple[np.ndarray, np.ndarray]:
    images, labels = load_digits(return_X_y=True)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(labels))
    n_val = len(labels) // 5
    rows = order[n_val:] if train else order[:n_val]
    return (images[rows] / 16.0).astype("float32"), labels[rows].astype("int32")


class DigitsTrial(estimator.EstimatorTrial):
    def __init__(self, context: estimator.EstimatorTrialContext) -> None:
        self.context = context

    def build_estimator(self) -> tf.estimator.Estimator:
        rate = self.context.get_hparam("learning_rate")
        return tf.estimator.DNNClassifier(
            hidden_units=[self.context.get_hparam("hidden_size")],
            feature_columns=[tf.feature_column.numeric_column(FEATURES, shape=[64])],
            n_classes=10,
            optimizer=lambda: self.context.wrap_optimizer(tf.keras.optimizers.legacy.Adam(rate)),
        )

    def _input_fn(self, train: bool) -> Any:
        def input_fn() -> tf.data.Dataset:
            x, y = digits(train)
            dataset = self.context.wrap_dataset(tf.data.Dataset.from_tensor_slices(({FEATURES: x}, y)))
            if train:
                dataset = dataset.shuffle(len(y), seed=SPLIT_SEED)
            return dataset.batch(self.context.get_per_slot_batch_size())

        return input_fn

    def build_train_spec(self) -> tf.estimator.TrainSpec:
        return tf.estimator.TrainSpec(input_fn=self._input_fn(train=True))

    def build_validation_spec(self) -> tf.estimator.EvalSpec:
        return tf.estimator.EvalSpec(input_fn=self._input_fn(train=False), steps=None)

    def build_serving_input_receiver_fns(self) -> dict[str, Any]:
        """Each checkpoint exports a SavedModel taking raw pixels (det.estimator's
        load_estimator_from_checkpoint_path loads it)."""

        def pixels() -> tf.estimator.export.ServingInputReceiver:
            images = tf.compat.v1.placeholder(tf.float32, [None, 64], name=FEATURES)
            return tf.estimator.export.ServingInputReceiver({FEATURES: images}, {FEATURES: images})

        return {"pixels": pixels}
