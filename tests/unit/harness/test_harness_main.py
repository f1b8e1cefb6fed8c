import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness_fake_agent import KIND, FakeAgent, serving, trial_info, workload

import pedl.harness.main as harness_main
from pedl._metrics import from_struct
from pedl.harness.hparams import typed_hparams
from pedl.v1 import common_pb2

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "digits_pytorch"

TOY = """
import pedl
import torch
from torch import nn
from torch.utils.data import TensorDataset
from pedl.pytorch import DataLoader, PyTorchTrial


def make_data_loaders(experiment_config, hparams):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(40, 4, generator=gen)
    y = (x.sum(dim=1) > 0).long()
    data = TensorDataset(x, y)
    return DataLoader(data, batch_size=4, shuffle=True), DataLoader(data, batch_size=8)


class ToyTrial(PyTorchTrial):
    def build_model(self, hparams):
        {build_model_body}
        hidden = pedl.get_hyperparameter("hidden")
        return nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hparams["hidden"], 2))

    def optimizer(self, model):
        return torch.optim.SGD(model.parameters(), lr=self.hparams["lr"], momentum=0.9)

    def losses(self, predictions, labels):
        return nn.functional.cross_entropy(predictions, labels)

    def batch_size(self):
        return 4

    def validation_metrics(self, predictions, labels, losses):
        return {{"error": (predictions.argmax(1) != labels).float().mean()}}
"""

CONFIG = {
    "description": "toy",
    "hyperparameters": {
        "hidden": {"type": "int", "minval": 2, "maxval": 9},
        "lr": {"type": "const", "val": 0.1},
    },
    "searcher": {"name": "single", "metric": "error", "max_steps": 3},
}
HPARAMS = {"hidden": 8, "lr": 0.1}


def toy_model_def(root: Path, build_model_body: str = "pass") -> Path:
    directory = root / f"toy_{uuid.uuid4().hex[:8]}"
    directory.mkdir()
    (directory / "__init__.py").write_text(textwrap.dedent(TOY).format(build_model_body=build_model_body))
    return directory


class DirectoryCheckpoints:
    """A CheckpointStorage keeping checkpoints in a local folder (the store's role)."""

    def __init__(self, root: Path, *args: Any) -> None:
        self.root = root

    def store(self, directory: Path, total_batches: int) -> common_pb2.Checkpoint:
        checkpoint_uuid = uuid.uuid4().hex
        shutil.copytree(directory, self.root / checkpoint_uuid)
        return common_pb2.Checkpoint(uuid=checkpoint_uuid, total_batches=total_batches)

    def fetch(self, checkpoint_uuid: str, directory: Path) -> None:
        shutil.copytree(self.root / checkpoint_uuid, directory, dirs_exist_ok=True)

    def store_tensorboard_files(self, files: list[tuple[str, Path, int]]) -> int:
        for rel, path, size in files:
            target = self.root / "tensorboard" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes()[:size])
        return len(files)


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "store"
    root.mkdir()
    monkeypatch.setattr(harness_main, "StoreCheckpoints", lambda *args: DirectoryCheckpoints(root))
    monkeypatch.setenv("PEDL_TENSORBOARD_DIR", "")  # the harness sets it: restored after the test
    return root


def steps(*totals: int) -> list[common_pb2.Workload]:
    out = []
    for i, total in enumerate(totals, start=1):
        out.append(workload(KIND.WORKLOAD_KIND_RUN_STEP, total, step_id=i))
        out.append(workload(KIND.WORKLOAD_KIND_COMPUTE_VALIDATION_METRICS, total, step_id=i))
    return out


