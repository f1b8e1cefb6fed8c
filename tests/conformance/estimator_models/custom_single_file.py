"""EstimatorTrial as a single Python file (seed 000) with a custom Estimator: a model_fn whose
features are a plain tensor, metrics of two shapes (a scalar accuracy, a vector mean of the logits)."""

import numpy as np
import tensorflow as tf

from pedl.tensorflow import EstimatorTrial


def model_fn(features, labels, mode, params):
    w = tf.compat.v1.get_variable("w", [6, 2], initializer=tf.compat.v1.glorot_uniform_initializer())
    logits = tf.matmul(features, w)
    predictions = tf.argmax(logits, axis=1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"class": predictions})
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    if mode == tf.estimator.ModeKeys.EVAL:
        metrics = {
            "accuracy": tf.compat.v1.metrics.accuracy(labels, predictions),
            "mean_logits": tf.compat.v1.metrics.mean_tensor(tf.reduce_mean(logits, axis=0)),
        }
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)
    optimizer = tf.compat.v1.train.AdamOptimizer(params["learning_rate"])
    train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn(seed):
    def make():
        rng = np.random.default_rng(seed)
        x = rng.normal(size=(96, 6)).astype("float32")
        y = (x[:, 0] + x[:, 1] > 0).astype("int64")
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(12)

    return make


class CustomTrial(EstimatorTrial):
    def build_estimator(self, hparams):
        return tf.estimator.Estimator(model_fn=model_fn, params={"learning_rate": hparams["learning_rate"]})

    def build_train_spec(self, hparams):
        return tf.estimator.TrainSpec(input_fn=input_fn(0))

    def build_validation_spec(self, hparams):
        return tf.estimator.EvalSpec(input_fn=input_fn(1), steps=None)
