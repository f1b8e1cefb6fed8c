"""Determined 0.38's `Trainer.fit` arguments beyond the lengths: `reporting_period`,
`checkpoint_policy`, `step_zero_validation`, `test_mode` and `profiling_enabled`. A real Trainer
script off a cluster (its printed metrics and checkpoint directories), the same script under the
harness's Core API server (what a trial reports and stores), and the bad values, each refused in
one line naming its argument."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from core_api_rig import StoredCheckpoints, start_script

from pedl._metrics import from_struct
from pedl.harness.compat import compat_path, ensure_determined_importable
from pedl.harness.core_api_trial import ScriptSettings
from pedl.v1 import common_pb2

ensure_determined_importable()

from determined.pytorch import Batch, Epoch  # noqa: E402
from determined.pytorch._fit import CheckpointPolicy, fit_options  # noqa: E402

REPORT = common_pb2.ScriptReportKind

# 8 records at batch size 2: 4 batches an epoch. Validation losses follow LOSSES, one per validation.
TRIAL = """
import json
import os
import sys
import torch
from torch import nn
from torch.utils.data import TensorDataset
from determined import pytorch

LOSSES = [3.0, 1.0, 2.0, 0.5]


class Trial(pytorch.PyTorchTrial):
    def __init__(self, context):
        self.context = context
        self.model = context.wrap_model(nn.Linear(2, 2))
        self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.1))
        self.validations = 0

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

    def evaluate_batch(self, batch, batch_idx):
        if batch_idx == 0:
            self.validations += 1
        return {"validation_loss": torch.tensor(LOSSES[(self.validations - 1) % len(LOSSES)])}


def fit(**kwargs):
    with pytorch.init(hparams={}) as context:
        return pytorch.Trainer(Trial(context), context).fit(**kwargs)
"""

# Off a cluster: each scenario's fit prints its metrics as JSON lines after a marker line.
LOCAL = """
from trial import *

B, E = pytorch.Batch, pytorch.Epoch
SCENARIOS = {
    "report_every_2": dict(max_length=B(8), validation_period=B(4), reporting_period=B(2),
                           checkpoint_policy="none"),
    "report_every_epoch": dict(max_length=B(8), reporting_period=E(1)),
    "all": dict(max_length=B(8), validation_period=B(4), checkpoint_policy="all"),
    "best": dict(max_length=B(12), validation_period=B(4)),
    "step_zero": dict(max_length=B(4), step_zero_validation=True, checkpoint_policy="none"),
    "test_mode": dict(max_length=B(100), validation_period=B(4), test_mode=True),
    "profiling_off": dict(max_length=B(2), profiling_enabled=False),
}
BAD = {
    "checkpoint_policy": dict(max_length=B(4), checkpoint_policy="bset"),
    "reporting_period": dict(max_length=B(4), reporting_period=5),
    "reporting_period_zero": dict(max_length=B(4), reporting_period=B(0)),
    "profiling_enabled": dict(max_length=B(4), profiling_enabled=True),
    "step_zero_validation": dict(max_length=B(4), step_zero_validation="yes"),
    "test_mode": dict(max_length=B(4), test_mode=1),
}
for name, kwargs in SCENARIOS.items():
    print(json.dumps({"scenario": name}), flush=True)
    fit(checkpoint_dir=f"ck-{name}", **kwargs)
    folder = f"ck-{name}"
    print(json.dumps({"checkpoints": sorted(os.listdir(folder)) if os.path.isdir(folder) else []}))
for name, kwargs in BAD.items():
    try:
        fit(checkpoint_dir=f"bad-{name}", **kwargs)
        print(json.dumps({"refused": name, "error": None}))
    except (TypeError, ValueError) as e:
        print(json.dumps({"refused": name, "error": f"{type(e).__name__}: {e}"}))
"""

# Under the harness: a trial's script with checkpoint_policy left to its default ("best").
ON_CLUSTER = """
import sys
from trial import *

fit(
    max_length=pytorch.Batch(16),
    validation_period=pytorch.Batch(4),
    reporting_period=pytorch.Batch(2),
    step_zero_validation=True,
)
"""


def _write(tmp_path: Path, main: str) -> Path:
    model = tmp_path / "model"
    model.mkdir()
    (model / "trial.py").write_text(TRIAL)
    (model / "main.py").write_text(main)
    return model


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each scenario's printed training and validation batches and checkpoint directories, and
    each bad value's error, from one run of the script."""
    model = _write(tmp_path_factory.mktemp("local"), LOCAL)
    env = {"PYTHONPATH": str(compat_path()), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "main.py"], cwd=model, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    scenarios: dict[str, dict[str, list[Any]]] = {}
    refused: dict[str, str | None] = {}
    current: dict[str, list[Any]] = {}
    for line in done.stdout.splitlines():
        if not line.startswith("{"):
            continue
        record = json.loads(line)
        if "scenario" in record:
            current = scenarios.setdefault(record["scenario"], {"training": [], "validation": []})
        elif "refused" in record:
            refused[record["refused"]] = record["error"]
        elif "checkpoints" in record:
            current["checkpoints"] = record["checkpoints"]
        for kind in ("training", "validation"):
            if kind in record:
                current[kind].append(record["batches_trained"])
    return {"scenarios": scenarios, "refused": refused}


def test_training_metrics_are_reported_every_reporting_period_and_at_each_validation(local) -> None:
    run = local["scenarios"]["report_every_2"]
    assert run["training"] == [2, 4, 6, 8] and run["validation"] == [4, 8]
    assert local["scenarios"]["report_every_epoch"]["training"] == [4, 8]


