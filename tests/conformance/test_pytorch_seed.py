"""Seed conformance: PyTorchTrial (seed 002, entrypoints from seeds 001/004), from the seed text.

The seed: `download_data(experiment_config, hparams) -> str` runs once per machine before the
data loaders; `pedl.get_download_data_dir()` returns its path; `make_data_loaders(experiment_config,
hparams)` returns (training, validation) loaders that "behave the same as" torch's DataLoader
(pedl.pytorch.DataLoader, "a drop-in replacement"); batches are `(input, target)`, each an
np.ndarray, a torch.Tensor, a tuple, a list, a dict of them, or a combination; `losses` returns a
scalar tensor or a dict holding "loss"; `validation_metrics` and the optional `training_metrics`
return dicts whose metrics "may be non-scalar tensors" and are averaged over batches. An
entrypoint `<module>:<object reference>` may name a nested object
(`lib.trial:classes.NestedTrial`).

Where the seed is silent, these tests take what a PEDL 0.9 user would expect: a non-scalar
metric is reported as a list of its averaged elements; the package `lib/` of a nested
entrypoint needs no `__init__.py` (Python 3 namespace package).

Each model definition runs on a real local cluster through the CLI, COMPLETEs, and resumes
exactly after its trial is killed mid-run (see conformance_support).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conformance_support import Cli, cli_cluster, completes_and_resumes_exactly, config

# Two runs of a few small trials each, on 2 shared cores: minutes, not the default 300 s.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

COMMON = '''
import os

import numpy as np
import torch
from torch import nn

import pedl
from pedl.pytorch import DataLoader, PyTorchTrial

KILL = {}


def remember_kill(experiment_config, hparams):
    data = experiment_config.get("data") or {}
    if data.get("kill_at"):
        suffix = "_".join(f"{k}={hparams[k]}" for k in sorted(hparams))
        KILL.update(kill_at=data["kill_at"], mark=f"{data['kill_mark']}-{suffix}")


def tripwire(model):
    """Stages a crash of this process at training batch data.kill_at (once: it leaves a mark)."""
    if model.training and KILL.get("kill_at"):
        model.batches += 1
        if model.batches == KILL["kill_at"] and not os.path.exists(KILL["mark"]):
            open(KILL["mark"], "w").close()
            os.kill(os.getpid(), 9)


def download_data(experiment_config, hparams):
    import tempfile

    directory = tempfile.mkdtemp(prefix="pytorch-seed-data-")
    rng = np.random.RandomState(0)
    x = rng.normal(size=(480, 8)).astype("float32")
    np.savez(os.path.join(directory, "data.npz"), x=x, y=(x[:, :4].sum(axis=1) > 0).astype("int64"))
    return directory


def load(experiment_config, hparams):
    remember_kill(experiment_config, hparams)
    with np.load(os.path.join(pedl.get_download_data_dir(), "data.npz")) as data:
        return data["x"], data["y"]
'''

PACKAGE = (
    COMMON
    + '''

def as_form(form, x, y):
    """One (input, target) batch in the seed's batch form `form`, from NumPy rows."""
    a, b = x[:, :4], x[:, 4:]
    ta, tb, ty = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(y)
    if form == "ndarray":
        return x, y
    if form == "tensor":
        return torch.from_numpy(x), ty
    if form == "tuple":
        return (ta, b), ty
    if form == "list":
        return [ta, tb], [ty]
    if form == "dict":
        return {"input1": ta, "input2": tb}, {"label": y}
    assert form == "nested"
    return {"input1": [{"sub_input1": ta}, {"sub_input2": tb}], "input2": (ta, b)}, (ty,)


def halves(inputs):
    if isinstance(inputs, dict) and isinstance(inputs["input1"], list):
        return inputs["input1"][0]["sub_input1"], inputs["input1"][1]["sub_input2"]
    if isinstance(inputs, dict):
        return inputs["input1"], inputs["input2"]
    if isinstance(inputs, (tuple, list)):
        return inputs[0], inputs[1]
    inputs = torch.as_tensor(inputs)
    return inputs[:, :4], inputs[:, 4:]


def target(labels):
    if isinstance(labels, dict):
        labels = labels["label"]
    if isinstance(labels, (tuple, list)):
        labels = labels[0]
    return torch.as_tensor(labels).long()


class Rows(torch.utils.data.Dataset):
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def make_data_loaders(experiment_config, hparams):
    x, y = load(experiment_config, hparams)
    form = hparams["form"]

    def collate(rows):
        return as_form(form, np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows]))

    return (
        DataLoader(Rows(x[:384], y[:384]), batch_size=32, shuffle=True, collate_fn=collate),
        DataLoader(Rows(x[384:], y[384:]), batch_size=32, collate_fn=collate),
    )


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.left, self.right = nn.Linear(4, 8), nn.Linear(4, 8)
        self.drop, self.out = nn.Dropout(0.2), nn.Linear(16, 2)
        self.batches = 0

    def forward(self, inputs):
        tripwire(self)
        a, b = halves(inputs)
        hidden = torch.cat([self.left(torch.as_tensor(a)), self.right(torch.as_tensor(b))], dim=1)
        return self.out(self.drop(torch.relu(hidden)))


