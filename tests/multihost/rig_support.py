"""What the multi-host rig's tests share: a small PyTorch trial that can train slowly (so a host can
be lost while it runs) and whose every rank prints a digest of its weights at each validation (so a
test can tell that ranks on different machines hold the same trained weights), its config, and
checks read from the scheduler."""

from __future__ import annotations

import re
import textwrap
import time
from pathlib import Path

from pedl.v1 import common_pb2, scheduler_pb2
from support.netns import Rig
from tests.integration.test_cluster import logs, stub, submit, wait

RIG_TRIAL = """
import hashlib
import time

import numpy as np
import torch
from torch import nn

import pedl
from pedl.pytorch import DataLoader, PyTorchTrial


class RigTrial(PyTorchTrial):
    def build_model(self, hparams):
        self.model = nn.Linear(4, 2)
        return self.model

    def optimizer(self, model):
        return torch.optim.SGD(model.parameters(), lr=pedl.get_hyperparameter("learning_rate"))

    def losses(self, predictions, labels):
        if predictions.requires_grad:
            time.sleep(pedl.get_hyperparameter("seconds_per_batch"))
        return nn.functional.cross_entropy(predictions, labels)

    def batch_size(self):
        return 8

    def validation_metrics(self, predictions, labels, losses):
        weights = torch.cat([p.detach().flatten() for p in self.model.parameters()]).double()
        digest = hashlib.sha256(np.round(weights.numpy(), 6).tobytes()).hexdigest()[:16]
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        print(f"rank {rank} weights digest {digest}", flush=True)
        return {"validation_loss": losses, "error": (predictions.argmax(1) != labels).float().mean()}


def make_data_loaders(experiment_config, hparams):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    train = torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    val = torch.utils.data.TensorDataset(torch.from_numpy(x[:64]), torch.from_numpy(y[:64]))
    return DataLoader(train, batch_size=8, shuffle=True), DataLoader(val, batch_size=16)
"""


def write_rig_model(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "__init__.py").write_text(RIG_TRIAL)
    return directory


def rig_config(
    max_batches: int = 40,
    slots: int = 1,
    seconds_per_batch: float = 0.0,
    searcher: str = "single",
    extra: str = "",
) -> str:
    """Steps of 10 batches, a validation every 20; `extra` is appended YAML."""
    trials = "  max_trials: 4\n" if searcher == "random" else ""
    rate = "{type: double, minval: 0.05, maxval: 0.2}" if searcher == "random" else "0.1"
    return (
        "description: rig\n"
        "hyperparameters:\n"
        f"  learning_rate: {rate}\n"
        f"  seconds_per_batch: {seconds_per_batch}\n"
        "searcher:\n"
        f"  name: {searcher}\n{trials}"
        "  metric: error\n"
        "  smaller_is_better: true\n"
        f"  max_length:\n    batches: {max_batches}\n"
        "batches_per_step: 10\n"
        "min_validation_period:\n  batches: 20\n"
        f"resources:\n  slots_per_trial: {slots}\n"
    ) + textwrap.dedent(extra)


def agents_of(text: str) -> set[str]:
    """The agents the scheduler's "started on" lines name."""
    return set(re.findall(r"agent (host\d+) \(slots", text))


def digests(text: str) -> dict[int, set[str]]:
    """Each rank's weight digests, as the trial's ranks printed them at each validation."""
    out: dict[int, set[str]] = {}
    for rank, digest in re.findall(r"rank (\d+) weights digest (\w+)", text):
        out.setdefault(int(rank), set()).add(digest)
    return out


def steps_of(rig: Rig, trial_id: int) -> list[int]:
    detail = stub(rig).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial_id))
    return [s.total_batches for s in detail.steps]


def lose_host_and_resume(rig: Rig, model: Path) -> None:
    """Every process on the host running a trial is SIGKILLed once it has a checkpoint; the trial
    resumes on the other host from a checkpoint, and every step is stored once."""
    every_20 = "min_checkpoint_period:\n  batches: 20\n"
    exp_id = submit(rig, model, rig_config(max_batches=60, seconds_per_batch=0.15, extra=every_20))
    deadline = time.monotonic() + 180
    while True:
        (trial,) = stub(rig).GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)).trials
        if stub(rig).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id)).checkpoints:
            break
        assert time.monotonic() < deadline, "no checkpoint was stored"
        time.sleep(0.2)
    (first,) = agents_of(logs(rig, trial.id))
    rig.hosts[first].kill_everything()

    result = wait(rig, exp_id, timeout=240)
    text = logs(rig, trial.id)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, text
    assert steps_of(rig, trial.id) == [10, 20, 30, 40, 50, 60]
    assert agents_of(text) == {"host1", "host2"}, text
    # "restarting trial N from checkpoint U (batch B)" or, for a lost agent, "trial N's run failed ...;
    # restarting from checkpoint U (batch B) in S s".
    resumed = re.search(
        rf"trial {trial.id}\b.*?restarting (?:trial {trial.id} )?from checkpoint (\S+) \(batch (\d+)\)", text
    )
    assert resumed is not None, text
    # A checkpoint the lost run stored (every 20 batches); garbage collection may since have deleted
    # it (the default keeps the latest), and listings show stored checkpoints only.
    assert int(resumed[2]) in (20, 40), resumed[0]
