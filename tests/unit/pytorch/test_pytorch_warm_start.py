"""A warm start (searcher.source_checkpoint_uuid) takes the checkpoint's model and optimizer state and
starts at batch 0: its first training step is in the source's trained regime, not a cold start's."""

from __future__ import annotations

import copy
from pathlib import Path

import torch
from pytorch_toy_trials import ToyTrial, toy_loaders

from pedl.harness.build import seed_all
from pedl.pytorch import PyTorchTrialController


def make_controller() -> PyTorchTrialController:
    return PyTorchTrialController(ToyTrial({"lr": 0.05}), *toy_loaders())


def test_a_warm_start_takes_weights_and_optimizer_state_at_batch_0(tmp_path: Path) -> None:
    seed_all(1)
    source = make_controller()
    source.train_until(60)
    trained_loss = source.train_until(64).metrics["loss"]
    source.save(tmp_path)

    seed_all(2)
    cold_loss = make_controller().train_until(4).metrics["loss"]

    seed_all(2)
    warm = make_controller()
    warm.warm_start(tmp_path)
    assert warm.batches_trained == 0
    for ours, theirs in zip(
        warm.model.state_dict().values(), source.model.state_dict().values(), strict=True
    ):
        assert torch.equal(ours, theirs)
    saved = torch.load(tmp_path / "training_state.pt", weights_only=False)["optimizer"]["state"]
    for key, value in warm.optimizer.state_dict()["state"].items():
        assert torch.equal(value["exp_avg"], saved[key]["exp_avg"])
    warm_loss = warm.train_until(4).metrics["loss"]
    assert warm.batches_trained == 4
    assert abs(warm_loss - trained_loss) < abs(warm_loss - cold_loss)
    assert warm_loss < cold_loss


def test_a_warm_started_trial_reads_its_data_from_the_start(tmp_path: Path) -> None:
    """The source stopped mid-epoch; the warm start still begins at its own first batch."""
    seed_all(1)
    source = make_controller()
    source.train_until(13)
    source.save(tmp_path)

    seed_all(3)
    warm = make_controller()
    warm.warm_start(tmp_path)
    seed_all(3)
    fresh = make_controller()
    fresh.model.load_state_dict(copy.deepcopy(warm.model.state_dict()))
    fresh.optimizer.load_state_dict(copy.deepcopy(warm.optimizer.state_dict()))
    fresh.lr_scheduler.load_state_dict(copy.deepcopy(warm.lr_scheduler.state_dict()))
    seed_all(4)  # the same random state for both runs' shuffling and dropout
    warm_metrics = warm.train_until(8).metrics
    seed_all(4)
    assert warm_metrics == fresh.train_until(8).metrics
