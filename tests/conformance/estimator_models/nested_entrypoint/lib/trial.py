import numpy as np
import tensorflow as tf

from pedl.tensorflow import EstimatorTrial


def _input_fn(seed, batch_size):
    def input_fn(mode, params):
        rng = np.random.default_rng(seed)
        x = rng.normal(size=(128, 4)).astype("float32")
        y = (x @ np.array([1.0, -2.0, 0.5, 3.0]) > 0).astype("int32")
        dataset = tf.data.Dataset.from_tensor_slices(({"x": x}, y))
        if mode == tf.estimator.ModeKeys.TRAIN:
            dataset = dataset.shuffle(128, seed=4)
        return dataset.batch(batch_size)

    return input_fn


class classes:  # noqa: N801 - seed 001's nested-object example
    class LinearTrial(EstimatorTrial):
        def build_estimator(self, hparams):
            return tf.estimator.LinearClassifier(
                feature_columns=[tf.feature_column.numeric_column("x", shape=[4])], optimizer="Ftrl"
            )

        def build_train_spec(self, hparams):
            return tf.estimator.TrainSpec(input_fn=_input_fn(0, hparams["batch_size"]), max_steps=3)

        def build_validation_spec(self, hparams):
            return tf.estimator.EvalSpec(input_fn=_input_fn(1, 16), steps=3)
