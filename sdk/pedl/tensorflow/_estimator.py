"""EstimatorTrial: the `tf.estimator` interface (seed 003).

`tf.estimator` was removed in TensorFlow 2.16, so EstimatorTrial runs only where TensorFlow
2.15 or older is installed (`scripts/build-tf215-env` builds such an environment); elsewhere
creating its controller fails with an error naming that requirement. No make_data_loaders is
needed: the input functions of the train and validation specs provide the data.

Checkpoints copy the Estimator's own latest checkpoint (from its `model_dir`), plus the batch
count, and export one SavedModel per `build_serving_input_receiver_fns()` entry.
"""

from __future__ import annotations

import abc
import inspect
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from pedl.harness.controller import StepResult
from pedl.model_def.errors import describe
from pedl.tensorflow import _checkpoint
from pedl.tensorflow._averaging import mean_metrics
from pedl.trial import Trial

FRAMEWORK = "tensorflow-estimator"
TRAINING_FILE = "training_state.json"
ESTIMATOR_DIR = "estimator"
ENVIRONMENT_HINT = (
    "EstimatorTrial needs tf.estimator, which TensorFlow 2.16 removed (this is TensorFlow {version}); "
    "run the trial in an environment with tensorflow<=2.15 (scripts/build-tf215-env builds one in "
    ".cache/envs/tf215)"
)


def estimator_module() -> Any:
    """`tf.estimator`, or a RuntimeError naming the TensorFlow version it needs."""
    module = getattr(tf, "estimator", None)
    if module is None or not hasattr(module, "Estimator"):
        raise RuntimeError(ENVIRONMENT_HINT.format(version=tf.__version__))
    return module


class EstimatorTrial(Trial):
    """Subclass it and return an Estimator and its train/validation specs; PEDL drives them."""

    framework_interface = "EstimatorTrial"
    several_slots = False  # one process trains; data-parallel TensorFlow is the Keras trial's
    # The specs' input functions provide the data; the model definition needs no make_data_loaders.
    uses_make_data_loaders = False

    @abc.abstractmethod
    def build_estimator(self, hparams: dict[str, Any]) -> Any:
        """The `tf.estimator.Estimator` (premade or custom) to train and validate."""

    @abc.abstractmethod
    def build_train_spec(self, hparams: dict[str, Any]) -> Any:
        """A `tf.estimator.TrainSpec` whose input_fn returns a tf.data.Dataset; max_steps is ignored."""

    @abc.abstractmethod
    def build_validation_spec(self, hparams: dict[str, Any]) -> Any:
        """A `tf.estimator.EvalSpec`: `steps` batches, or the whole input when steps is None."""

    def build_serving_input_receiver_fns(self, hparams: dict[str, Any]) -> dict[str, Callable[[], Any]]:
        """Serving input receiver functions by name; each checkpoint exports one SavedModel per entry."""
        return {}


def _positioned_input_fn(input_fn: Callable[..., Any], skip: int, where: str) -> Callable[..., Any]:
    """`input_fn`'s dataset as an endless stream starting `skip` batches in (the data position)."""
    accepted = set(inspect.signature(input_fn).parameters)

    def wrapped(mode: Any = None, params: Any = None, config: Any = None) -> Any:
        given = {"mode": mode, "params": params, "config": config}
        dataset = input_fn(**{k: v for k, v in given.items() if k in accepted})
        if not isinstance(dataset, tf.data.Dataset):
            raise TypeError(
                f"{where}: the input_fn must return a tf.data.Dataset (a (features, labels) tuple is not "
                f"supported), got {type(dataset).__name__}"
            )
        return dataset.repeat().skip(skip)

    return wrapped


class _LossHook(tf.compat.v1.train.SessionRunHook):
    """Collects the training loss of every batch (the tensor the Estimator summarizes as "loss")."""

    def __init__(self) -> None:
        self.losses: list[float] = []
        self._loss: Any = None

    def begin(self) -> None:
        graph = tf.compat.v1.get_default_graph()
        for summary in graph.get_collection(tf.compat.v1.GraphKeys.SUMMARIES):
            if summary.op.name == "loss":
                self._loss = summary.op.inputs[1]
        if self._loss is None:
            raise RuntimeError("the Estimator's training graph has no 'loss' summary to report the loss from")

    def before_run(self, run_context: Any) -> Any:
        return tf.compat.v1.train.SessionRunArgs(self._loss)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self.losses.append(float(run_values.results))


