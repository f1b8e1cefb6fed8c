"""EstimatorTrial: the `tf.estimator` interface (seed 003).

`tf.estimator` was removed in TensorFlow 2.16, so EstimatorTrial runs only where TensorFlow
2.15 or older is installed (`scripts/build-tf215-env` builds such an environment); elsewhere
creating its controller fails with an error naming that requirement. No make_data_loaders is
needed: the input functions of the train and validation specs provide the data.

Training runs in one long `Estimator.train()` call from one checkpoint to the next, steered by a
hook between steps (`pedl.tensorflow._estimator_loop`). Checkpoints copy the Estimator's own
latest checkpoint (from its `model_dir`), plus the batch count, and export one SavedModel per
`build_serving_input_receiver_fns()` entry.
"""

from __future__ import annotations

import abc
import atexit
import inspect
import json
import queue
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
from pedl.tensorflow._estimator_loop import Command, ControlHook, Worker
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


def _pinned(estimator: Any, model_dir: str | None, seed: int) -> Any:
    """`estimator` with the trial's graph seed (unless the user set one) and, when given, `model_dir`.

    A rebuilt Estimator must keep training in the first one's `model_dir` (an Estimator built without
    one picks a new temporary directory), and without a graph seed its random ops (initializers,
    dropout) would draw differently on every run. tf.estimator is frozen at 2.15, so setting its
    private fields is safe."""
    config = estimator.config
    if config.tf_random_seed is None:
        config = config.replace(tf_random_seed=seed)
    if model_dir is not None and model_dir != estimator.model_dir:
        config = config.replace(model_dir=model_dir)
        estimator._model_dir = model_dir
    estimator._config = config
    return estimator


class EstimatorTrialController:
    """Implements `pedl.harness.controller.TrialController` for EstimatorTrial (see `_estimator_loop`)."""

    def __init__(self, trial: EstimatorTrial) -> None:
        self._api = estimator_module()
        self.trial = trial
        self._batches_trained = 0
        # Drawn from NumPy, which the harness seeds with the trial seed: reproducible initial values.
        self._seed = int(np.random.randint(2**31 - 1))
        self.estimator = _pinned(self._built_estimator(), None, self._seed)
        self._fresh = True  # no train() call has used self.estimator yet
        self.train_spec = trial.build_train_spec(trial.hparams)
        if not isinstance(self.train_spec, self._api.TrainSpec):
            raise TypeError(
                f"{describe(type(trial).build_train_spec)} must return a tf.estimator.TrainSpec, "
                f"got {type(self.train_spec).__name__}"
            )
        self.validation_spec = trial.build_validation_spec(trial.hparams)
        if not isinstance(self.validation_spec, self._api.EvalSpec):
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
        self._worker: Worker | None = None

    def _built_estimator(self) -> Any:
        estimator = self.trial.build_estimator(self.trial.hparams)
        # tf.compat.v1.estimator's Estimator, which tf.estimator's subclasses: Determined's examples
        # return v1 canned ones too (`tf.compat.v1.estimator.DNNClassifier`).
        if not isinstance(estimator, tf.compat.v1.estimator.Estimator):
            raise TypeError(
                f"{describe(type(self.trial).build_estimator)} must return a tf.estimator.Estimator, "
                f"got {type(estimator).__name__}"
            )
        return estimator

    @property
    def batches_trained(self) -> int:
        return self._batches_trained

    def train_until(self, total_batches: int) -> StepResult:
        if total_batches <= self._batches_trained:
            return StepResult()
        return self._call("train", target=total_batches)

    def validate(self) -> dict[str, Any]:
        return self._call("validate")

    def save(self, path: Path) -> None:
        self._call("save", path=Path(path))

    def close(self) -> None:
        """Ends the train call in progress; runs at interpreter exit (the harness exits on TERMINATE)."""
        if self._worker is not None:
            self._worker.close()

    def _call(self, kind: str, target: int = 0, path: Path | None = None) -> Any:
        if self._worker is None:
            self._worker = Worker(self._serve)
            atexit.register(self.close)
        return self._worker.call(kind, target, path)

    # Everything below runs on the worker thread.

    def _serve(self, commands: queue.Queue[Command]) -> None:
        while True:
            command = commands.get()
            try:
                if command.kind == "train":
                    command = self._train_call(command, commands)
                if command.kind == "stop":
                    command.done.set_result(None)
                    return
                if command.kind == "validate":
                    command.done.set_result(
                        self._evaluate(tf.train.latest_checkpoint(self.estimator.model_dir))
                    )
                elif command.kind == "save":
                    self._save(command.path)
                    command.done.set_result(None)
            except BaseException as exc:
                if not command.done.done():
                    command.done.set_exception(exc)

    def _train_call(self, first: Command, commands: queue.Queue[Command]) -> Command:
        """Trains in one `train()` call until a save or stop command ends it; returns that command."""
        if not self._fresh:
            self.estimator = _pinned(self._built_estimator(), self.estimator.model_dir, self._seed)
        self._fresh = False
        hook = ControlHook(first, self._batches_trained, commands, self._evaluate, self.estimator.model_dir)
        where = describe(type(self.trial).build_train_spec)
        try:
            self.estimator.train(
                input_fn=_positioned_input_fn(self.train_spec.input_fn, self._batches_trained, where),
                hooks=[*(self.train_spec.hooks or ()), hook],
            )
            if hook.ending is None:
                raise RuntimeError(
                    f"the Estimator stopped after {hook.batches_trained} batches, short of "
                    f"{hook.pending.target if hook.pending else '?'}: its input_fn (repeated by PEDL) "
                    "yields no data, or a hook of the train spec requested a stop"
                )
        except BaseException as exc:
            # The step in progress fails (the first, if the graph failed to build), or the save/stop.
            failed = hook.pending or hook.ending or first
            if not failed.done.done():
                failed.done.set_exception(exc)
            return Command("idle")
        finally:
            self._batches_trained = hook.batches_trained
        return hook.ending

    def _evaluate(self, checkpoint: str | None) -> dict[str, Any]:
        if checkpoint is None:
            raise RuntimeError(
                "the Estimator has no checkpoint to validate yet: train at least one batch first"
            )
        spec = self.validation_spec
        results = self.estimator.evaluate(
            input_fn=spec.input_fn, steps=spec.steps, hooks=spec.hooks, checkpoint_path=checkpoint
        )
        metrics = {k: v for k, v in results.items() if k != "global_step"}
        return mean_metrics([metrics], "validation")

    def _save(self, path: Path) -> None:
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

    def warm_start(self, path: Path) -> None:
        # An Estimator's checkpoint carries its global step, which its training loop counts on.
        raise ValueError(
            "searcher.source_checkpoint_uuid: warm starts are not supported for EstimatorTrial; pass "
            "warm_start_from to your Estimator in build_estimator instead"
        )
