"""TensorFlowTrial as a single Python file (seed 000's backward-compatible form); records are a
nested structure (a dict of features and a label), training metrics include a vector.

The vector is the batch's mean features, not the weights: TF1 reads a variable fetched alongside the
train op before or after its update as the runtime schedules them, so weights fetched that way differ
from run to run (the trained weights themselves do not: validations match exactly)."""

import numpy as np
import tensorflow as tf

from pedl.tensorflow import TensorFlowTrial


def make_data_loaders(experiment_config, hparams):
    rng = np.random.default_rng(5)
    a = rng.normal(size=(200, 3)).astype("float32")
    b = rng.normal(size=(200, 2)).astype("float32")
    y = ((a.sum(axis=1) - b.sum(axis=1)) > 0).astype("float32")
    dataset = tf.data.Dataset.from_tensor_slices(({"a": a, "b": b}, y))
    return dataset.take(160).shuffle(160, seed=2).batch(hparams["batch_size"]), dataset.skip(160).batch(20)


class SingleFileTrial(TensorFlowTrial):
    def optimizer(self):
        return tf.compat.v1.train.GradientDescentOptimizer(self.hparams["learning_rate"])

    def build_graph(self, record, is_training):
        features, label = record
        x = tf.concat([features["a"], features["b"]], axis=1)
        w = tf.compat.v1.get_variable("w", [5, 1], initializer=tf.compat.v1.zeros_initializer())
        logit = tf.squeeze(tf.matmul(x, w), axis=1)
        loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=label, logits=logit))
        correct = tf.cast(tf.equal(tf.cast(logit > 0, tf.float32), label), tf.float32)
        return {"loss": loss, "accuracy": tf.reduce_mean(correct), "feature_means": tf.reduce_mean(x, axis=0)}

    def training_metrics(self):
        return ["feature_means"]

    def validation_metrics(self):
        return ["accuracy", "loss"]