def test_workloads_run_in_order_and_results_go_back(tmp_path: Path, store: Path) -> None:
    model_dir = toy_model_def(tmp_path)
    checkpoint = workload(KIND.WORKLOAD_KIND_CHECKPOINT_MODEL, 10, step_id=2)
    agent = FakeAgent(trial_info(model_dir, CONFIG, HPARAMS), [*steps(5, 10), checkpoint])
    with serving(agent) as socket_path:
        harness_main.run(socket_path)
    kinds = [r.workload.kind for r in agent.results]
    assert kinds == [KIND.WORKLOAD_KIND_RUN_STEP, KIND.WORKLOAD_KIND_COMPUTE_VALIDATION_METRICS] * 2 + [
        KIND.WORKLOAD_KIND_CHECKPOINT_MODEL
    ]
    step = agent.results[2]
    assert step.workload.total_batches == 10 and step.num_batches == 5 and step.num_inputs == 20
    assert set(from_struct(step.metrics)) == {"loss"}
    assert set(from_struct(agent.results[3].metrics)) == {"error", "loss"}
    stored = agent.results[4].checkpoint
    assert stored.total_batches == 10 and (store / stored.uuid / "metadata.json").is_file()
    # TERMINATE was handed out last and got no result: the harness just returned.
    assert agent.handed_out[-1].kind == KIND.WORKLOAD_KIND_TERMINATE and len(agent.results) == 5


def test_restart_from_latest_checkpoint_continues_exactly(tmp_path: Path, store: Path) -> None:
    model_dir = toy_model_def(tmp_path)
    whole = FakeAgent(trial_info(model_dir, CONFIG, HPARAMS), steps(5, 10, 15))
    with serving(whole) as socket_path:
        harness_main.run(socket_path)

    checkpoint = workload(KIND.WORKLOAD_KIND_CHECKPOINT_MODEL, 5, step_id=1)
    first = FakeAgent(trial_info(model_dir, CONFIG, HPARAMS), [*steps(5), checkpoint])
    with serving(first) as socket_path:
        harness_main.run(socket_path)
    uuid_ = first.results[-1].checkpoint.uuid
    # Workloads are absolute: the restarted run is asked for 10 and 15 batches in all.
    info = trial_info(model_dir, CONFIG, HPARAMS, latest_checkpoint_uuid=uuid_, latest_checkpoint_batches=5)
    second = FakeAgent(info, steps(10, 15)[0:4])
    with serving(second) as socket_path:
        harness_main.run(socket_path)

    def metrics(agent: FakeAgent) -> list[dict[str, Any]]:
        return [
            from_struct(r.metrics)
            for r in agent.results
            if r.workload.kind != KIND.WORKLOAD_KIND_CHECKPOINT_MODEL
        ]

    assert metrics(first) + metrics(second) == metrics(whole)
    assert [r.num_batches for r in second.results if r.workload.kind == KIND.WORKLOAD_KIND_RUN_STEP] == [5, 5]


def test_hparams_get_their_declared_int_type_back() -> None:
    config = {
        "hyperparameters": {
            "a": {"type": "int"},
            "b": {"type": "double"},
            "c": {"type": "const", "val": 3},
            "d": {"type": "categorical", "vals": [8, "x"]},
            "e": 5,
        }
    }
    typed = typed_hparams({"a": 4.0, "b": 2.0, "c": 3.0, "d": 8.0, "e": 5.0, "f": 1.0}, config)
    assert typed == {"a": 4, "b": 2.0, "c": 3, "d": 8, "e": 5, "f": 1.0}
    assert [type(typed[k]) for k in "abcdef"] == [int, float, int, int, int, float]


@pytest.fixture
def harness_process() -> Iterator[Any]:
    procs: list[subprocess.Popen[str]] = []

    def start(socket_path: str, cwd: Path) -> subprocess.Popen[str]:
        env = {**os.environ, "PEDL_HARNESS_SOCKET": socket_path, "PEDL_TRIAL_ID": "1", "PEDL_RUN_ID": "1"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "pedl.harness"],
            cwd=cwd,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        procs.append(proc)
        return proc

    try:
        yield start
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_harness_process_trains_the_example_and_exits_0(harness_process: Any) -> None:
    import yaml

    config = yaml.safe_load((EXAMPLE / "const.yaml").read_text())
    hparams = {name: spec["val"] for name, spec in config["hyperparameters"].items()}
    agent = FakeAgent(trial_info(EXAMPLE, config, hparams), steps(*range(50, 1001, 50)))
    with serving(agent) as socket_path:
        proc = harness_process(socket_path, EXAMPLE)
        _, stderr = proc.communicate(timeout=240)
    assert proc.returncode == 0, stderr
    validation = from_struct(agent.results[-1].metrics)
    assert validation["validation_error"] < 0.1 and validation["accuracy"] > 0.9
    assert agent.results[-2].num_batches == 50