class SeedTrial(PyTorchTrial):
    def build_model(self, hparams):
        return Net()

    def optimizer(self, model):
        return torch.optim.SGD(model.parameters(), lr=self.hparams["learning_rate"], momentum=0.9)

    def batch_size(self):
        return 32

    def losses(self, predictions, labels):
        ce = nn.functional.cross_entropy(predictions, target(labels))
        return {"loss": ce, "logit_norm": predictions.pow(2).mean()}

    def training_metrics(self, predictions, labels, losses):
        return {"logit_norm": losses["logit_norm"], "mean_logits": predictions.mean(dim=0)}

    def validation_metrics(self, predictions, labels, losses):
        truth = target(labels)
        right = (predictions.argmax(dim=1) == truth).float()
        per_class = torch.stack([right[truth == k].mean() if (truth == k).any() else right.new_tensor(0.0)
                                 for k in range(2)])
        return {"accuracy": right.mean(), "class_accuracy": per_class, "loss": losses["loss"]}
'''
)

NESTED = (
    COMMON
    + '''

def make_data_loaders(experiment_config, hparams):
    x, y = load(experiment_config, hparams)
    train = torch.utils.data.TensorDataset(torch.from_numpy(x[:384]), torch.from_numpy(y[:384]))
    val = torch.utils.data.TensorDataset(torch.from_numpy(x[384:]), torch.from_numpy(y[384:]))
    return DataLoader(train, batch_size=hparams["batch_size"], shuffle=True), DataLoader(val, batch_size=48)


class classes:  # noqa: N801 - the seed's example names it so
    class NestedTrial(PyTorchTrial):
        """Scalar loss, no training_metrics, every hyperparameter type."""

        def build_model(self, hparams):
            activation = {"relu": nn.ReLU(), "tanh": nn.Tanh()}[hparams["activation"]]
            model = nn.Sequential(nn.Linear(8, hparams["hidden"]), activation, nn.Dropout(hparams["dropout"]),
                                  nn.Linear(hparams["hidden"], 2))
            model.batches = 0
            model.register_forward_pre_hook(lambda module, inputs: tripwire(module))
            return model

        def optimizer(self, model):
            return torch.optim.Adam(model.parameters(), lr=self.hparams["learning_rate"])

        def batch_size(self):
            return self.hparams["batch_size"]

        def losses(self, predictions, labels):
            return nn.functional.cross_entropy(predictions, labels)

        def validation_metrics(self, predictions, labels, losses):
            return {"loss": losses, "accuracy": (predictions.argmax(dim=1) == labels).float().mean()}
'''
)

FORMS = ["ndarray", "tensor", "tuple", "list", "dict", "nested"]


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    yield from cli_cluster(tmp_path_factory.mktemp("pytorch-seed"))


def test_every_batch_form_and_metric_shape_completes_and_resumes_exactly(cli: Cli, tmp_path: Path) -> None:
    """A package (__init__.py exposes the trial, make_data_loaders, download_data); one trial per
    batch form (grid); a dict of losses; scalar and non-scalar training and validation metrics."""
    model = tmp_path / "pytorch_package"
    model.mkdir()
    (model / "__init__.py").write_text(PACKAGE)
    raw = config(
        hyperparameters={
            "form": {"type": "categorical", "vals": FORMS},
            "learning_rate": {"type": "const", "val": 0.05},
        }
    )
    raw["searcher"] = {**raw["searcher"], "name": "grid"}
    reference = completes_and_resumes_exactly(cli, model, raw)
    assert len(reference["trials"]) == len(FORMS)
    for trial in reference["trials"]:
        step = trial["steps"][-1]["metrics"]
        assert set(step) == {"loss", "logit_norm", "mean_logits"} and len(step["mean_logits"]) == 2
        validation = trial["validations"][-1]["metrics"]
        assert {"accuracy", "class_accuracy", "loss"} <= set(validation)
        assert len(validation["class_accuracy"]) == 2


def test_a_nested_entrypoint_with_every_hyperparameter_type(cli: Cli, tmp_path: Path) -> None:
    """`entrypoint: lib.trial:classes.NestedTrial`; a scalar loss and no training_metrics (steps
    report the loss alone); const, int, double, log and categorical hyperparameters over two
    random trials."""
    model = tmp_path / "pytorch_nested"
    (model / "lib").mkdir(parents=True)
    (model / "lib" / "trial.py").write_text(NESTED)
    raw = config(
        entrypoint="lib.trial:classes.NestedTrial",
        hyperparameters={
            "hidden": {"type": "int", "minval": 4, "maxval": 16},
            "learning_rate": {"type": "log", "minval": -3, "maxval": -1, "base": 10},
            "dropout": {"type": "double", "minval": 0.0, "maxval": 0.3},
            "activation": {"type": "categorical", "vals": ["relu", "tanh"]},
            "batch_size": {"type": "const", "val": 24},
        },
    )
    raw["searcher"] = {**raw["searcher"], "name": "random", "max_trials": 2}
    reference = completes_and_resumes_exactly(cli, model, raw)
    assert len(reference["trials"]) == 2
    for trial in reference["trials"]:
        assert set(trial["steps"][-1]["metrics"]) == {"loss"}
