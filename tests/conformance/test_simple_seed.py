"""Seed conformance: the Simple Model Definition (seed 000), written from the seed text alone.

The seed: "Specify a directory of model code together with an entrypoint script that executes a
training and validation procedure"; the script "creates and loads the training data, describes a
model architecture, and runs the training and validation procedure using framework API's (e.g.,
Keras's fit_generator())"; "To access hyperparameters in model code, use the
pedl.get_hyperparameter(name) function"; "simple model definitions are only supported for Keras
models"; ".pedlignore ... uses the same syntax as .gitignore".

Each model definition runs on a real local cluster through the CLI, COMPLETEs, and resumes
exactly after its trial is killed mid-run (see conformance_support).

Where the seed is silent, these tests take what a PEDL 0.9 user would expect:
- the entrypoint section is `entrypoint: {script: PATH, args: [...]}` (pedl's form of it);
- the script runs as `python PATH args...` would, from the model definition's root: a script in
  a subfolder imports its siblings and the root's packages;
- the script calls fit once and PEDL owns the loop (epochs/steps come from the searcher), so
  `epochs=` is a hint the searcher supersedes;
- a Python generator is replayed under the trial seed on resume (the README's replay rule).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from conformance_support import Cli, cli_cluster, completes_and_resumes_exactly, config, with_script_kill

# Two runs of a few small trials each, on 2 shared cores: minutes, not the default 300 s.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

# A Keras model and data, then one fit call per form the seed's Keras user would write.
SCRIPT = '''
"""A plain Keras training script, as a PEDL user writes one."""
import argparse
import os

import keras
import numpy as np
import tensorflow as tf

import pedl

parser = argparse.ArgumentParser()
parser.add_argument("--kill-at", type=int)
parser.add_argument("--kill-mark")
args = parser.parse_args()
form = pedl.get_hyperparameter("form")


class Tripwire(keras.layers.Layer):
    """Stages a crash of this process at training batch --kill-at (once: it leaves a mark)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.batches = 0

    def call(self, inputs, training=None):
        if training and args.kill_at:
            self.batches += 1
            mark = f"{args.kill_mark}-{form}"
            if self.batches == args.kill_at and not os.path.exists(mark):
                open(mark, "w").close()
                os.kill(os.getpid(), 9)
        return inputs


rng = np.random.RandomState(0)
x = rng.normal(size=(1280, 8)).astype("float32")
y = (x[:, :4].sum(axis=1) > 0).astype("int64")
xv = rng.normal(size=(256, 8)).astype("float32")
yv = (xv[:, :4].sum(axis=1) > 0).astype("int64")

model = keras.Sequential([
    keras.Input((8,)),
    Tripwire(),
    keras.layers.Dense(16, activation="relu"),
    keras.layers.Dropout(0.1),
    keras.layers.Dense(2, activation="softmax"),
])
model.compile(
    optimizer=keras.optimizers.SGD(pedl.get_hyperparameter("learning_rate")),
    loss="sparse_categorical_crossentropy",
    metrics=["accuracy"],
    run_eagerly=True,  # the tripwire counts batches in Python
)


def batches(x, y, batch_size):
    while True:
        order = np.random.permutation(len(x))
        for i in range(0, len(x) - batch_size + 1, batch_size):
            rows = order[i : i + batch_size]
            yield x[rows], y[rows]


class Batches(keras.utils.PyDataset):
    def __init__(self, x, y, weights, shuffle):
        super().__init__()
        self.x, self.y, self.w, self.shuffle = x, y, weights, shuffle
        self.order = np.arange(len(x))

    def __len__(self):
        return len(self.x) // 64

    def __getitem__(self, i):
        rows = self.order[i * 64 : (i + 1) * 64]
        return self.x[rows], self.y[rows], self.w[rows]

    def on_epoch_end(self):
        if self.shuffle:
            self.order = np.random.permutation(len(self.x))


