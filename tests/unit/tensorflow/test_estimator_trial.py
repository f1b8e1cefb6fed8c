"""EstimatorTrial: loads without make_data_loaders; on TensorFlow >= 2.16 fails naming the environment."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import tensorflow as tf

from pedl.harness.build import start_trial
from pedl.model_def import load_model_definition

MODEL = """
import tensorflow as tf
from pedl.tensorflow import EstimatorTrial


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[0.0] * 4]}, [0])).batch(1)


class LinearTrial(EstimatorTrial):
    def build_estimator(self, hparams):
        return tf.estimator.LinearClassifier([tf.feature_column.numeric_column("x", shape=[4])])

    def build_train_spec(self, hparams):
        return tf.estimator.TrainSpec(input_fn=input_fn)

    def build_validation_spec(self, hparams):
        return tf.estimator.EvalSpec(input_fn=input_fn, steps=None)
"""


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "estimator_model"
    directory.mkdir()
    (directory / "__init__.py").write_text(textwrap.dedent(MODEL))
    return directory


def test_an_estimator_model_definition_needs_no_make_data_loaders(model_dir: Path) -> None:
    model_def = load_model_definition(model_dir)
    assert model_def.trial_class.__name__ == "LinearTrial" and model_def.make_data_loaders is None


@pytest.mark.skipif(hasattr(tf, "estimator"), reason="this TensorFlow still has tf.estimator")
def test_without_tf_estimator_the_error_names_the_environment_needed(model_dir: Path) -> None:
    with pytest.raises(
        RuntimeError, match=r"EstimatorTrial needs tf.estimator.*tensorflow<=2.15.*build-tf215-env"
    ):
        start_trial(model_dir, {}, {}, seed=0)
