"""On a real cluster the trial runs on the config the scheduler parsed, normalised and stored, carried
whole to the harness as StartTrial.config_json. The scheduler here runs with two of its defaults
changed (a sitecustomize on its PYTHONPATH only: the agent and the harness keep pedl's own), so the
trial can only see them if it received the scheduler's object. A config_json that does not parse
ends the trial at its start in one line naming the field; an agent of the release before
config_json is refused at registration with a line saying what to upgrade."""

from __future__ import annotations

import textwrap
from pathlib import Path

import grpc
import pytest
from test_cluster import stub, submit, wait

from pedl import _grpc
from pedl._metrics import from_struct
from pedl.v1 import agent_pb2, agent_pb2_grpc, common_pb2, scheduler_pb2
from support.processes import local_cluster

pytestmark = pytest.mark.integration

SCHEDULER_SITECUSTOMIZE = '''
"""The scheduler's own defaults, changed for this test; and a config_json corrupted on its way out."""
import json

import pedl.config.experiment as experiment
from pedl.config import carried

experiment.DEFAULT_MAX_RESTARTS = 2
experiment.DEFAULT_BATCHES_PER_STEP = 4
_to_json = carried.to_json


def _to_json_corrupting(config):
    text = _to_json(config)
    if config.description == "corrupted on its way":
        document = json.loads(text)
        text = json.dumps({**document, "config": {**document["config"], "max_restarts": "five"}})
    return text


carried.to_json = _to_json_corrupting
'''

# Determined's PyTorchTrial API: the trial reports what its context says the config is.
SEES_CONFIG = """
import torch
from torch import nn
from torch.utils.data import TensorDataset

import pedl.util
from determined.pytorch import DataLoader, PyTorchTrial, PyTorchTrialContext


def dataset():
    x = torch.linspace(-1, 1, 64).reshape(32, 2)
    return TensorDataset(x, (x[:, 0] > x[:, 1]).long())


class SeesConfig(PyTorchTrial):
    def __init__(self, context: PyTorchTrialContext) -> None:
        self.context = context
        self.model = context.wrap_model(nn.Linear(2, 2))
        self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.1))

    def build_training_data_loader(self):
        return DataLoader(dataset(), batch_size=self.context.get_per_slot_batch_size())

    def build_validation_data_loader(self):
        return DataLoader(dataset(), batch_size=self.context.get_per_slot_batch_size())

    def train_batch(self, batch, epoch_idx, batch_idx):
        data, labels = batch
        loss = nn.functional.cross_entropy(self.model(data), labels)
        self.context.backward(loss)
        self.context.step_optimizer(self.opt)
        return {"loss": loss}

    def evaluate_batch(self, batch):
        config = self.context.get_experiment_config()
        data, labels = batch
        return {
            "validation_loss": nn.functional.cross_entropy(self.model(data), labels),
            "seen_max_restarts": config["max_restarts"],
            "seen_batches_per_step": config["batches_per_step"],
            "seen_lr_is_const": float(config["hyperparameters"]["lr"] == {"type": "const", "val": 0.1}),
            "pedl_util_agrees": float(pedl.util.get_experiment_config() == config),
        }
"""

CONFIG = """\
description: {description}
hyperparameters: {{global_batch_size: 8, lr: 0.1}}
searcher: {{name: single, metric: validation_loss, max_length: {{batches: 8}}}}
min_validation_period: {{batches: 8}}
entrypoint: model_def:SeesConfig
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One cluster for this module's tests (a start costs seconds on a loaded machine): each reads
    only its own experiment, and the scheduler's hook corrupts only the one that asks for it."""
    root = tmp_path_factory.mktemp("config-carried")
    site = root / "scheduler-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(SCHEDULER_SITECUSTOMIZE))
    with local_cluster(root / "cluster", scheduler_env={"PYTHONPATH": str(site)}) as c:
        try:
            yield c
        except BaseException:
            print(c.logs())
            raise


def model(tmp_path: Path) -> Path:
    directory = tmp_path / "sees_config"
    directory.mkdir()
    (directory / "model_def.py").write_text(SEES_CONFIG)
    return directory


def test_the_trial_sees_the_schedulers_normalised_config(cluster, tmp_path) -> None:
    result = wait(cluster, submit(cluster, model(tmp_path), CONFIG.format(description="plain")), 240)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
    (trial,) = result.trials
    detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))
    assert [s.total_batches for s in detail.steps] == [4, 8]  # the scheduler's batches_per_step
    seen = from_struct(detail.validations[-1].metrics)
    assert seen["seen_max_restarts"] == 2 and seen["seen_batches_per_step"] == 4
    assert seen["seen_lr_is_const"] == 1.0 and seen["pedl_util_agrees"] == 1.0
    # describe shows the same object the trial saw.
    assert "max_restarts: 2" in result.experiment.config_yaml
    assert "batches_per_step: 4" in result.experiment.config_yaml


def test_a_config_json_that_does_not_parse_ends_the_trial_at_its_start(cluster, tmp_path) -> None:
    config = CONFIG.format(description="corrupted on its way")
    result = wait(cluster, submit(cluster, model(tmp_path), config), 240)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_ERROR, cluster.logs()
    (trial,) = result.trials
    assert trial.restarts == 0 and trial.total_batches == 0  # no restart can help: it ends at once
    assert (
        "the experiment config this trial was started with is invalid: "
        "StartTrial.config_json: max_restarts: expected an integer, got 'five'"
    ) in trial.error
    assert "Traceback" not in trial.error


def test_an_agent_of_the_release_before_config_json_is_refused_at_registration(cluster) -> None:
    secret = cluster.secret_file.read_text().strip()
    link = agent_pb2_grpc.AgentLinkServiceStub(_grpc.channel(cluster.master, token=secret))
    # What such an agent sends: every field it knows, and no `protocol`.
    old = agent_pb2.RegisterAgent(
        agent_id="old-agent",
        hostname="node9",
        slots=[common_pb2.Slot(id="cpu0", type="cpu")],
        version="0.9.0",
        accepts_batches=True,
    )
    with pytest.raises(grpc.RpcError) as info:
        list(link.Connect(iter([agent_pb2.ConnectRequest(register=old)]), timeout=30))
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert info.value.details() == (
        "agent old-agent (pedl 0.9.0) speaks agent-link protocol 0, older than the 3 this scheduler needs "
        "(StartTrial.config_json, the versioned config document): upgrade pedl-agent on node9 to the "
        "scheduler's release"
    )
    agents = stub(cluster).ListAgents(scheduler_pb2.ListAgentsRequest(), timeout=30).agents
    assert "old-agent" not in {a.id for a in agents}
    assert "agent refused" in cluster.scheduler.log()
