import os
import tempfile

import numpy as np
import tensorflow as tf

import pedl
from pedl.tensorflow import EstimatorTrial

FEATURES = 8


def download_data(experiment_config, hparams):
    directory = tempfile.mkdtemp(prefix="estimator-conformance-data-")
    rng = np.random.default_rng(0)
    weights = rng.normal(size=(FEATURES, 3))
    for name, size in (("train", 320), ("val", 96)):
        x = rng.normal(size=(size, FEATURES)).astype("float32")
        np.savez(
            os.path.join(directory, name + ".npz"), x=x, y=np.argmax(x @ weights, axis=1).astype("int32")
        )
    return directory


def _input_fn(name, batch_size, shuffle):
    def input_fn():
        arrays = np.load(os.path.join(pedl.get_download_data_dir(), name + ".npz"))
        dataset = tf.data.Dataset.from_tensor_slices(({"x": arrays["x"]}, arrays["y"]))
        if shuffle:
            dataset = dataset.shuffle(len(arrays["y"]), seed=1)
        return dataset.batch(batch_size)

    return input_fn


COLUMNS = [tf.feature_column.numeric_column("x", shape=[FEATURES])]


class PremadeTrial(EstimatorTrial):
    def build_estimator(self, hparams):
        return tf.estimator.DNNClassifier(
            hidden_units=[16],
            feature_columns=COLUMNS,
            n_classes=3,
            optimizer=tf.keras.optimizers.legacy.Adagrad(hparams["learning_rate"]),
            dropout=0.2,
        )

    def build_train_spec(self, hparams):
        return tf.estimator.TrainSpec(input_fn=_input_fn("train", hparams["batch_size"], True))

    def build_validation_spec(self, hparams):
        return tf.estimator.EvalSpec(input_fn=_input_fn("val", 32, False), steps=None)

    def build_serving_input_receiver_fns(self, hparams):
        return {
            "raw": tf.estimator.export.build_raw_serving_input_receiver_fn(
                {"x": tf.zeros([1, FEATURES], tf.float32)}
            ),
            "parsing": tf.estimator.export.build_parsing_serving_input_receiver_fn(
                tf.feature_column.make_parse_example_spec(COLUMNS)
            ),
        }
