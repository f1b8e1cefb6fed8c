import numpy as np
import tensorflow as tf

from pedl.tensorflow import TensorFlowTrial


def _arrays(size, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(size, 4)).astype("float32")
    target = (x @ np.array([1.0, -2.0, 0.5, 3.0]) + 0.3).astype("float32")
    return {"x": x, "target": target}


def make_data_loaders(experiment_config, hparams):
    size = experiment_config["data"]["train_size"]
    train = tf.data.Dataset.from_tensor_slices(_arrays(size, 0)).shuffle(size, seed=3)
    train = train.batch(hparams["batch_size"])
    val = tf.data.Dataset.from_tensor_slices(_arrays(64, 1)).batch(16)
    return train, val


class trial_classes:  # noqa: N801 - the seed's own example name
    class NestedTrial(TensorFlowTrial):
        def optimizer(self):
            return tf.compat.v1.train.RMSPropOptimizer(self.hparams["learning_rate"])

        def build_graph(self, record, is_training):
            w = tf.compat.v1.get_variable("w", [4, 1], initializer=tf.compat.v1.zeros_initializer())
            prediction = tf.squeeze(tf.matmul(record["x"], w), axis=1)
            squared = tf.square(prediction - record["target"])
            return {
                "loss": tf.reduce_mean(squared),
                "mse": tf.reduce_mean(squared),
                "mae": tf.reduce_mean(tf.abs(prediction - record["target"])),
            }

        def validation_metrics(self):
            return ["mse", "mae"]