class EstimatorTrialController:
    """Implements `pedl.harness.controller.TrialController` for EstimatorTrial."""

    def __init__(self, trial: EstimatorTrial) -> None:
        estimator_api = estimator_module()
        self.trial = trial
        self._batches_trained = 0
        self.estimator = trial.build_estimator(trial.hparams)
        if not isinstance(self.estimator, estimator_api.Estimator):
            raise TypeError(
                f"{describe(type(trial).build_estimator)} must return a tf.estimator.Estimator, "
                f"got {type(self.estimator).__name__}"
            )
        self.train_spec = trial.build_train_spec(trial.hparams)
        if not isinstance(self.train_spec, estimator_api.TrainSpec):
            raise TypeError(
                f"{describe(type(trial).build_train_spec)} must return a tf.estimator.TrainSpec, "
                f"got {type(self.train_spec).__name__}"
            )
        self.validation_spec = trial.build_validation_spec(trial.hparams)
        if not isinstance(self.validation_spec, estimator_api.EvalSpec):
            raise TypeError(
                f"{describe(type(trial).build_validation_spec)} must return a tf.estimator.EvalSpec, "
                f"got {type(self.validation_spec).__name__}"
            )
        self.serving_fns = trial.build_serving_input_receiver_fns(trial.hparams)
        if not isinstance(self.serving_fns, dict):
            raise TypeError(
                f"{describe(type(trial).build_serving_input_receiver_fns)} must return a dict of "
                f"serving input receiver functions by name, got {type(self.serving_fns).__name__}"
            )

    @property
    def batches_trained(self) -> int:
        return self._batches_trained

    def train_until(self, total_batches: int) -> StepResult:
        count = total_batches - self._batches_trained
        if count <= 0:
            return StepResult()
        hook = _LossHook()
        where = describe(type(self.trial).build_train_spec)
        self.estimator.train(
            input_fn=_positioned_input_fn(self.train_spec.input_fn, self._batches_trained, where),
            steps=count,
            hooks=[*(self.train_spec.hooks or ()), hook],
        )
        if len(hook.losses) != count:
            raise RuntimeError(
                f"the Estimator trained {len(hook.losses)} batches instead of {count}; its input_fn "
                "(repeated by PEDL) ran out of data"
            )
        self._batches_trained += count
        loss = float(np.mean(hook.losses))
        if not np.isfinite(loss):
            first = total_batches - count + 1
            raise FloatingPointError(f"training batches {first}-{total_batches}: the mean loss is {loss}")
        return StepResult(metrics={"loss": loss}, num_batches=count)

    def validate(self) -> dict[str, Any]:
        spec = self.validation_spec
        results = self.estimator.evaluate(input_fn=spec.input_fn, steps=spec.steps, hooks=spec.hooks)
        metrics = {k: v for k, v in results.items() if k != "global_step"}
        return mean_metrics([metrics], "validation")

    def save(self, path: Path) -> None:
        path = Path(path)
        latest = tf.train.latest_checkpoint(self.estimator.model_dir)
        if latest is None:
            raise RuntimeError("the Estimator has no checkpoint to save yet: train at least one batch first")
        target = path / ESTIMATOR_DIR
        target.mkdir(parents=True)
        for file in Path(latest).parent.glob(Path(latest).name + ".*"):
            shutil.copy2(file, target / file.name)
        (target / "checkpoint").write_text(f'model_checkpoint_path: "{Path(latest).name}"\n')
        for name, fn in self.serving_fns.items():
            self.estimator.export_saved_model(str(path / name), fn, checkpoint_path=latest)
        (path / TRAINING_FILE).write_text(json.dumps({"batches_trained": self._batches_trained}) + "\n")
        _checkpoint.write_metadata(path, FRAMEWORK, self._batches_trained, self.trial)

    def load(self, path: Path) -> None:
        path = Path(path)
        _checkpoint.read_metadata(path, FRAMEWORK)
        model_dir = Path(self.estimator.model_dir)
        model_dir.mkdir(parents=True, exist_ok=True)
        for file in (path / ESTIMATOR_DIR).iterdir():
            shutil.copy2(file, model_dir / file.name)
        self._batches_trained = int(json.loads((path / TRAINING_FILE).read_text())["batches_trained"])
