"""Keras trials on 2 slots: 2 harness processes under MultiWorkerMirroredStrategy, on one agent and
as a gang over two agents; a KerasTrial and a Simple Model Definition script."""

from __future__ import annotations

import math
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from test_cluster import logs, stub, submit, wait
from test_faults import trial_history

from pedl.checkpoints import CheckpointStoreClient
from pedl.v1 import common_pb2, scheduler_pb2
from support.processes import local_cluster

pytestmark = pytest.mark.integration

SCRIPT_EXAMPLE = Path(__file__).parents[2] / "examples" / "digits_keras_script"

# 64 training samples in 8 batches of 8 (4 per worker and epoch), 40 validation samples in 5 batches
# (3 on worker 0, 2 on worker 1). Every training batch read is logged to <log_dir>/rank<RANK>.log
# as "epoch index"; with fail_on_epoch, rank 1 raises once when it first reads that epoch.
KERAS_TRIAL = """
import os
from pathlib import Path

import keras
import numpy as np

from pedl.keras import KerasTrial


def samples():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(104, 4)).astype("float32")
    return x, (x[:, 0] + x[:, 1] > 0).astype("int64")


class LoggedBatches(keras.utils.PyDataset):
    def __init__(self, log_dir, fail_on_epoch):
        super().__init__()
        x, y = samples()
        self.x, self.y = x[:64], y[:64]
        self.rng = np.random.default_rng(1)
        self.order = np.arange(64)
        self.epoch = 0
        self.log_dir = Path(log_dir)
        self.fail_on_epoch = fail_on_epoch

    @property
    def num_batches(self):
        return 8

    def __getitem__(self, index):
        rank = os.environ["RANK"]
        marker = self.log_dir / "failed"
        if rank == "1" and self.epoch == self.fail_on_epoch and not marker.exists():
            marker.touch()
            raise RuntimeError("injected failure on rank 1")
        with (self.log_dir / f"rank{rank}.log").open("a") as log:
            log.write(f"{self.epoch} {index}\\n")
        rows = self.order[index * 8 : (index + 1) * 8]
        return self.x[rows], self.y[rows]

    def on_epoch_end(self):
        self.epoch += 1
        self.order = self.rng.permutation(64)


def make_data_loaders(experiment_config, hparams):
    data = experiment_config["data"]
    x, y = samples()
    return LoggedBatches(data["log_dir"], data.get("fail_on_epoch")), (x[64:], y[64:])


class ToyKerasTrial(KerasTrial):
    def build_model(self, hparams):
        model = keras.Sequential(
            [
                keras.Input((4,)),
                keras.layers.Dense(16, activation="relu"),
                keras.layers.Dropout(0.1),
                keras.layers.Dense(2),
            ]
        )
        model.compile(
            optimizer=keras.optimizers.Adam(0.02),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
        return model

    def batch_size(self):
        return 8
"""


def keras_config(log_dir: Path, fail_on_epoch: int | None = None, slots: int = 2) -> str:
    data = {"log_dir": str(log_dir)}
    if fail_on_epoch is not None:
        data["fail_on_epoch"] = fail_on_epoch
    log_dir.mkdir(parents=True, exist_ok=True)
    log_dir.chmod(0o777)  # trials run as an unprivileged user (--trial-user) and write here
    return textwrap.dedent(
        f"""
        description: keras on {slots} slots
        data: {yaml.safe_dump(data, default_flow_style=True).strip()}
        hyperparameters: {{}}
        searcher:
          name: single
          metric: accuracy
          smaller_is_better: false
          max_length: {{batches: 40}}
        batches_per_step: 10
        min_validation_period: {{batches: 20}}
        min_checkpoint_period: {{batches: 20}}
        reproducibility: {{experiment_seed: 3}}
        max_restarts: 1
        resources: {{slots_per_trial: {slots}}}
        """
    )


def write_keras_model(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "__init__.py").write_text(KERAS_TRIAL)
    return directory


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Path:
    """Where trials write their batch logs: the agents share it with their sandboxed trials."""
    shared = tmp_path_factory.mktemp("shared")
    shared.chmod(0o777)  # a root agent runs trials as an unprivileged user (--trial-user)
    return shared


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, shared):
    root = tmp_path_factory.mktemp("keras") / "cluster"
    with local_cluster(
        root, agents=1, slots=2, agent_args=["--bind", str(shared)], preload_tensorflow=True
    ) as c:
        try:
            yield c
        except BaseException:
            print(c.logs())
            raise


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return write_keras_model(tmp_path_factory.mktemp("model") / "keras_toy")


@pytest.fixture(scope="module")
def reference(cluster, model_dir, shared) -> tuple[int, Path]:
    """An uninterrupted 2-slot run: (experiment id, its batch logs)."""
    log_dir = shared / "reference"
    exp_id = submit(cluster, model_dir, keras_config(log_dir))
    result = wait(cluster, exp_id, timeout=180)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
    return exp_id, log_dir


def batches_read(log_dir: Path, rank: int) -> list[tuple[int, int]]:
    lines = (log_dir / f"rank{rank}.log").read_text().split()
    return [(int(e), int(i)) for e, i in zip(lines[::2], lines[1::2], strict=True)]


