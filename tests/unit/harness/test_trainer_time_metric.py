"""`searcher.time_metric: batches` with Determined's PyTorch Trainer, as Determined 0.38's docs and
its e2e `mnist_pytorch/adaptive_short.yaml` write it: the Trainer reports `batches` and `epochs`
with its metrics (unless the trial reports its own), so ASHA measures the trial by them. A real
script under the harness's Core API server; no agent."""

from __future__ import annotations

import sys
from pathlib import Path

from core_api_rig import start_script

from pedl._metrics import from_struct
from pedl.config import parse_experiment_config
from pedl.harness.core_api_server import CoreApiServer
from pedl.harness.core_api_trial import CoreApiTrial, ScriptSettings
from pedl.v1 import common_pb2

KIND = common_pb2.WorkloadKind
REPORT = common_pb2.ScriptReportKind

# Determined's e2e fixture config, as published (only the hyperparameters shortened).
ADAPTIVE_SHORT = """
name: mnist_pytorch_adaptive
entrypoint: python3 train.py --batches 400
hyperparameters:
  learning_rate: {type: double, minval: .0001, maxval: 1.0}
searcher:
  name: adaptive_asha
  metric: validation_loss
  smaller_is_better: true
  time_metric: batches
  max_time: 400
  max_trials: 5
  max_rungs: 2
  mode: aggressive
  divisor: 2
max_restarts: 0
"""

# A tutorial-shaped Trainer script: 8 records at batch size 2 are 4 batches an epoch.
TRAIN = """
import sys
import torch
from torch import nn
from torch.utils.data import TensorDataset
from determined import pytorch

OWN = "--own-batches" in sys.argv


class Trial(pytorch.PyTorchTrial):
    def __init__(self, context):
        self.context = context
        self.model = context.wrap_model(nn.Linear(2, 2))
        self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.1))

    def _data(self):
        x = torch.linspace(-1, 1, 16).reshape(8, 2)
        return pytorch.DataLoader(TensorDataset(x, (x[:, 0] > x[:, 1]).long()), batch_size=2)

    def build_training_data_loader(self):
        return self._data()

    def build_validation_data_loader(self):
        return self._data()

    def train_batch(self, batch, epoch_idx, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.opt)
        return {"loss": loss}

    def evaluate_batch(self, batch):
        x, y = batch
        out = {"validation_loss": nn.functional.cross_entropy(self.model(x), y)}
        if OWN:
            out["batches"] = torch.tensor(1000.0)
        return out


with pytorch.init() as context:
    trainer = pytorch.Trainer(Trial(context), context)
    trainer.fit(max_length=pytorch.Batch(10**6), validation_period=pytorch.Batch(4))
"""


def start(tmp_path: Path, time_metric: str | None, args: list[str]) -> tuple[CoreApiTrial, CoreApiServer]:
    model = tmp_path / "model"
    model.mkdir()
    (model / "train.py").write_text(TRAIN)
    settings = ScriptSettings(
        command=[sys.executable, "train.py", *args],
        model_dir=model,
        chief=True,
        searcher_metric="validation_loss",
        time_metric=time_metric,
    )
    return start_script(tmp_path, settings)


def run_step(trial: CoreApiTrial, total: int) -> common_pb2.WorkloadResult:
    work = common_pb2.Workload(kind=KIND.WORKLOAD_KIND_RUN_STEP, trial_id=1, run_id=1, total_batches=total)
    return trial.run_workload(work)


def run_steps(
    trial: CoreApiTrial, total: int
) -> tuple[common_pb2.WorkloadResult, list[common_pb2.ScriptReport]]:
    """Steps to `total` batches (a checkpoint, which checkpoint_policy='best' takes after a better
    validation, ends a step early) and what the script reported in them."""
    seen: list[common_pb2.ScriptReport] = []
    while True:
        step = run_step(trial, total)
        seen.extend(step.script_reports)
        if step.script_progress >= total or step.script_finished:
            return step, seen


def reports(seen: list[common_pb2.ScriptReport], kind: int) -> list[dict]:
    return [from_struct(r.metrics) for r in seen if r.kind == kind]


def test_determineds_adaptive_config_measures_trials_in_batches() -> None:
    config = parse_experiment_config(ADAPTIVE_SHORT)
    assert config.searcher.time_metric == "batches"
    assert config.entrypoint_spec is not None and config.entrypoint_spec.kind == "command"


def test_the_trainer_reports_batches_and_epochs_so_asha_measures_the_trial_by_them(tmp_path) -> None:
    time_metric = parse_experiment_config(ADAPTIVE_SHORT).searcher.time_metric
    trial, server = start(tmp_path, time_metric, ["--batches", "400"])
    try:
        step, seen = run_steps(trial, 8)  # ends at the validation whose `batches` reaches 8
        assert step.script_progress == 8 and not step.script_finished
        validations = reports(seen, REPORT.SCRIPT_REPORT_KIND_VALIDATION)
        assert [(v["batches"], v["epochs"]) for v in validations[:2]] == [(4, 1), (8, 2)]
        assert "validation_loss" in validations[0]
        training = reports(seen, REPORT.SCRIPT_REPORT_KIND_TRAINING)
        assert (training[0]["batches"], training[0]["epochs"]) == (4, 1) and "loss" in training[0]
    finally:
        trial.kill()
        server.close()


def test_a_trials_own_batches_metric_is_kept(tmp_path) -> None:
    trial, server = start(tmp_path, "batches", ["--own-batches"])
    try:
        step = run_step(trial, 4)  # the trial's own `batches` (1000) is its progress
        first = reports(list(step.script_reports), REPORT.SCRIPT_REPORT_KIND_VALIDATION)[0]
        assert first["batches"] == 1000.0 and first["epochs"] == 1
    finally:
        trial.kill()
        server.close()
