"""TensorFlowTrialController: one `tf.compat.v1` graph and session for training and validation."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from pedl.harness.controller import StepResult
from pedl.model_def.errors import describe
from pedl.tensorflow import _checkpoint, _datasets
from pedl.tensorflow._averaging import first_non_finite, mean_metrics
from pedl.tensorflow._trial import TensorFlowTrial

v1 = tf.compat.v1


def _check_outputs(outputs: Any, trial: TensorFlowTrial, graph: tf.Graph) -> dict[str, tf.Tensor]:
    where = describe(type(trial).build_graph)
    if not isinstance(outputs, dict):
        raise TypeError(f"{where} must return a dict of tensors by name, got a {type(outputs).__name__}")
    if "loss" not in outputs:
        keys = ", ".join(map(repr, outputs)) or "none"
        raise ValueError(
            f"{where} must return a tensor named 'loss' (the value optimized); it returned {keys}"
        )
    checked = {}
    for name, value in outputs.items():
        if not isinstance(name, str):
            raise TypeError(f"{where} returned the non-string key {name!r}; name every output with a str")
        if isinstance(value, tf.Variable):
            value = value.value()
        if not isinstance(value, tf.Tensor) or value.graph is not graph:
            raise TypeError(
                f"{where}: output {name!r} is a {type(value).__name__}, not a tensor of the graph"
            )
        checked[name] = value
    return checked


def _metric_names(names: Any, method: Any, outputs: dict[str, tf.Tensor], training: bool) -> list[str]:
    where = describe(method)
    if (
        isinstance(names, str)
        or not isinstance(names, (list, tuple))
        or not all(isinstance(n, str) for n in names)
    ):
        raise TypeError(f"{where} must return a list of output names (str), got {names!r}")
    if training and "loss" in names:
        raise ValueError(f"{where} must not include 'loss': the training loss is always reported")
    unknown = [n for n in names if n not in outputs]
    if unknown:
        raise ValueError(
            f"{where} names {', '.join(map(repr, unknown))}, which build_graph() did not return "
            f"(available: {', '.join(sorted(outputs))})"
        )
    return list(dict.fromkeys(names))


class TensorFlowTrialController:
    """Implements `pedl.harness.controller.TrialController` for TensorFlowTrial.

    The training dataset is read as one endless stream (`repeat()`), so its data position is
    the number of batches trained; a restored trial re-creates the stream and skips that many.
    """

    def __init__(
        self,
        trial: TensorFlowTrial,
        training: tf.data.Dataset,
        validation: tf.data.Dataset,
        origin: str = "make_data_loaders()",
    ) -> None:
        self.trial = trial
        self._batches_trained = 0
        # Batches taken from the endless training stream; equal to batches trained.
        self._data_position = 0
        self._train_started = False
        spec = _datasets.common_spec(training, validation, origin)
        self._train_def = _datasets.serialize(training, f"the training dataset of {origin}")
        self._val_def = _datasets.serialize(validation, f"the validation dataset of {origin}")
        self.graph = tf.Graph()
        # Drawn from NumPy, which the harness seeds with the trial seed: reproducible initial values.
        self.graph.seed = int(np.random.randint(2**31 - 1))
        with self.graph.as_default():
            self._build(training.element_spec, validation.element_spec, spec)
        self.session = v1.Session(graph=self.graph, config=self._session_config())
        self.session.run(self._init_op)
        self._train_handle, self._val_handle = self.session.run(
            [self._train_iterator.string_handle(), self._val_iterator.string_handle()]
        )

    def _build(self, train_spec: Any, val_spec: Any, spec: Any) -> None:
        trial = self.trial
        self._train_def_input = v1.placeholder(tf.string, [], name="pedl_training_dataset")
        self._val_def_input = v1.placeholder(tf.string, [], name="pedl_validation_dataset")
        self._skip = v1.placeholder(tf.int64, [], name="pedl_skip_batches")
        train_ds = _datasets.from_serialized(self._train_def_input, train_spec).repeat().skip(self._skip)
        self._train_iterator = v1.data.make_initializable_iterator(train_ds)
        self._val_iterator = v1.data.make_initializable_iterator(
            _datasets.from_serialized(self._val_def_input, val_spec)
        )
        self._handle = v1.placeholder(tf.string, [], name="pedl_iterator_handle")
        iterator = v1.data.Iterator.from_string_handle(
            self._handle,
            tf.nest.map_structure(lambda s: s.dtype, spec),
            tf.nest.map_structure(lambda s: s.shape, spec),
        )
        self.is_training = v1.placeholder(tf.bool, [], name="is_training")
        record = iterator.get_next()
        first = tf.nest.flatten(record)[0]
        self._batch_length = tf.shape(first)[0] if first.shape.rank else tf.constant(1)
        self.outputs = _check_outputs(trial.build_graph(record, self.is_training), trial, self.graph)
        self._training_names = _metric_names(
            trial.training_metrics(), type(trial).training_metrics, self.outputs, training=True
        )
        self._validation_names = _metric_names(
            trial.validation_metrics(), type(trial).validation_metrics, self.outputs, training=False
        )
        optimizer = trial.optimizer()
        if not isinstance(optimizer, v1.train.Optimizer):
            raise TypeError(
                f"{describe(type(trial).optimizer)} must return a tf.compat.v1.train.Optimizer "
                f"(graph mode), got {type(optimizer).__module__}.{type(optimizer).__qualname__}"
            )
        # Batch normalization and the like register their moving-average updates here.
        with tf.control_dependencies(v1.get_collection(v1.GraphKeys.UPDATE_OPS)):
            self._train_op = optimizer.minimize(self.outputs["loss"])
        self._saver = v1.train.Saver(max_to_keep=None, save_relative_paths=True)
        self._init_op = tf.group(v1.global_variables_initializer(), v1.local_variables_initializer())
        self._train_fetches = {name: self.outputs[name] for name in ["loss", *self._training_names]}
        self._val_fetches = {name: self.outputs[name] for name in self._validation_names}

    def _session_config(self) -> Any:
        config = self.trial.session_config()
        if not isinstance(config, v1.ConfigProto):
            raise TypeError(
                f"{describe(type(self.trial).session_config)} must return a tf.compat.v1.ConfigProto, "
                f"got {type(config).__name__}"
            )
        return config

    @classmethod
    def from_trial_class(
        cls,
        trial_class: type[TensorFlowTrial],
        hparams: dict[str, Any],
        data_loaders: Sequence[Any] | Any,
        origin: str = "make_data_loaders()",
    ) -> TensorFlowTrialController:
        training, validation = _datasets.check_pair(data_loaders, origin)
        return cls(trial_class(hparams), training, validation, origin)

    @property
    def batches_trained(self) -> int:
        return self._batches_trained

    def _start_training_stream(self) -> None:
        self.session.run(
            self._train_iterator.initializer,
            {self._train_def_input: self._train_def, self._skip: self._data_position},
        )
        self._train_started = True

    def train_until(self, total_batches: int) -> StepResult:
        count = total_batches - self._batches_trained
        if count <= 0:
            return StepResult()
        if not self._train_started:
            self._start_training_stream()
        feed = {self._handle: self._train_handle, self.is_training: True}
        fetches = {"train": self._train_op, "metrics": self._train_fetches, "inputs": self._batch_length}
        results = []
        num_inputs = 0
        run = self.session.run
        for i in range(count):
            try:
                out = run(fetches, feed)
                results.append(out["metrics"])
                num_inputs += int(out["inputs"])
            except tf.errors.OutOfRangeError:
                raise RuntimeError(
                    f"training batch {self._batches_trained + i + 1}: the training dataset yields no batches"
                ) from None
        self._batches_trained += count
        self._data_position += count
        bad = first_non_finite([r["loss"] for r in results])
        if bad is not None:
            raise FloatingPointError(
                f"training batch {total_batches - count + bad + 1}: the loss is {results[bad]['loss']}"
            )
        return StepResult(metrics=mean_metrics(results, "training"), num_batches=count, num_inputs=num_inputs)

    def validate(self) -> dict[str, Any]:
        self.session.run(self._val_iterator.initializer, {self._val_def_input: self._val_def})
        feed = {self._handle: self._val_handle, self.is_training: False}
        # Fetching the batch length always reads the iterator, even if no metric depends on the data.
        fetches = {"metrics": self._val_fetches, "inputs": self._batch_length}
        results = []
        while True:
            try:
                results.append(self.session.run(fetches, feed)["metrics"])
            except tf.errors.OutOfRangeError:
                break
        if not results:
            raise RuntimeError("the validation dataset produced no batches")
        return mean_metrics(results, "validation")

    def save(self, path: Path) -> None:
        _checkpoint.save(self, Path(path))

    def load(self, path: Path) -> None:
        _checkpoint.load(self, Path(path))

    def warm_start(self, path: Path) -> None:
        _checkpoint.warm_start(self, Path(path))

    def close(self) -> None:
        self.session.close()

    # Used by _checkpoint.
    def _save_variables(self, prefix: Path) -> None:
        with self.graph.as_default():
            self._saver.save(self.session, str(prefix), write_meta_graph=False, write_state=False)

    def _restore(self, prefix: Path, batches_trained: int, data_position: int) -> None:
        with self.graph.as_default():
            self._saver.restore(self.session, str(prefix))
        self._batches_trained = batches_trained
        self._data_position = data_position
        self._train_started = False  # the stream restarts at the checkpoint's position
