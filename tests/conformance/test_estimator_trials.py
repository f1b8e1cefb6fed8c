"""EstimatorTrial from its documentation, both generations, in the TensorFlow 2.15 environment
(`scripts/build-tf215-env`): PEDL 0.11's `pedl.frameworks.tensorflow.EstimatorTrial`
(`build_estimator(self, hparams)`, `build_train_spec`, `build_validation_spec`, `wrap_dataset`,
`wrap_optimizer`) and Determined's `det.estimator.EstimatorTrial` with its context
(`build_estimator(self)`, `context.get_hparam`, `get_per_slot_batch_size`, `wrap_dataset`,
`wrap_optimizer`, `build_serving_input_receiver_fns`, and `det.estimator.
load_estimator_from_checkpoint_path(path, tags=None)` giving the exported SavedModel as
`tf.compat.v1.saved_model.load_v2` does). One interpreter runs every case, to pay TensorFlow's
start-up once."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PEDL011 = """
import numpy as np
import tensorflow as tf

from pedl.frameworks.tensorflow import EstimatorTrial

FEATURES = "x"


def input_fn(trial, hparams):
    def make():
        x = np.linspace(-1, 1, 64, dtype="float32").reshape(32, 2)
        y = (x[:, 0] > x[:, 1]).astype("int32")
        dataset = tf.data.Dataset.from_tensor_slices(({FEATURES: x}, y))
        return trial.wrap_dataset(dataset).batch(hparams["batch_size"])
    return make


class LinearTrial(EstimatorTrial):
    def build_estimator(self, hparams):
        return tf.estimator.LinearClassifier(
            feature_columns=[tf.feature_column.numeric_column(FEATURES, shape=[2])],
            optimizer=lambda: self.wrap_optimizer(tf.keras.optimizers.legacy.SGD(hparams["learning_rate"])),
        )

    def build_train_spec(self, hparams):
        return tf.estimator.TrainSpec(input_fn=input_fn(self, hparams))

    def build_validation_spec(self, hparams):
        return {BAD_SPEC}
"""

CONFIG = """
hyperparameters:
  learning_rate: {type: const, val: 0.1}
  batch_size: {type: const, val: 8}
  global_batch_size: 8
searcher: {name: single, metric: accuracy, smaller_is_better: false, max_steps: 2}
batches_per_step: 5
"""

DRIVER = """
import json, sys
from pathlib import Path
from pedl.config import parse_experiment_config
from pedl.config.test_mode import test_mode_config
from pedl.experimental import run_local
from pedl.harness.build import load_for_config



def loaded_accuracy(path):
    # The exported SavedModel's accuracy on the digits example's validation images.
    import numpy as np
    import tensorflow as tf
    import determined as det
    from sklearn.datasets import load_digits

    model = det.estimator.load_estimator_from_checkpoint_path(path)
    images, labels = load_digits(return_X_y=True)
    rows = np.random.default_rng(0).permutation(len(labels))[: len(labels) // 5]
    predicted = model.signatures["predict"](pixels=tf.constant(images[rows] / 16.0, tf.float32))["class_ids"]
    return float((predicted.numpy()[:, 0] == labels[rows]).mean())


out = {}
for name, directory, config in json.loads(sys.argv[1]):
    try:
        parsed = test_mode_config(parse_experiment_config(Path(config).read_text()))
        result = run_local(parsed, load_for_config(Path(directory), parsed.raw), verify_restore=True)
        out[name] = {"state": result.state, "validation": result.trials[0].validations[-1][1]}
    except Exception as exc:
        out[name] = {"error": f"{type(exc).__name__}: {exc}"}
        continue
    trial = result.trials[0]
    checkpoint = result.checkpoint_dir / f"trial-{trial.trial_id}" / trial.checkpoints[-1]
    try:
        out[name]["loaded_accuracy"] = loaded_accuracy(str(checkpoint))
    except Exception as exc:
        out[name]["load_error"] = f"{type(exc).__name__}: {exc}"
print("RESULTS " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def tf215_python() -> str:
    done = subprocess.run(
        [str(ROOT / "scripts/build-tf215-env")], capture_output=True, text=True, timeout=900
    )
    if done.returncode != 0:
        pytest.skip(f"scripts/build-tf215-env failed (cannot fetch TensorFlow 2.15?):\n{done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def results(tf215_python: str, tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("estimators")
    cases = []
    for name, spec in (
        ("pedl011", "tf.estimator.EvalSpec(input_fn=input_fn(self, hparams), steps=None)"),
        ("bad_spec", "{'input_fn': input_fn(self, hparams)}"),
    ):
        directory = base / name
        directory.mkdir()
        (directory / "model_def.py").write_text(textwrap.dedent(PEDL011.replace("{BAD_SPEC}", spec)))
        (directory / "const.yaml").write_text(CONFIG + "entrypoint: model_def:LinearTrial\n")
        cases.append((name, str(directory), str(directory / "const.yaml")))
    determined = shutil.copytree(ROOT / "examples/digits_determined_estimator", base / "det_estimator")
    cases.append(("determined", str(determined), str(determined / "const.yaml")))
    done = subprocess.run(
        [tf215_python, "-c", DRIVER, json.dumps(cases)], capture_output=True, text=True, timeout=600, cwd=base
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULTS ")]
    assert lines, done.stderr[-4000:]
    return json.loads(lines[-1][len("RESULTS ") :])


def test_a_pedl011_estimator_trial_trains_validates_and_restores(results: dict) -> None:
    assert results["pedl011"].get("state") == "COMPLETED", results["pedl011"]
    assert "accuracy" in results["pedl011"]["validation"]


def test_a_determined_estimator_trial_with_its_context_trains_validates_and_restores(results: dict) -> None:
    assert results["determined"].get("state") == "COMPLETED", results["determined"]
    assert "accuracy" in results["determined"]["validation"]


def test_a_determined_checkpoint_loads_as_its_exported_saved_model(results: dict) -> None:
    """det.estimator.load_estimator_from_checkpoint_path: the SavedModel that the trial's
    build_serving_input_receiver_fns() exported with the checkpoint, predicting as validated."""
    determined = results["determined"]
    assert "load_error" not in determined, determined
    assert determined["loaded_accuracy"] == pytest.approx(determined["validation"]["accuracy"], abs=1e-6)


def test_a_checkpoint_without_serving_functions_is_refused_naming_them(results: dict) -> None:
    assert "build_serving_input_receiver_fns() returned no" in results["pedl011"]["load_error"]


def test_a_validation_spec_of_the_wrong_type_fails_naming_the_method(results: dict) -> None:
    error = results["bad_spec"].get("error", "")
    assert "LinearTrial.build_validation_spec" in error and "must return a tf.estimator.EvalSpec" in error


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
