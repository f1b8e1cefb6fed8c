import os
import tempfile

import numpy as np
import tensorflow as tf

import pedl
from pedl.tensorflow import TensorFlowTrial

FEATURES = 8
CLASSES = 3


def download_data(experiment_config, hparams):
    """Writes the data set once per machine and returns its directory."""
    directory = tempfile.mkdtemp(prefix="tf-conformance-data-")
    rng = np.random.default_rng(0)
    weights = rng.normal(size=(FEATURES, CLASSES))
    for name, size in (("train", 320), ("val", 96)):
        x = rng.normal(size=(size, FEATURES)).astype("float32")
        y = np.argmax(x @ weights, axis=1).astype("int64")
        np.savez(os.path.join(directory, name + ".npz"), x=x, y=y)
    return directory


def _dataset(name, batch_size, shuffle):
    arrays = np.load(os.path.join(pedl.get_download_data_dir(), name + ".npz"))
    dataset = tf.data.Dataset.from_tensor_slices((arrays["x"], arrays["y"]))
    if shuffle:
        dataset = dataset.shuffle(len(arrays["y"]), seed=1)
    return dataset.batch(batch_size)


def make_data_loaders(experiment_config, hparams):
    batch_size = hparams["batch_size"]
    return _dataset("train", batch_size, True), _dataset("val", batch_size, False)


class TupleRecordTrial(TensorFlowTrial):
    def optimizer(self):
        return tf.compat.v1.train.MomentumOptimizer(self.hparams["learning_rate"], momentum=0.9)

    def build_graph(self, record, is_training):
        x, y = record
        glorot = tf.compat.v1.glorot_uniform_initializer()
        w = tf.compat.v1.get_variable("w", [FEATURES, CLASSES], initializer=glorot)
        b = tf.compat.v1.get_variable("b", [CLASSES], initializer=tf.compat.v1.zeros_initializer())
        logits = tf.matmul(x, w) + b
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        hits = tf.cast(tf.equal(tf.argmax(logits, axis=1), y), tf.float32)
        # A non-scalar metric: the fraction of the batch that is each class and predicted right.
        per_class = tf.reduce_mean(tf.one_hot(y, CLASSES) * hits[:, None], axis=0)
        return {
            "loss": loss,
            "accuracy": tf.reduce_mean(hits),
            "error": 1.0 - tf.reduce_mean(hits),
            "per_class_hits": per_class,
        }

    def training_metrics(self):
        return ["accuracy", "per_class_hits"]

    def validation_metrics(self):
        return ["error", "per_class_hits"]

    def session_config(self):
        return tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
