"""PEDL 0.11's KerasTrial form (an uncompiled model, optimizer()/loss()/metric methods) on the
Keras controller, written as PEDL 0.11's Keras examples write it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras_toy_trials import ToyPyDataset, toy_data

from pedl.frameworks.keras import KerasTrial
from pedl.frameworks.keras.data import KerasDataAdapter
from pedl.harness.build import seed_all
from pedl.harness.controllers import create_controller
from pedl.keras import KerasTrialController
from pedl.trial import MetricOp, ValidOp


def sparse_error(y_true: Any, y_pred: Any) -> Any:
    return 1.0 - keras.metrics.sparse_categorical_accuracy(y_true, y_pred)


class Pedl011Trial(KerasTrial):
    def __init__(self, hparams: dict[str, Any]) -> None:  # as cifar10_cnn_keras: no super().__init__
        self.learning_rate = hparams["lr"]
        self.configured: list[dict[str, Any]] = []

    def session_config(self, hparams: dict[str, Any]) -> Any:
        self.configured.append(hparams)
        return tf.compat.v1.ConfigProto(allow_soft_placement=True)

    def build_model(self, hparams: dict[str, Any]) -> keras.Model:
        return keras.Sequential(
            [
                keras.Input((4,)),
                keras.layers.Dense(8, activation="relu"),
                keras.layers.Dense(2, activation="softmax"),
            ]
        )

    def optimizer(self) -> keras.optimizers.Optimizer:
        return keras.optimizers.RMSprop(lr=self.learning_rate, decay=1e-6)  # Keras 2's spelling

    def loss(self) -> MetricOp:
        return keras.losses.sparse_categorical_crossentropy

    def batch_size(self) -> int:
        return 8

    def training_metrics(self) -> dict[str, MetricOp]:
        return {"accuracy": keras.metrics.sparse_categorical_accuracy}

    def validation_metrics(self) -> dict[str, ValidOp]:
        return {"validation_error": sparse_error, "accuracy": keras.metrics.sparse_categorical_accuracy}


def controller(trial_class: type = Pedl011Trial) -> KerasTrialController:
    seed_all(0)
    made = create_controller(trial_class, {"lr": 0.01}, toy_data("arrays"), "make_data_loaders()")
    assert isinstance(made, KerasTrialController)
    return made


def test_uncompiled_model_is_compiled_from_the_trial_methods() -> None:
    ctl = controller()
    assert ctl.trial.configured == [{"lr": 0.01}]  # session_config(hparams) was asked
    assert ctl.trial.hparams == {"lr": 0.01}
    first = ctl.train_until(4)
    assert set(first.metrics) == {"loss", "accuracy"}
    later = ctl.train_until(80)
    assert later.metrics["loss"] < first.metrics["loss"]
    metrics = ctl.validate()
    # PEDL 0.11's names: cifar10_cnn_keras's `searcher.metric: validation_error` finds its metric.
    assert set(metrics) == {"val_loss", "validation_error", "accuracy"}
    assert metrics["validation_error"] == pytest.approx(1.0 - metrics["accuracy"], abs=1e-6)
    assert metrics["accuracy"] > 0.7
    lr = ctl.model.optimizer.learning_rate
    assert float(np.asarray(lr)) == pytest.approx(0.01)


class SameNameOtherFunction(Pedl011Trial):
    def validation_metrics(self) -> dict[str, ValidOp]:
        return {"accuracy": sparse_error}  # the training "accuracy" is another function


def test_a_validation_metric_keeps_its_function_when_a_training_one_has_its_name() -> None:
    ctl = controller(SameNameOtherFunction)
    training = ctl.train_until(40).metrics
    assert set(training) == {"loss", "accuracy"}
    validation = ctl.validate()
    assert set(validation) == {"val_loss", "accuracy"}
    train_accuracy = ctl.model.evaluate(*toy_data("arrays")[1], verbose=0, return_dict=True)["accuracy"]
    assert validation["accuracy"] == pytest.approx(1.0 - train_accuracy, abs=1e-6)


class CompiledToo(Pedl011Trial):
    def build_model(self, hparams: dict[str, Any]) -> keras.Model:
        model = super().build_model(hparams)
        model.compile(
            optimizer="sgd", loss="sparse_categorical_crossentropy", metrics=["sparse_categorical_accuracy"]
        )
        return model


def test_a_compiled_model_wins_over_the_trial_methods() -> None:
    with pytest.warns(
        UserWarning, match=r"returned a compiled model: its compile\(\) wins over CompiledToo's optimizer\(\)"
    ):
        ctl = controller(CompiledToo)
    assert isinstance(ctl.model.optimizer, keras.optimizers.SGD)
    assert set(ctl.train_until(2).metrics) == {"loss", "sparse_categorical_accuracy"}
    assert set(ctl.validate()) == {"val_loss", "val_sparse_categorical_accuracy"}


class NoTrainingMethods(KerasTrial):
    def build_model(self, hparams: dict[str, Any]) -> keras.Model:
        return keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])

    def batch_size(self) -> int:
        return 8


class OptimizerOnly(NoTrainingMethods):
    def optimizer(self) -> Any:
        return "sgd"


class MetricsAsList(OptimizerOnly):
    def loss(self) -> Any:
        return keras.losses.sparse_categorical_crossentropy

    def training_metrics(self) -> Any:
        return [keras.metrics.sparse_categorical_accuracy]


class MetricNamedLoss(MetricsAsList):
    def training_metrics(self) -> Any:
        return {"loss": keras.metrics.sparse_categorical_accuracy}


class DictSessionConfig(Pedl011Trial):
    def session_config(self, hparams: dict[str, Any]) -> Any:
        return {"intra_op_parallelism_threads": 1}


def test_bad_combinations_name_what_is_missing() -> None:
    with pytest.raises(
        TypeError,
        match=r"DictSessionConfig.session_config .*must return a tf.compat.v1.ConfigProto, got dict",
    ):
        controller(DictSessionConfig)
    with pytest.raises(
        ValueError,
        match=r"returned an uncompiled model and NoTrainingMethods defines no optimizer\(\) and loss\(\)",
    ):
        controller(NoTrainingMethods)
    with pytest.raises(
        ValueError, match=r"uncompiled model and OptimizerOnly defines no loss\(\): compile the model"
    ):
        controller(OptimizerOnly)
    with pytest.raises(
        TypeError,
        match=r"MetricsAsList.training_metrics .*must return a dict of name -> metric function, got list",
    ):
        controller(MetricsAsList)
    with pytest.raises(ValueError, match=r"the name 'loss' is the loss\(\)'s"):
        controller(MetricNamedLoss)


def test_tf1_config_proto_name_resolves_for_pedl011_trials() -> None:
    assert tf.ConfigProto is tf.compat.v1.ConfigProto  # set by importing pedl.frameworks.keras


def test_a_resumed_trial_continues_where_its_checkpoint_was_taken(tmp_path: Path) -> None:
    uninterrupted = controller()
    uninterrupted.train_until(30)
    expected = (uninterrupted.train_until(50).metrics, uninterrupted.validate())

    first = controller()
    first.train_until(30)
    first.save(tmp_path / "ckpt")
    resumed = controller()  # the optimizer's state comes back into the model pedl compiled
    resumed.load(tmp_path / "ckpt")
    assert (resumed.train_until(50).metrics, resumed.validate()) == expected


def test_data_wrapped_in_a_keras_data_adapter_is_unwrapped() -> None:
    seed_all(0)
    wrapped = (
        KerasDataAdapter(ToyPyDataset(), workers=1, use_multiprocessing=True),
        ToyPyDataset(shuffle=False),
    )
    ctl = create_controller(Pedl011Trial, {"lr": 0.01}, wrapped, "make_data_loaders()")
    assert ctl.train_until(3).num_inputs == 24
    assert set(ctl.validate()) == {"val_loss", "validation_error", "accuracy"}