def test_checkpoint_policy_none_checkpoints_only_at_the_end_and_all_after_every_validation(local) -> None:
    assert local["scenarios"]["report_every_2"]["checkpoints"] == ["batches-8"]
    assert local["scenarios"]["all"]["checkpoints"] == ["batches-4", "batches-8"]


def test_best_is_all_off_a_cluster_as_in_determined(local) -> None:
    assert local["scenarios"]["best"]["checkpoints"] == ["batches-12", "batches-4", "batches-8"]


def test_step_zero_validation_validates_the_untrained_model_first(local) -> None:
    run = local["scenarios"]["step_zero"]
    assert run["validation"] == [0, 4] and run["checkpoints"] == ["batches-4"]


def test_test_mode_trains_one_batch_validates_and_checkpoints(local) -> None:
    run = local["scenarios"]["test_mode"]
    assert run["training"] == [1] and run["validation"] == [1] and run["checkpoints"] == ["batches-1"]


def test_profiling_disabled_is_accepted(local) -> None:
    assert local["scenarios"]["profiling_off"]["training"] == [2]


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("checkpoint_policy", "ValueError: Trainer.fit(): checkpoint_policy must be 'best', 'all' or 'none'"),
        ("reporting_period", "TypeError: reporting_period must be determined.pytorch.Batch(n) or Epoch(n)"),
        ("reporting_period_zero", "ValueError: Trainer.fit(): reporting_period must be at least one batch"),
        ("profiling_enabled", "ValueError: Trainer.fit(): profiling_enabled=True is not supported"),
        ("step_zero_validation", "TypeError: Trainer.fit(): step_zero_validation must be True or False"),
        ("test_mode", "TypeError: Trainer.fit(): test_mode must be True or False"),
    ],
)
def test_bad_values_are_refused_in_one_line_naming_the_argument(local, case: str, expected: str) -> None:
    error = local["refused"][case]
    assert error is not None and error.startswith(expected) and "\n" not in error


def test_on_a_cluster_best_checkpoints_after_each_better_validation(tmp_path) -> None:
    """Validation losses 3, 1, 2, 0.5, 3 at batches 0 (step zero), 4, 8, 12, 16: checkpoints at 4
    and 12 (better than every earlier one; none after step zero's) and 16 (the end); training
    reported every 2 batches."""
    model = _write(tmp_path, ON_CLUSTER)
    settings = ScriptSettings(
        command=[sys.executable, "main.py"], model_dir=model, chief=True, searcher_metric="validation_loss"
    )
    stored = StoredCheckpoints()
    trial, server = start_script(tmp_path, settings, stored)
    seen: list[common_pb2.ScriptReport] = []
    try:
        for _ in range(20):  # steps past the script's length, until it exits (a checkpoint ends a step)
            work = common_pb2.Workload(
                kind=common_pb2.WorkloadKind.WORKLOAD_KIND_RUN_STEP, trial_id=1, run_id=1, total_batches=100
            )
            step = trial.run_workload(work)
            seen.extend(step.script_reports)
            if step.script_finished:
                break
    finally:
        trial.kill()
        server.close()
    assert stored.progress == [4, 12, 16]
    training = [r.steps_completed for r in seen if r.kind == REPORT.SCRIPT_REPORT_KIND_TRAINING]
    assert training == [2, 4, 6, 8, 10, 12, 14, 16]
    losses = [
        from_struct(r.metrics)["validation_loss"]
        for r in seen
        if r.kind == REPORT.SCRIPT_REPORT_KIND_VALIDATION
    ]
    assert losses == [3.0, 1.0, 2.0, 0.5, 3.0]
    validated = [r.steps_completed for r in seen if r.kind == REPORT.SCRIPT_REPORT_KIND_VALIDATION]
    assert validated == [0, 4, 8, 12, 16]


def test_on_a_cluster_test_mode_is_refused_and_off_it_best_becomes_all() -> None:
    common = dict(
        reporting_period=Batch(100), step_zero_validation=False, profiling_enabled=False, batches_per_epoch=4
    )
    with pytest.raises(ValueError, match=r"^Trainer.fit\(\): test_mode is only supported off a cluster"):
        fit_options(checkpoint_policy="best", test_mode=True, on_cluster=True, **common)
    assert (
        fit_options(checkpoint_policy="best", test_mode=True, on_cluster=False, **common).checkpoint_policy
        == "all"
    )
    on = fit_options(checkpoint_policy="best", test_mode=False, on_cluster=True, **common)
    assert on.checkpoint_policy == "best" and on.report_every == 100
    assert (
        fit_options(
            checkpoint_policy="none",
            test_mode=False,
            on_cluster=True,
            **{**common, "reporting_period": Epoch(2)},
        ).report_every
        == 8
    )


def test_best_follows_smaller_is_better_and_names_a_missing_metric() -> None:
    larger = CheckpointPolicy("best", lambda: ("accuracy", False))
    assert [larger.after({"accuracy": a}) for a in (0.5, 0.4, 0.7, 0.7)] == [True, False, True, False]
    with pytest.raises(
        ValueError, match="the searcher metric 'accuracy' is not among the validation metrics"
    ):
        CheckpointPolicy("best", lambda: ("accuracy", False)).after({"loss": 1.0})


def test_a_period_of_several_points_is_refused_naming_it() -> None:
    """Determined's `Batch([5, 30, 45])` (report at those batches) is not taken: one int per period."""
    with pytest.raises(TypeError, match=r"^reporting_period must be Batch\(n\) or Epoch\(n\) with one int n"):
        fit_options(
            reporting_period=Batch([5, 30]),  # type: ignore[arg-type]
            checkpoint_policy="none",
            step_zero_validation=False,
            test_mode=False,
            profiling_enabled=False,
            batches_per_epoch=4,
            on_cluster=False,
        )
