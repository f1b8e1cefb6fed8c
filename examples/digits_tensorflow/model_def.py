"""An MLP written against `tf.compat.v1`: variables, a dropout switched by `is_training`, Adam."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits

import pedl
from pedl.tensorflow import TensorFlowTrial

v1 = tf.compat.v1
# The split must not depend on the trial's seed, so every trial validates on the same data.
SPLIT_SEED = 0
VALIDATION_FRACTION = 0.2


def make_data_loaders(experiment_config: dict[str, Any], hparams: dict[str, Any]) -> tuple[Any, Any]:
    images, labels = load_digits(return_X_y=True)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(labels))
    n_val = int(len(labels) * VALIDATION_FRACTION)
    features, targets = (images / 16.0).astype("float32"), labels.astype("int64")
    val, train = order[:n_val], order[n_val:]
    batch = int(hparams["batch_size"])
    training = tf.data.Dataset.from_tensor_slices((features[train], targets[train])).shuffle(len(train))
    validation = tf.data.Dataset.from_tensor_slices((features[val], targets[val]))
    return training.batch(batch), validation.batch(batch)


class DigitsTFTrial(TensorFlowTrial):
    def build_graph(self, record: Any, is_training: tf.Tensor) -> dict[str, tf.Tensor]:
        images, labels = record
        hidden = int(pedl.get_hyperparameter("hidden_size"))
        w1 = v1.get_variable("w1", [64, hidden], initializer=v1.glorot_uniform_initializer())
        b1 = v1.get_variable("b1", [hidden], initializer=v1.zeros_initializer())
        w2 = v1.get_variable("w2", [hidden, 10], initializer=v1.glorot_uniform_initializer())
        b2 = v1.get_variable("b2", [10], initializer=v1.zeros_initializer())
        h = tf.nn.relu(tf.matmul(images, w1) + b1)
        rate = tf.where(is_training, float(pedl.get_hyperparameter("dropout")), 0.0)
        h = tf.nn.dropout(h, rate=rate)
        logits = tf.matmul(h, w2) + b2
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        wrong = tf.cast(tf.not_equal(tf.argmax(logits, 1), labels), tf.float32)
        return {"loss": loss, "validation_error": tf.reduce_mean(wrong), "error": tf.reduce_mean(wrong)}

    def optimizer(self) -> v1.train.Optimizer:
        return v1.train.AdamOptimizer(float(pedl.get_hyperparameter("learning_rate")))

    def training_metrics(self) -> list[str]:
        return ["error"]

    def validation_metrics(self) -> list[str]:
        return ["loss", "validation_error"]