def test_harness_process_exits_1_with_traceback_when_user_code_raises(
    tmp_path: Path, harness_process: Any
) -> None:
    model_dir = toy_model_def(tmp_path, 'raise ValueError("bad hidden size")')
    agent = FakeAgent(trial_info(model_dir, CONFIG, HPARAMS), steps(5))
    with serving(agent) as socket_path:
        proc = harness_process(socket_path, model_dir)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert "Traceback (most recent call last)" in stderr
    assert 'in build_model\n    raise ValueError("bad hidden size")' in stderr
    assert stderr.rstrip().endswith("ValueError: bad hidden size")
    assert agent.results == []


@pytest.mark.parametrize(
    ("config_json", "error"),
    [
        (
            json.dumps({**CONFIG, "max_restarts": "five"}),
            "StartTrial.config_json: max_restarts: expected an integer, got 'five'",
        ),
        ('{"searcher": {"name": "single"', "StartTrial.config_json, line 1: not valid JSON"),
        ("", "StartTrial.config_json: is empty (no experiment config arrived)"),
    ],
)
def test_a_config_that_does_not_parse_fails_the_trial_at_start_naming_the_field(
    tmp_path: Path, harness_process: Any, config_json: str, error: str
) -> None:
    model_dir = toy_model_def(tmp_path, 'raise AssertionError("user code must not run")')
    info = trial_info(model_dir, CONFIG, HPARAMS)
    info.trial.config_json = config_json
    agent = FakeAgent(info, steps(5))
    with serving(agent) as socket_path:
        proc = harness_process(socket_path, model_dir)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1
    prefix = "pedl.harness: the experiment config this trial was started with is invalid: "
    assert stderr.startswith(prefix + error), stderr
    assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1
    assert agent.handed_out == [] and agent.results == []
    (failure,) = agent.failures
    assert failure.permanent  # the same config would meet every restart: the trial ends at once
    assert failure.exception_type == "pedl.harness.trial_config.InvalidTrialConfig"


def test_importing_the_harness_does_not_import_torch() -> None:
    code = (
        "import sys, pedl.harness.main, pedl.model_def, pedl.trial; "
        "print(' '.join(m for m in ('torch', 'tensorflow') if m in sys.modules))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert run.stdout.split() == []


def test_files_in_the_runs_tensorboard_directory_are_stored_before_results_go_back(
    tmp_path: Path, store: Path
) -> None:
    model_dir = toy_model_def(tmp_path)
    events = model_dir.parent / "tensorboard" / "run" / "events.out.tfevents.1"
    events.parent.mkdir(parents=True)
    events.write_bytes(b"written before the first step")
    agent = FakeAgent(trial_info(model_dir, CONFIG, HPARAMS), steps(5))
    with serving(agent) as socket_path:
        harness_main.run(socket_path)
    assert (store / "tensorboard" / "run" / "events.out.tfevents.1").read_bytes() == events.read_bytes()
    assert os.environ["PEDL_TENSORBOARD_DIR"] == str(model_dir.parent / "tensorboard")


def test_hparams_inside_consts_lists_and_nested_groups_get_their_ints_back() -> None:
    # Determined's e2e noop fixture: a const list of actions, whose `level` logging.log needs as an int.
    config = {
        "hyperparameters": {
            "actions": {"type": "const", "val": [{"action": "log", "level": 20}, {"sleep": 0.5}]},
            "bare": [1, {"n": 2}],
            "optimizer": {"lr": {"type": "double"}, "steps": 3, "inner": {"type": "int"}},
            "choice": {"type": "categorical", "vals": [[1, 2], {"k": 4}]},
        }
    }
    sent = {
        "actions": [{"action": "log", "level": 20.0}, {"sleep": 0.5}],
        "bare": [1.0, {"n": 2.0}],
        "optimizer": {"lr": 1.0, "steps": 3.0, "inner": 7.0},
        "choice": {"k": 4.0},
    }
    typed = typed_hparams(sent, config)
    assert typed == sent
    assert type(typed["actions"][0]["level"]) is int and type(typed["actions"][1]["sleep"]) is float
    assert [type(x) for x in (typed["bare"][0], typed["bare"][1]["n"])] == [int, int]
    opt = typed["optimizer"]
    assert (type(opt["lr"]), type(opt["steps"]), type(opt["inner"])) == (float, int, int)
    assert type(typed["choice"]["k"]) is int
