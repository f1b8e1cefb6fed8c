"""What a user does with a finished experiment's checkpoints, against the real three processes:
find the best one from Python, download it, load the model; list/download/delete with the CLI."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import torch

from pedl import _grpc
from pedl._metrics import from_struct
from pedl.context import pack
from pedl.experimental.client import get_experiment
from pedl.pytorch import load_trial_from_checkpoint_path
from pedl.v1 import scheduler_pb2, scheduler_pb2_grpc
from support.models import tiny_config, write_tiny_model
from support.processes import BIN, local_cluster

pytestmark = pytest.mark.integration

MODEL_NAME = "ckpt_users_tiny"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One cluster for both tests (a start costs seconds on a loaded machine); each runs and reads
    its own experiment."""
    with local_cluster(tmp_path_factory.mktemp("cluster")) as c:
        try:
            yield c
        except BaseException:
            print(c.logs())
            raise


@pytest.fixture
def finished_experiment(cluster, tmp_path) -> int:
    """A tiny experiment run to completion: validations at 20 and 40 batches, a checkpoint at 40."""
    model_dir = write_tiny_model(tmp_path / "models" / MODEL_NAME)
    packed = pack(model_dir)
    stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(cluster.master))
    response = stub.CreateExperiment(
        scheduler_pb2.CreateExperimentRequest(
            config_yaml=tiny_config(max_batches=40, validation_period=20),
            model_definition=packed.data,
            model_definition_name=packed.name,
        ),
        timeout=30,
    )
    exp_id = response.experiment.id
    assert get_experiment(exp_id, master=cluster.master).wait(timeout=180) == "COMPLETED", cluster.logs()
    return exp_id


def pedl_cli(cluster, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "pedl"), *argv],
        env={**os.environ, "PEDL_MASTER": cluster.master},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_top_checkpoint_downloads_and_loads(cluster, finished_experiment, tmp_path, monkeypatch) -> None:
    experiment = get_experiment(finished_experiment, master=cluster.master)
    assert experiment.state == "COMPLETED"
    (trial,) = experiment.trials()
    validated = [c for c in trial.checkpoints() if c.validation_metrics is not None]
    assert validated, "the trial checkpointed at no validated batch count"
    top = experiment.top_checkpoint()
    assert top.uuid == min(validated, key=lambda c: c.validation_metrics["error"]).uuid  # type: ignore[index]
    assert top.trial_id == trial.id and top.state == "COMPLETED"

    path = top.download(tmp_path / "best")
    assert Path(path, "metadata.json").is_file()
    monkeypatch.syspath_prepend(str(tmp_path / "models"))  # the checkpoint names its trial class's module
    loaded = load_trial_from_checkpoint_path(path)
    with torch.no_grad():
        out = loaded.model(torch.zeros(3, 4))
    assert tuple(out.shape) == (3, 2)


def test_cli_lists_downloads_and_deletes(cluster, finished_experiment, tmp_path) -> None:
    stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(cluster.master))
    request = scheduler_pb2.GetExperimentRequest(experiment_id=finished_experiment)
    (trial,) = stub.GetExperiment(request).trials
    detail = stub.GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))
    latest = detail.checkpoints[-1]
    errors = {v.total_batches: from_struct(v.metrics)["error"] for v in detail.validations}

    listed = pedl_cli(cluster, "checkpoint", "list", str(finished_experiment))
    assert listed.returncode == 0, listed.stderr
    header, _, *rows = listed.stdout.splitlines()
    assert header.split()[:6] == ["UUID", "TRIAL", "BATCHES", "STATE", "SIZE", "error"]
    row = next(r.split() for r in rows if r.startswith(latest.uuid))
    assert row[1:4] == [str(trial.id), str(latest.total_batches), "COMPLETED"]
    assert float(row[6]) == pytest.approx(errors[latest.total_batches], rel=1e-5)

    target = tmp_path / "cli-download"
    downloaded = pedl_cli(cluster, "checkpoint", "download", latest.uuid, "-o", str(target))
    assert downloaded.returncode == 0, downloaded.stderr
    assert (target / "metadata.json").is_file() and (target / "model_state_dict.pt").is_file()
    again = pedl_cli(cluster, "checkpoint", "download", latest.uuid, "-o", str(target))
    assert again.returncode == 2 and "is not an empty directory" in again.stderr

    deleted = pedl_cli(cluster, "checkpoint", "delete", latest.uuid)
    assert deleted.returncode == 0, deleted.stderr
    gone = pedl_cli(cluster, "checkpoint", "download", latest.uuid, "-o", str(tmp_path / "gone"))
    assert gone.returncode == 1
    assert f"checkpoint {latest.uuid} not found in the checkpoint store" in gone.stderr
    unknown = pedl_cli(cluster, "checkpoint", "download", "no-such-uuid", "-o", str(tmp_path / "x"))
    assert unknown.returncode == 1 and "checkpoint no-such-uuid not found" in unknown.stderr
