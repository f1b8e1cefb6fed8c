"""KerasTrialController: data sources, metrics, errors and exact resume."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import keras
import pytest
from keras_toy_trials import ToyKerasTrial, toy_arrays, toy_data

from pedl.harness.build import seed_all
from pedl.keras import KerasTrialController

KINDS = ["dataset", "arrays", "pydataset", "generator", "started"]


def controller(
    kind: str = "dataset", trial_class: type = ToyKerasTrial, loaders: Any = None
) -> KerasTrialController:
    return KerasTrialController.from_trial_class(trial_class, {"lr": 0.05}, loaders or toy_data(kind))


@pytest.mark.parametrize("kind", KINDS)
def test_trains_across_epochs_and_validates_under_compiled_names(kind: str) -> None:
    seed_all(0)
    ctl = controller(kind)
    first = ctl.train_until(4)
    assert first.num_batches == 4 and first.num_inputs == 32
    assert set(first.metrics) == {"loss", "accuracy"}
    later = ctl.train_until(40)  # 8 batches per epoch
    assert ctl.batches_trained == 40 and later.metrics["loss"] < first.metrics["loss"]
    metrics = ctl.validate()
    # Validation metrics carry Keras's (and Determined's) `val_` prefix; training metrics do not.
    assert set(metrics) == {"val_loss", "val_accuracy"}
    assert metrics["val_accuracy"] > 0.7


def run_steps(ctl: KerasTrialController, steps: range, per_step: int) -> list[dict[str, Any]]:
    out = []
    for step in steps:
        out.append(ctl.train_until(step * per_step).metrics)
        out.append(ctl.validate())
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_resumed_run_matches_uninterrupted_run_exactly(tmp_path: Path, kind: str) -> None:
    per_step = 5  # 8 batches per epoch: checkpoints fall mid-epoch
    seed_all(3)
    uninterrupted = run_steps(controller(kind), range(1, 6), per_step)

    seed_all(3)
    first = controller(kind)
    interrupted = run_steps(first, range(1, 4), per_step)
    first.save(tmp_path / "ckpt")
    first.train_until(5 * per_step)

    seed_all(3)
    resumed = controller(kind)
    resumed.load(tmp_path / "ckpt")
    assert resumed.batches_trained == 3 * per_step
    interrupted += run_steps(resumed, range(4, 6), per_step)
    assert interrupted == uninterrupted


def test_checkpoint_weights_load_into_a_plain_model(tmp_path: Path) -> None:
    seed_all(0)
    ctl = controller()
    ctl.train_until(3)
    ctl.save(tmp_path)
    model = ToyKerasTrial({}).build_model({})
    model.load_weights(tmp_path / "model.weights.h5")
    x, _ = toy_arrays()
    assert (model.predict(x, verbose=0) == ctl.model.predict(x, verbose=0)).all()


class Uncompiled(ToyKerasTrial):
    def build_model(self, hparams: dict[str, Any]) -> keras.Model:
        return keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])


class NoBatchSize(ToyKerasTrial):
    def batch_size(self) -> None:
        return None


def test_mistakes_are_named() -> None:
    with pytest.raises(
        ValueError,
        match=r"Uncompiled.build_model .*returned an uncompiled model and Uncompiled defines no optimizer",
    ):
        controller(trial_class=Uncompiled)
    with pytest.raises(
        TypeError, match=r"the training data are arrays, so NoBatchSize.batch_size .*must return"
    ):
        controller("arrays", trial_class=NoBatchSize)
    x, y = toy_arrays()
    started = (pair for pair in [(x, y)])
    with pytest.raises(TypeError, match=r"validation data is an already started generator"):
        controller(loaders=((x, y), started))
    with pytest.raises(TypeError, match=r"validation data is a builtins.str"):
        controller(loaders=((x, y), "val"))
