"""The KerasTrial example through the same harness code: local mode and `start_trial`."""

from __future__ import annotations

from pathlib import Path

import yaml

from pedl.config import parse_experiment_config, test_mode
from pedl.experimental import run_local
from pedl.harness.build import start_trial
from pedl.model_def import load_model_definition

EXAMPLE = Path(__file__).parents[3] / "examples" / "digits_keras"


def config(max_steps: int = 4) -> dict:
    raw = yaml.safe_load((EXAMPLE / "const.yaml").read_text())
    raw["searcher"]["max_steps"] = max_steps
    raw["batches_per_step"] = 20
    return raw


def test_local_mode_trains_validates_and_checkpoints_the_example() -> None:
    result = run_local(parse_experiment_config(config()), load_model_definition(EXAMPLE))
    assert result.state == "COMPLETED"
    (trial,) = result.trials
    assert [b for b, _ in trial.steps] == [20, 40, 60, 80]
    assert set(trial.steps[0][1]) == {"loss", "accuracy"}
    assert [b for b, _ in trial.validations] == [40, 80]
    assert trial.best_validation is not None and trial.best_validation > 0.7
    assert trial.checkpoints


def test_test_mode_restores_a_checkpoint_with_equal_validation() -> None:
    events: list = []
    test_config = test_mode.test_mode_config(parse_experiment_config(config()))
    result = run_local(
        test_config, load_model_definition(EXAMPLE), verify_restore=True, on_event=events.append
    )
    assert result.state == "COMPLETED"
    assert "restored" in [e[0] for e in events]


def test_start_trial_restores_what_a_controller_saved(tmp_path: Path) -> None:
    hparams = {"learning_rate": 0.003, "hidden_size": 64, "dropout": 0.1, "batch_size": 32}
    first = start_trial(EXAMPLE, config(), hparams, seed=5)
    first.train_until(30)
    first.save(tmp_path)
    restored = start_trial(EXAMPLE, config(), hparams, seed=5, checkpoint_dir=tmp_path)
    assert restored.batches_trained == 30
    assert restored.validate() == first.validate()


def test_the_two_slot_example_config_asks_for_two_slots_and_parses() -> None:
    raw = yaml.safe_load((EXAMPLE / "distributed.yaml").read_text())
    parsed = parse_experiment_config(raw)
    assert parsed.slots_per_trial == 2
    assert raw["hyperparameters"] == yaml.safe_load((EXAMPLE / "const.yaml").read_text())["hyperparameters"]


def test_start_trial_warm_starts_from_weights_at_batch_0(tmp_path: Path) -> None:
    hparams = {"learning_rate": 0.003, "hidden_size": 64, "dropout": 0.1, "batch_size": 32}
    source = start_trial(EXAMPLE, config(), hparams, seed=5)
    source.train_until(60)
    source.save(tmp_path)
    cold = start_trial(EXAMPLE, config(), hparams, seed=6)
    warm = start_trial(EXAMPLE, config(), hparams, seed=6, checkpoint_dir=tmp_path, warm_start=True)
    assert warm.batches_trained == 0
    assert warm.validate() == source.validate() != cold.validate()
    assert warm.train_until(5).metrics["loss"] < cold.train_until(5).metrics["loss"]
    assert warm.batches_trained == 5