if form == "generator":  # the issue's script, word for word
    model.fit(batches(x, y, 32), steps_per_epoch=40, epochs=10, validation_data=(xv, yv))
elif form == "fit_generator":  # Keras 2-era, validation from a generator too
    model.fit_generator(
        batches(x, y, 32), steps_per_epoch=40, epochs=10,
        validation_data=batches(xv, yv, 64), validation_steps=4,
    )
elif form == "arrays":
    model.fit(x, y, batch_size=32, epochs=10, validation_split=0.2)
elif form == "dataset":
    train = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1280).batch(32)
    model.fit(train, epochs=10, validation_data=tf.data.Dataset.from_tensor_slices((xv, yv)).batch(64))
elif form == "pydataset":
    weights = np.where(y == 1, 2.0, 1.0).astype("float32")
    model.fit(Batches(x, y, weights, True), epochs=10,
              validation_data=Batches(xv, yv, np.ones(len(xv), "float32"), False))
raise SystemExit("not reached under PEDL: fit does not return")
'''

FORMS = ["generator", "fit_generator", "arrays", "dataset", "pydataset"]


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    yield from cli_cluster(tmp_path_factory.mktemp("simple-seed"), tensorflow=True)


def write(directory: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)
    return directory


def test_every_fit_form_completes_and_resumes_exactly(cli: Cli, tmp_path: Path) -> None:
    """Generators (the issue's `fit(batches(...), steps_per_epoch=40, ...)` with np.random each
    epoch, and Keras 2's fit_generator with a validation generator), arrays with
    validation_split, tf.data and a PyDataset with sample weights: one trial each (grid search)."""
    model = write(tmp_path / "forms", {"train.py": SCRIPT})
    raw = config(
        entrypoint={"script": "train.py"},
        hyperparameters={
            "form": {"type": "categorical", "vals": FORMS},
            "learning_rate": {"type": "const", "val": 0.1},
        },
    )
    raw["searcher"] = {**raw["searcher"], "name": "grid", "metric": "loss"}
    reference = completes_and_resumes_exactly(cli, model, raw, with_script_kill)
    assert len(reference["trials"]) == len(FORMS)
    for trial in reference["trials"]:
        assert [int(s["total_batches"]) for s in trial["steps"]] == [2, 4, 6, 8, 10, 12]
        assert {"val_loss", "val_accuracy"} <= set(trial["validations"][-1]["metrics"])
    assert "not reached under PEDL" not in cli.logs(reference)


NESTED = '''
"""A script in a subfolder: imports its sibling and a package at the root; reads every type of
hyperparameter."""
import argparse
import os

import keras
import numpy as np

import pedl
from layers import Tripwire  # the script's sibling
from shared.data import make_data  # a package at the model definition's root

parser = argparse.ArgumentParser()
parser.add_argument("--units", type=int, required=True)
parser.add_argument("--kill-at", type=int)
parser.add_argument("--kill-mark")
args = parser.parse_args()

assert not os.path.exists("data/big.bin"), ".pedlignore'd files must not reach the trial"
assert not os.path.exists("notes.tmp"), ".pedlignore'd files must not reach the trial"
assert os.path.exists("data/keep.txt"), "a negated .pedlignore pattern keeps its file"

hidden = pedl.get_hyperparameter("hidden")            # int
learning_rate = pedl.get_hyperparameter("learning_rate")  # log
dropout = pedl.get_hyperparameter("dropout")          # double
activation = pedl.get_hyperparameter("activation")    # categorical
momentum = pedl.get_hyperparameter("momentum")        # const
assert isinstance(hidden, int) and isinstance(activation, str)
mark = f"{args.kill_mark}-{hidden}-{learning_rate}-{dropout}-{activation}"

