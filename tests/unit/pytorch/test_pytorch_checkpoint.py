import json
from pathlib import Path
from typing import Any

import pytest
import torch
from pytorch_toy_trials import ToyTrial, toy_loaders

from pedl.harness.build import seed_all
from pedl.pytorch import PyTorchTrialController, load_trial_from_checkpoint_path

STEPS = 6


def make_controller(generator_seed: int | None, num_workers: int = 0) -> PyTorchTrialController:
    generator = None if generator_seed is None else torch.Generator().manual_seed(generator_seed)
    return PyTorchTrialController(ToyTrial({"lr": 0.05}), *toy_loaders(generator, num_workers))


def run_steps(ctl: PyTorchTrialController, steps: range, per_step: int) -> list[dict[str, Any]]:
    out = []
    for step in steps:
        out.append(ctl.train_until(step * per_step).metrics)
        out.append(ctl.validate())
    return out


# 8 batches per epoch: 7 per step stops mid-epoch, 8 per step exactly at an epoch's end.
@pytest.mark.parametrize("per_step", [7, 8])
# A loader with its own generator, and one with a worker process (skipping by loading batches).
@pytest.mark.parametrize(("generator_seed", "num_workers"), [(None, 0), (5, 0), (None, 1)])
def test_resumed_run_matches_uninterrupted_run_exactly(
    tmp_path: Path, per_step: int, generator_seed: int | None, num_workers: int
) -> None:
    seed_all(1)
    uninterrupted = run_steps(make_controller(generator_seed, num_workers), range(1, STEPS + 1), per_step)

    seed_all(1)
    first = make_controller(generator_seed, num_workers)
    interrupted = run_steps(first, range(1, 4), per_step)
    first.save(tmp_path / "ckpt")
    first.train_until(STEPS * per_step)  # the original goes on; the checkpoint must not care

    seed_all(12345)  # a restarted process is seeded again; the checkpoint's RNG states win
    resumed = make_controller(generator_seed, num_workers)
    resumed.load(tmp_path / "ckpt")
    assert resumed.batches_trained == 3 * per_step
    interrupted += run_steps(resumed, range(4, STEPS + 1), per_step)

    assert interrupted == uninterrupted


def test_checkpoint_directory_has_metadata(tmp_path: Path) -> None:
    seed_all(0)
    ctl = make_controller(None)
    ctl.train_until(3)
    ctl.save(tmp_path)
    metadata = json.loads((tmp_path / "metadata.json").read_text())
    assert metadata["framework"] == "pytorch"
    assert metadata["format_version"] == 1
    assert metadata["batches_trained"] == 3
    assert metadata["hparams"] == {"lr": 0.05}
    assert metadata["trial_class"] == "pytorch_toy_trials:ToyTrial"
    files = {p.name for p in tmp_path.iterdir()}
    assert files == {"metadata.json", "model_state_dict.pt", "training_state.pt"}


def test_training_state_mid_epoch_is_plain_data(tmp_path: Path) -> None:
    """RNG states taken at the epoch's start are saved as lists and tuples: the file loads with
    torch's safe loader, as one saved at an epoch's end does."""
    seed_all(0)
    ctl = make_controller(None)
    ctl.train_until(3)  # 8 batches per epoch: mid-epoch
    ctl.save(tmp_path / "ckpt")
    state = torch.load(tmp_path / "ckpt" / "training_state.pt", weights_only=True)
    assert state["data_position"]["offset"] == 3
    name, keys, *_ = state["data_position"]["epoch_start"]["rng"]["numpy"]
    assert name == "MT19937" and isinstance(keys, list) and len(keys) == 624


def test_load_trial_from_checkpoint_path_gives_the_trained_model(tmp_path: Path) -> None:
    seed_all(0)
    ctl = make_controller(None)
    ctl.train_until(10)
    ctl.save(tmp_path)
    x = torch.randn(3, 4)
    ctl.model.eval()
    expected = ctl.model(x)
    for trial in (
        load_trial_from_checkpoint_path(tmp_path),  # module importable: found from metadata
        load_trial_from_checkpoint_path(tmp_path, trial_class=ToyTrial),
    ):
        assert isinstance(trial, ToyTrial) and trial.hparams == {"lr": 0.05}
        trial.model.eval()
        assert torch.equal(trial.model(x), expected)


def test_load_rejects_a_directory_that_is_no_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="has no metadata.json"):
        make_controller(None).load(tmp_path)
