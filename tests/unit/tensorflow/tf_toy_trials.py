"""A tiny graph-mode TensorFlowTrial on separable random data, shared by the TensorFlow tests."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from pedl.tensorflow import TensorFlowTrial

v1 = tf.compat.v1


def toy_datasets(batch: int = 8, shuffle: bool = True) -> tuple[tf.data.Dataset, tf.data.Dataset]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 4)).astype("float32")
    y = (x[:, 0] + x[:, 1] > 0).astype("int64")
    train = tf.data.Dataset.from_tensor_slices({"x": x, "y": y})
    if shuffle:
        train = train.shuffle(60)
    val = tf.data.Dataset.from_tensor_slices({"x": x[:20], "y": y[:20]})
    return train.batch(batch), val.batch(batch)


class ToyTFTrial(TensorFlowTrial):
    def build_graph(self, record: Any, is_training: tf.Tensor) -> dict[str, tf.Tensor]:
        w = v1.get_variable("w", [4, 2], initializer=v1.glorot_uniform_initializer())
        b = v1.get_variable("b", [2], initializer=v1.zeros_initializer())
        logits = tf.matmul(record["x"], w) + b
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=record["y"], logits=logits)
        )
        correct = tf.cast(tf.equal(tf.argmax(logits, 1), record["y"]), tf.float32)
        return {"loss": loss, "accuracy": tf.reduce_mean(correct), "error": 1.0 - tf.reduce_mean(correct)}

    def optimizer(self) -> v1.train.Optimizer:
        return v1.train.AdamOptimizer(self.hparams.get("lr", 0.05))

    def training_metrics(self) -> list[str]:
        return ["accuracy"]

    def validation_metrics(self) -> list[str]:
        return ["loss", "error"]
