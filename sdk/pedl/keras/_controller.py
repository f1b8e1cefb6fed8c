"""KerasTrialController: trains a compiled Keras model batch by batch (`train_on_batch`)."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import keras
import numpy as np

from pedl.harness.controller import StepResult
from pedl.keras import _checkpoint, _distributed, _replay
from pedl.keras._adapter import unwrap_data
from pedl.keras._compile import ReportedNames, compile_from_trial, defines_training_methods, is_compiled
from pedl.keras._data import (
    TrainingStream,
    batch_length,
    check_source,
    unpack,
    validation_batches,
    validation_input,
)
from pedl.keras._keras2 import accept_keras2_spellings
from pedl.keras._names import keras_validation_metrics
from pedl.keras._session import apply_session_config
from pedl.keras._tensorboard import TensorBoard
from pedl.keras._trial import KerasTrial
from pedl.model_def.errors import describe
from pedl.tensorflow._averaging import first_non_finite, mean_metrics


def check_model(model: Any, where: str) -> keras.Model:
    if not isinstance(model, keras.Model):
        raise TypeError(
            f"{where} must return a keras.Model, got {type(model).__module__}.{type(model).__qualname__}"
        )
    if not is_compiled(model):
        raise ValueError(
            f"{where} must return a compiled model: call model.compile(optimizer, loss, metrics) first"
        )
    return model


class KerasTrialController:
    """Implements `pedl.harness.controller.TrialController` for a compiled Keras model.

    Training metrics are the per-batch results of `train_on_batch` averaged over the step;
    validation reports `model.evaluate` over the whole validation data, under the compiled names
    with Keras's `val_` prefix. A model pedl compiled from the trial's methods (PEDL 0.11's form,
    `pedl.keras._compile`) reports the names those methods give.
    On several slots the model runs under MultiWorkerMirroredStrategy (`pedl.keras._distributed`).
    """

    def __init__(
        self,
        trial: Any,
        model: keras.Model,
        training: Any,
        validation: Any,
        where: str = "build_model()",
        names: ReportedNames | None = None,
    ) -> None:
        self.trial = trial
        self.model = model
        self.names = names
        self.validation = validation
        self._batches_trained = 0
        # Set when the harness started this process as one of several workers.
        self.workers = _distributed.current()
        self._steps: _distributed.Steps | None = None
        self._tensorboards: list[TensorBoard] = []
        # Drawn from NumPy, which the harness seeds with the trial seed (alike on every worker).
        seed = int(np.random.randint(2**31 - 1))
        self.stream = TrainingStream(training, seed, self.workers.shard if self.workers else None)
        if self.workers is not None:
            _distributed.check_model(model, self.workers, where)
            self._steps = _distributed.Steps(model, self.workers)
            self._steps.build(self.stream.sample())

    @classmethod
    def from_trial_class(
        cls,
        trial_class: type[KerasTrial],
        hparams: dict[str, Any],
        data_loaders: Sequence[Any] | Any,
        origin: str = "make_data_loaders()",
    ) -> KerasTrialController:
        trial = trial_class(hparams)
        if not hasattr(trial, "hparams"):  # PEDL 0.11's trials define __init__ without super()'s
            trial.hparams = dict(hparams)
        if defines_training_methods(trial):
            # PEDL 0.11's form: its optimizers are written in Keras 2 (`RMSprop(lr=..., decay=...)`).
            accept_keras2_spellings()
        session_config = getattr(trial, "session_config", None)
        if callable(session_config):  # PEDL 0.11's `session_config(hparams)`, or one without hparams
            takes_hparams = bool(inspect.signature(session_config).parameters)
            config = session_config(trial.hparams) if takes_hparams else session_config()
            apply_session_config(config, describe(session_config))
        return cls.from_trial(trial, data_loaders, origin, compile_from_methods=True)

    @classmethod
    def from_trial(
        cls,
        trial: Any,
        data_loaders: Sequence[Any] | Any,
        origin: str,
        build: Any = None,
        compile_from_methods: bool = False,
    ) -> KerasTrialController:
        """The controller of a constructed trial; `build()` makes its compiled model (by default
        `trial.build_model(trial.hparams)`; the PEDL 0.11 and Determined adapters pass their own).
        With `compile_from_methods` (a KerasTrial: PEDL 0.11's form is one) an uncompiled model is
        compiled from the trial's optimizer()/loss() (`pedl.keras._compile`); TFKerasTrials, whose
        documentation asks for a compiled model, are not offered that."""
        expected = "a pair (training data, validation data)"
        if not isinstance(data_loaders, (tuple, list)) or len(data_loaders) != 2:
            raise TypeError(f"{origin} must return {expected}; it returned a {type(data_loaders).__name__}")
        trial_class = type(trial)
        size_origin = describe(trial_class.batch_size)
        training, validation = (
            check_source(unwrap_data(source), role, origin, trial.batch_size(), size_origin)
            for role, source in zip(("training", "validation"), data_loaders, strict=True)
        )
        # Keras draws initial weights and dropout seeds from its own global generator.
        keras.utils.set_random_seed(int(np.random.randint(2**31 - 1)))
        where = describe(trial_class.build_model)
        with _distributed.scope():
            model = build() if build is not None else trial.build_model(trial.hparams)
            names = compile_from_trial(trial, model, where) if compile_from_methods else None
            model = check_model(model, where)
        trial.model = model
        return cls(trial, model, training, validation, where, names)

    def attach_tensorboards(self, callbacks: Sequence[TensorBoard]) -> None:
        """The trial's TensorBoard callbacks (`keras_callbacks()`), told of each validation; on
        several workers only the chief's write (the harness uploads the chief's files)."""
        if self.workers is not None and not self.workers.is_chief:
            return
        self._tensorboards = list(callbacks)
        for callback in self._tensorboards:
            callback.attach(self.model)

    @property
    def batches_trained(self) -> int:
        return self._batches_trained

    def train_until(self, total_batches: int) -> StepResult:
        count = total_batches - self._batches_trained
        if count <= 0:
            return StepResult()
        results = []
        num_inputs = 0
        for _ in range(count):
            x, y, weights = unpack(self.stream.next())
            num_inputs += batch_length(x)
            results.append(self.model.train_on_batch(x, y, sample_weight=weights, return_dict=True))
        self._batches_trained += count
        metrics = mean_metrics(results, "training")
        if self.names is not None:
            metrics = self.names.training_metrics(metrics)
        if self._steps is not None:
            # Before raising below: the others must not wait for this worker's part.
            metrics, num_inputs = self._steps.mean_step(metrics, num_inputs)
        bad = first_non_finite([r["loss"] for r in results])
        if bad is not None:
            raise FloatingPointError(
                f"training batch {total_batches - count + bad + 1}: the loss is {results[bad]['loss']}"
            )
        return StepResult(metrics=metrics, num_batches=count, num_inputs=num_inputs)

    def validate(self) -> dict[str, Any]:
        metrics = self._validate()
        for callback in self._tensorboards:
            callback.after_validation()
        return metrics

    def _validate(self) -> dict[str, Any]:
        if self._steps is not None:
            assert self.workers is not None
            batches = validation_batches(self.validation, self.workers.shard)
            return self._named(mean_metrics([self._steps.validate(batches)], "validation"))
        data, keywords = validation_input(self.validation)
        with warnings.catch_warnings():
            # Keras warns when a generator ends; for the validation pass that end is expected.
            warnings.filterwarnings("ignore", message="Your input ran out of data")
            metrics = self.model.evaluate(data, verbose=0, return_dict=True, **keywords)
        return self._named(mean_metrics([metrics], "validation"))

    def _named(self, metrics: dict[str, Any]) -> dict[str, Any]:
        if self.names is not None:
            return self.names.validation_metrics(metrics)
        return keras_validation_metrics(metrics)

    def save(self, path: Path) -> None:
        """Writes the checkpoint; on several workers only the chief does (all hold the same state).

        Not under the strategy's scope: Keras's saving creates a throwaway variable, which there
        would be a collective that the other workers never join."""
        # Every worker draws its generators' next batches as the chief does for the fingerprints,
        # so that all of them keep drawing in the same order.
        for source in _replay.replayed_sources(self.stream.source, self.validation).values():
            source.peek()
        if self.workers is not None and not self.workers.is_chief:
            return
        _checkpoint.save(self, Path(path))

    def load(self, path: Path) -> None:
        _checkpoint.load(self, Path(path))

    def warm_start(self, path: Path) -> None:
        _checkpoint.warm_start(self, Path(path))

    # Used by _checkpoint.
    def _restore_position(self, batches_trained: int, data_position: dict[str, int]) -> None:
        self._batches_trained = batches_trained
        self.stream.restore(data_position)
