"""EstimatorTrial step cost: one long `train()` call versus a `train()` call per step.

A step is 20 batches of a small premade `tf.estimator.DNNClassifier` (64 -> 32 -> 10 on random
data). "per-step train()" is what the controller did before: `estimator.train(steps=20)` once per
step, each call building the graph, opening a session and restoring the checkpoint from model_dir.
"one train() call" is `EstimatorTrialController.train_until`, measured in the same run. The first
step of each is left out (graph building is paid there by both). Runs where tf.estimator exists
(TensorFlow 2.15: scripts/build-tf215-env):

    .cache/envs/tf215/bin/python benchmarks/estimator_steps.py [--steps 30] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from pedl.tensorflow import EstimatorTrial, EstimatorTrialController  # noqa: E402

BATCHES_PER_STEP = 20
BATCH_SIZE = 32
FEATURES = "x"


def input_fn() -> tf.data.Dataset:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1024, 64)).astype("float32")
    y = rng.integers(0, 10, size=1024).astype("int32")
    return tf.data.Dataset.from_tensor_slices(({FEATURES: x}, y)).batch(BATCH_SIZE).repeat()


def classifier(model_dir: str | None = None) -> Any:
    return tf.estimator.DNNClassifier(
        hidden_units=[32],
        feature_columns=[tf.feature_column.numeric_column(FEATURES, shape=[64])],
        n_classes=10,
        optimizer=lambda: tf.keras.optimizers.legacy.Adam(0.01),
        model_dir=model_dir,
    )


class SmallTrial(EstimatorTrial):
    def build_estimator(self, hparams: dict[str, Any]) -> Any:
        return classifier()

    def build_train_spec(self, hparams: dict[str, Any]) -> Any:
        return tf.estimator.TrainSpec(input_fn=input_fn)

    def build_validation_spec(self, hparams: dict[str, Any]) -> Any:
        return tf.estimator.EvalSpec(input_fn=input_fn, steps=2)


def per_step_calls(steps: int) -> float:
    """Steps/s of `train(steps=20)` in a loop (the previous controller), first step left out."""
    with tempfile.TemporaryDirectory(prefix="pedl-bench-est-") as model_dir:
        estimator = classifier(model_dir)
        estimator.train(input_fn=input_fn, steps=BATCHES_PER_STEP)
        started = time.perf_counter()
        for _ in range(steps - 1):
            estimator.train(input_fn=input_fn, steps=BATCHES_PER_STEP)
        return (steps - 1) / (time.perf_counter() - started)


def one_call(steps: int) -> float:
    """Steps/s of `EstimatorTrialController.train_until` (one train() call), first step left out."""
    controller = EstimatorTrialController(SmallTrial({}))
    try:
        controller.train_until(BATCHES_PER_STEP)
        started = time.perf_counter()
        for step in range(2, steps + 1):
            controller.train_until(step * BATCHES_PER_STEP)
        return (steps - 1) / (time.perf_counter() - started)
    finally:
        controller.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="steps timed per way (first one left out)")
    parser.add_argument("--smoke", action="store_true", help="3 steps each: checks the benchmark runs")
    args = parser.parse_args()
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)
    steps = 3 if args.smoke else args.steps
    before = per_step_calls(steps)
    after = one_call(steps)
    timed = f"{steps - 1} steps timed each (TensorFlow {tf.__version__})"
    print(f"{BATCHES_PER_STEP} batches/step of a DNNClassifier, {timed}")
    print(f"per-step train():  {before:8.2f} steps/s")
    print(f"one train() call:  {after:8.2f} steps/s")
    print(f"ratio:             {after / before:8.2f}x")


if __name__ == "__main__":
    main()