def test_both_ranks_train_on_disjoint_shards(cluster, reference) -> None:
    exp_id, log_dir = reference
    steps, validations = trial_history(cluster, exp_id)
    assert [b for b, _ in steps] == [10, 20, 30, 40]
    assert all(set(m) == {"loss", "accuracy"} for _, m in steps)
    assert [b for b, _ in validations] == [20, 40]
    (trial,) = stub(cluster).GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)).trials
    text = logs(cluster, trial.id)
    assert "[rank 0] " in text and "[rank 1] " in text
    # 40 batches per worker, 4 per epoch: 10 epochs, each split into two disjoint halves.
    read = {rank: batches_read(log_dir, rank) for rank in (0, 1)}
    for rank in (0, 1):
        assert len(set(read[rank])) == 40, read[rank]
    for epoch in range(10):
        own = [{i for e, i in read[rank] if e == epoch} for rank in (0, 1)]
        assert len(own[0]) == len(own[1]) == 4 and own[0].isdisjoint(own[1]), (epoch, own)


def test_validation_metrics_cover_every_ranks_shard(cluster, reference, model_dir, tmp_path) -> None:
    import keras

    from pedl.model_def import load_model_definition

    exp_id, _ = reference
    steps, validations = trial_history(cluster, exp_id)
    (trial,) = stub(cluster).GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)).trials
    detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))
    assert detail.checkpoints[-1].total_batches == validations[-1][0] == 40
    with CheckpointStoreClient(cluster.store.address) as store:
        store.download(detail.checkpoints[-1].uuid, tmp_path)
    # One process evaluating the checkpoint on the whole validation set gets what the 2 ranks
    # reported together (worker 0 holds 3 of its 5 batches, worker 1 the other 2).
    module = load_model_definition(model_dir)
    model = module.trial_class({}).build_model({})
    model.optimizer.build(model.trainable_variables)  # as saved: the weights file holds its state too
    model.load_weights(tmp_path / "model.weights.h5")
    x, y = sys.modules[module.trial_class.__module__].samples()
    expected = model.evaluate(x[64:], y[64:], batch_size=8, verbose=0, return_dict=True)
    reported = validations[-1][1]
    assert {"val_loss", "val_accuracy"} <= set(reported)
    for name in ("loss", "accuracy"):
        assert math.isclose(reported["val_" + name], expected[name], rel_tol=1e-5), (name, reported, expected)
    keras.backend.clear_session()


def test_a_failed_rank_restarts_the_trial_from_its_checkpoint_exactly(
    cluster, reference, model_dir, shared, tmp_path
) -> None:
    # Epoch 6 starts at each worker's batch 25: after the checkpoint at 20.
    exp_id = submit(cluster, model_dir, keras_config(shared / tmp_path.name, fail_on_epoch=6))
    result = wait(cluster, exp_id, timeout=180)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
    (trial,) = result.trials
    assert trial.restarts == 1
    assert "injected failure on rank 1" in logs(cluster, trial.id)
    assert trial_history(cluster, exp_id) == trial_history(cluster, reference[0])


def test_the_keras_script_example_trains_on_two_slots(cluster) -> None:
    raw = yaml.safe_load((SCRIPT_EXAMPLE / "const.yaml").read_text())
    raw["searcher"].pop("max_steps")
    raw["searcher"]["max_length"] = {"batches": 40}
    raw.update(
        batches_per_step=10,
        min_validation_period={"batches": 40},
        min_checkpoint_period={"batches": 20},
        resources={"slots_per_trial": 2},
        # Every checkpoint taken stays listed: garbage collection keeps them.
        checkpoint_storage={**raw.get("checkpoint_storage", {}), "save_trial_latest": 10},
    )
    exp_id = submit(cluster, SCRIPT_EXAMPLE, yaml.safe_dump(raw))
    result = wait(cluster, exp_id, timeout=180)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
    steps, validations = trial_history(cluster, exp_id)
    assert [b for b, _ in steps] == [10, 20, 30, 40]
    assert [b for b, _ in validations] == [40] and validations[0][1]["val_accuracy"] > 0.7
    (trial,) = result.trials
    detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))
    assert [c.total_batches for c in detail.checkpoints] == [20, 40] and trial.restarts == 0
    text = logs(cluster, trial.id)
    assert "[rank 1] " in text and "not reached under PEDL" not in text


def test_a_two_slot_keras_trial_runs_as_a_gang_over_two_one_slot_agents(tmp_path) -> None:
    log_dir = tmp_path / "logs"
    log_dir.mkdir(mode=0o777)
    log_dir.chmod(0o777)  # trials run as an unprivileged user (--trial-user) and write here
    with local_cluster(
        tmp_path / "cluster",
        agents=2,
        slots=1,
        agent_args=["--bind", str(log_dir)],
        preload_tensorflow=True,
    ) as cluster:
        exp_id = submit(cluster, write_keras_model(tmp_path / "keras_gang"), keras_config(log_dir))
        result = wait(cluster, exp_id, timeout=180)
        assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
        (trial,) = result.trials
        text = logs(cluster, trial.id)
        assert "agent agent0 (slots cpu0); agent agent1 (slots cpu0)" in text or (
            "agent agent1 (slots cpu0); agent agent0 (slots cpu0)" in text
        ), text
        steps, _ = trial_history(cluster, exp_id)
        assert [b for b, _ in steps] == [10, 20, 30, 40]
        for rank in (0, 1):
            assert len(batches_read(log_dir, rank)) >= 40
