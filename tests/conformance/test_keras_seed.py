"""Seed conformance: KerasTrial (seed 000's Standard Model Definition for Keras), from the seed text.

The seed: "the __init__.py file must expose the Trial implementation and the make_data_loaders()
function"; "PEDL also supports model definitions that consist of a single Python file"; data
download is "an optional API ... download_data() ... invoked once on each machine, before any data
loaders are created ... This path can be fetched by calling pedl.get_download_data_dir()" (seed
002 says it of PyTorchTrial; the issue lists it for every interface).

The Keras trial page the seed points to is not among the seed documents, so the interface is
taken as a PEDL 0.9 user knew it (and as issue #14 lists): `build_model(hparams)` returns a
compiled Keras model, `batch_size()` batches arrays, and `make_data_loaders(experiment_config,
hparams)` returns (training, validation) as arrays, a tf.data.Dataset, a keras.utils.PyDataset
(Keras 3's Sequence), a generator function, or a started endless generator (replayed on resume).

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

import keras
import numpy as np
import tensorflow as tf

import pedl

KILL = {}


class Tripwire(keras.layers.Layer):
    """Stages a crash of this process at training batch data.kill_at (once: it leaves a mark)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.batches = 0

    def call(self, inputs, training=None):
        if training and KILL.get("kill_at"):
            self.batches += 1
            if self.batches == KILL["kill_at"] and not os.path.exists(KILL["mark"]):
                open(KILL["mark"], "w").close()
                os.kill(os.getpid(), 9)
        return inputs


def remember_kill(experiment_config, hparams):
    data = experiment_config.get("data") or {}
    if data.get("kill_at"):
        suffix = "_".join(f"{k}={hparams[k]}" for k in sorted(hparams))
        KILL.update(kill_at=data["kill_at"], mark=f"{data['kill_mark']}-{suffix}")


def compiled_model(hparams):
    model = keras.Sequential([
        keras.Input((8,)),
        Tripwire(),
        keras.layers.Dense(16, activation="relu"),
        keras.layers.Dropout(0.1),
        keras.layers.Dense(2, activation="softmax"),
    ])
    model.compile(
        optimizer=keras.optimizers.Adam(hparams["learning_rate"]),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
        run_eagerly=True,  # the tripwire counts batches in Python
    )
    return model
'''

PACKAGE = (
    COMMON
    + '''

def download_data(experiment_config, hparams):
    """Writes the data set once per machine and returns its directory."""
    import tempfile

    directory = tempfile.mkdtemp(prefix="keras-seed-data-")
    rng = np.random.RandomState(0)
    x = rng.normal(size=(640, 8)).astype("float32")
    np.savez(os.path.join(directory, "data.npz"), x=x, y=(x[:, :4].sum(axis=1) > 0).astype("int64"))
    return directory


class Batches(keras.utils.PyDataset):
    def __init__(self, x, y, shuffle):
        super().__init__()
        self.x, self.y, self.shuffle, self.order = x, y, shuffle, np.arange(len(x))

    def __len__(self):
        return len(self.x) // 32

    def __getitem__(self, i):
        rows = self.order[i * 32 : (i + 1) * 32]
        return self.x[rows], self.y[rows]

    def on_epoch_end(self):
        if self.shuffle:
            self.order = np.random.permutation(len(self.x))


def make_data_loaders(experiment_config, hparams):
    remember_kill(experiment_config, hparams)
    with np.load(os.path.join(pedl.get_download_data_dir(), "data.npz")) as data:
        x, y = data["x"], data["y"]
    train, val = (x[:512], y[:512]), (x[512:], y[512:])
    form = hparams["form"]
    if form == "arrays":
        return train, val
    if form == "dataset":
        return (
            tf.data.Dataset.from_tensor_slices(train).shuffle(512).batch(32),
            tf.data.Dataset.from_tensor_slices(val).batch(32),
        )
    if form == "pydataset":
        return Batches(*train, True), Batches(*val, False)

    def epoch(x, y, shuffle):
        def batches():
            order = np.random.permutation(len(x)) if shuffle else np.arange(len(x))
            for i in range(0, len(x), 32):
                yield x[order[i : i + 32]], y[order[i : i + 32]]
        return batches

    if form == "generator_function":
        return epoch(*train, True), epoch(*val, False)

    def endless(x, y):
        while True:
            yield from epoch(x, y, True)()

    assert form == "started_generator"
    return endless(*train), val


class SeedKerasTrial(pedl.keras.KerasTrial):
    def build_model(self, hparams):
        return compiled_model(hparams)

    def batch_size(self):
        return 32
'''
)

SINGLE_FILE = (
    COMMON
    + """

def make_data_loaders(experiment_config, hparams):
    remember_kill(experiment_config, hparams)
    rng = np.random.RandomState(2)
    x = rng.normal(size=(400, 8)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    return (x[:320], y[:320]), (x[320:], y[320:])


class SingleFileTrial(pedl.keras.KerasTrial):
    def build_model(self, hparams):
        return compiled_model(hparams)

    def batch_size(self):
        return 40
"""
)

FORMS = ["arrays", "dataset", "pydataset", "generator_function", "started_generator"]


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    yield from cli_cluster(tmp_path_factory.mktemp("keras-seed"), tensorflow=True)


def test_every_data_form_with_download_data_completes_and_resumes_exactly(cli: Cli, tmp_path: Path) -> None:
    """A package whose __init__.py exposes the trial, make_data_loaders and download_data; one
    trial per data form (grid search); the data come from pedl.get_download_data_dir()."""
    model = tmp_path / "keras_package"
    model.mkdir()
    (model / "__init__.py").write_text("import pedl.keras\n" + PACKAGE)
    raw = config(
        hyperparameters={
            "form": {"type": "categorical", "vals": FORMS},
            "learning_rate": {"type": "const", "val": 0.01},
        }
    )
    raw["searcher"] = {**raw["searcher"], "name": "grid"}
    reference = completes_and_resumes_exactly(cli, model, raw)
    assert len(reference["trials"]) == len(FORMS)
    for trial in reference["trials"]:
        assert set(trial["steps"][-1]["metrics"]) == {"loss", "accuracy"}
        assert {"val_loss", "val_accuracy"} <= set(trial["validations"][-1]["metrics"])


def test_a_single_file_model_definition_completes_and_resumes_exactly(cli: Cli, tmp_path: Path) -> None:
    """Seed 000's backward-compatible form: one Python file, no __init__.py, no entrypoint."""
    model = tmp_path / "keras_single"
    model.mkdir()
    (model / "model_def.py").write_text("import pedl.keras\n" + SINGLE_FILE)
    raw = config(hyperparameters={"learning_rate": {"type": "const", "val": 0.02}})
    completes_and_resumes_exactly(cli, model, raw)