x, y = make_data(1000)
model = keras.Sequential([
    keras.Input((8,)),
    Tripwire(args.kill_at, mark),
    keras.layers.Dense(hidden + args.units, activation=activation),
    keras.layers.Dropout(dropout),
    keras.layers.Dense(2, activation="softmax"),
])
model.compile(
    optimizer=keras.optimizers.SGD(learning_rate, momentum=momentum),
    loss="sparse_categorical_crossentropy",
    metrics=["accuracy"],
    run_eagerly=True,
)
model.fit(x, y, batch_size=50, validation_split=0.1)
'''

LAYERS = '''
import os

import keras


class Tripwire(keras.layers.Layer):
    """Stages a crash of this process at training batch kill_at (once: it leaves a mark)."""

    def __init__(self, kill_at, mark, **kwargs):
        super().__init__(**kwargs)
        self.kill_at, self.mark, self.batches = kill_at, mark, 0

    def call(self, inputs, training=None):
        if training and self.kill_at:
            self.batches += 1
            if self.batches == self.kill_at and not os.path.exists(self.mark):
                open(self.mark, "w").close()
                os.kill(os.getpid(), 9)
        return inputs
'''

DATA = """
import numpy as np


def make_data(n):
    rng = np.random.RandomState(1)
    x = rng.normal(size=(n, 8)).astype("float32")
    return x, (x[:, 0] - x[:, 1] > 0).astype("int64")
"""


def test_a_nested_script_with_every_hyperparameter_type_and_a_pedlignore(cli: Cli, tmp_path: Path) -> None:
    """`entrypoint.script` in a subfolder with arguments, `.pedlignore` (gitignore syntax: a folder,
    a glob, a negation), and `pedl.get_hyperparameter` for const, int, double, log and categorical
    hyperparameters over two random trials."""
    model = write(
        tmp_path / "nested",
        {
            "project/train.py": NESTED,
            "project/layers.py": LAYERS,
            "shared/__init__.py": "",
            "shared/data.py": DATA,
            ".pedlignore": "data/*\n!data/keep.txt\n*.tmp\n",
            "data/keep.txt": "kept\n",
            "notes.tmp": "scratch\n",
        },
    )
    (model / "data" / "big.bin").write_bytes(b"\0" * 4096)
    raw = config(
        entrypoint={"script": "project/train.py", "args": ["--units", "4"]},
        hyperparameters={
            "hidden": {"type": "int", "minval": 4, "maxval": 16},
            "learning_rate": {"type": "log", "minval": -2, "maxval": -0.5, "base": 10},
            "dropout": {"type": "double", "minval": 0.0, "maxval": 0.3},
            "activation": {"type": "categorical", "vals": ["relu", "tanh"]},
            "momentum": {"type": "const", "val": 0.5},
        },
    )
    raw["searcher"] = {**raw["searcher"], "name": "random", "max_trials": 2}
    reference = completes_and_resumes_exactly(cli, model, raw, with_script_kill)
    assert len(reference["trials"]) == 2
    sampled = [json.dumps(t["hparams"], sort_keys=True) for t in reference["trials"]]
    assert len(set(sampled)) == 2


MISSING_STEPS = """
import keras
import numpy as np

def batches():
    while True:
        yield np.zeros((4, 3), "float32"), np.zeros((4,), "int64")

model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation="softmax")])
model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
model.fit(batches(), epochs=3, validation_data=(np.zeros((4, 3)), np.zeros((4,))))
"""


def test_an_endless_generator_without_steps_per_epoch_names_the_fit_line(cli: Cli, tmp_path: Path) -> None:
    """Keras cannot tell an epoch of an endless generator, so neither can PEDL: the trial errors
    with the fit call's line, once."""
    model = write(tmp_path / "nosteps", {"train.py": MISSING_STEPS})
    raw = config(entrypoint={"script": "train.py"}, hyperparameters={}, max_restarts=0)
    described = cli.wait(cli.create(model, raw))
    assert described["experiment"]["state"] == "ERROR"
    expected = "train.py:11: model.fit() got a Python generator as x but no steps_per_epoch"
    assert expected in cli.logs(described)
