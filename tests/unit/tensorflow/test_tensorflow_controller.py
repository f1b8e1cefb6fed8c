"""TensorFlowTrialController: training, validation, errors and exact resume (graph mode)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import tensorflow as tf
from tf_toy_trials import ToyTFTrial, toy_datasets

from pedl.harness.build import seed_all
from pedl.tensorflow import TensorFlowTrialController

v1 = tf.compat.v1


def controller(
    trial_class: type = ToyTFTrial, loaders: Any = None, **hparams: Any
) -> TensorFlowTrialController:
    return TensorFlowTrialController.from_trial_class(
        trial_class, {"lr": 0.05, **hparams}, loaders or toy_datasets(), "make_data_loaders()"
    )


def test_trains_to_absolute_targets_across_epochs_and_validates() -> None:
    seed_all(0)
    ctl = controller()
    first = ctl.train_until(5)
    assert first.num_batches == 5 and first.num_inputs == 40
    assert set(first.metrics) == {"loss", "accuracy"}
    assert ctl.train_until(5).num_batches == 0
    later = ctl.train_until(40)  # 8 batches per epoch: cycles through five epochs
    assert later.num_batches == 35 and ctl.batches_trained == 40
    assert later.metrics["loss"] < first.metrics["loss"]
    metrics = ctl.validate()
    assert set(metrics) == {"loss", "error"}
    assert metrics["error"] < 0.3
    assert ctl.validate() == metrics  # validation has no side effects


def run_steps(ctl: TensorFlowTrialController, steps: range, per_step: int) -> list[dict[str, Any]]:
    out = []
    for step in steps:
        out.append(ctl.train_until(step * per_step).metrics)
        out.append(ctl.validate())
    return out


@pytest.mark.parametrize("per_step", [5, 8])  # stops mid-epoch, and exactly at an epoch's end
def test_resumed_run_matches_uninterrupted_run_exactly(tmp_path: Path, per_step: int) -> None:
    seed_all(3)
    uninterrupted = run_steps(controller(), range(1, 6), per_step)

    seed_all(3)
    first = controller()
    interrupted = run_steps(first, range(1, 3), per_step)
    first.save(tmp_path / "ckpt")
    first.train_until(5 * per_step)  # the original goes on; the checkpoint must not care

    seed_all(3)  # a restarted trial is seeded with its trial seed again
    resumed = controller()
    resumed.load(tmp_path / "ckpt")
    assert resumed.batches_trained == 2 * per_step
    interrupted += run_steps(resumed, range(3, 6), per_step)
    assert interrupted == uninterrupted


def test_checkpoint_holds_variables_optimizer_slots_and_position(tmp_path: Path) -> None:
    seed_all(0)
    ctl = controller()
    ctl.train_until(3)
    ctl.save(tmp_path)
    metadata = json.loads((tmp_path / "metadata.json").read_text())
    assert metadata["framework"] == "tensorflow" and metadata["batches_trained"] == 3
    assert json.loads((tmp_path / "training_state.json").read_text()) == {
        "batches_trained": 3,
        "data_position": 3,
    }
    names = {name for name, _ in tf.train.list_variables(str(tmp_path / "variables"))}
    assert {"w", "b", "w/Adam", "w/Adam_1", "beta1_power"} <= names


def test_datasets_of_different_structure_are_named() -> None:
    train, _ = toy_datasets()
    other = tf.data.Dataset.from_tensor_slices(([[1.0] * 4], [1])).batch(1)
    with pytest.raises(
        ValueError, match=r"make_data_loaders\(\) returned datasets of different structures.*training"
    ):
        controller(loaders=(train, other))


def test_data_loaders_must_be_a_pair_of_datasets() -> None:
    with pytest.raises(TypeError, match=r"validation dataset is a builtins.list"):
        controller(loaders=(toy_datasets()[0], [1, 2]))


class NoLoss(ToyTFTrial):
    def build_graph(self, record: Any, is_training: tf.Tensor) -> dict[str, tf.Tensor]:
        outputs = super().build_graph(record, is_training)
        return {"xent": outputs.pop("loss"), **outputs}


class UnknownMetric(ToyTFTrial):
    def validation_metrics(self) -> list[str]:
        return ["loss", "top5"]


class LossAsTrainingMetric(ToyTFTrial):
    def training_metrics(self) -> list[str]:
        return ["loss"]


class KerasOptimizer(ToyTFTrial):
    def optimizer(self) -> Any:
        return tf.keras.optimizers.SGD()


@pytest.mark.parametrize(
    ("trial_class", "message"),
    [
        (NoLoss, r"NoLoss.build_graph .*must return a tensor named 'loss'.*'xent', 'accuracy', 'error'"),
        (UnknownMetric, r"validation_metrics .*names 'top5'.*\(available: accuracy, error, loss\)"),
        (LossAsTrainingMetric, r"training_metrics .*must not include 'loss'"),
        (KerasOptimizer, r"optimizer .*must return a tf.compat.v1.train.Optimizer"),
    ],
)
def test_mistakes_in_the_trial_are_named(trial_class: type, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        controller(trial_class)


def test_is_training_switches_between_the_datasets() -> None:
    class Counting(ToyTFTrial):
        def build_graph(self, record: Any, is_training: tf.Tensor) -> dict[str, tf.Tensor]:
            outputs = super().build_graph(record, is_training)
            outputs["training"] = tf.cast(is_training, tf.float32)
            return outputs

        def validation_metrics(self) -> list[str]:
            return ["training"]

        def training_metrics(self) -> list[str]:
            return ["training"]

    seed_all(0)
    ctl = controller(Counting)
    assert ctl.train_until(2).metrics["training"] == 1.0
    assert ctl.validate() == {"training": 0.0}
