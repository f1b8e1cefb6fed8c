"""Loading a downloaded checkpoint back into its trial, as Determined's docs describe for
`det.pytorch.load_trial_from_checkpoint_path(path, **torch_load_kwargs)` (a restored instance of
the PyTorchTrial subclass; the bare model for the early `build_model` form) and
`det.keras.load_model_from_checkpoint_path(path)` (the trial's model with the checkpoint's
weights), and with pedl's `pedl.pytorch.load_trial_from_checkpoint_path` /
`pedl.keras.load_model_from_checkpoint_path` for PEDL 0.11 model definitions.

Each checkpoint is copied away and its model definition deleted before loading: the checkpoint
alone must be enough, as a checkpoint downloaded onto another machine is."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from determined_models import CONFIG, write_determined_model

from pedl.config import parse_experiment_config
from pedl.experimental import run_local
from pedl.harness.build import load_for_config
from pedl.harness.compat import ensure_determined_importable

ensure_determined_importable()

import determined as det  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def train(directory: Path, config: str, tmp_path: Path) -> tuple[Path, dict]:
    """Trains `directory` with `config`; returns its last checkpoint, "downloaded" elsewhere with the
    model definition gone, and the validation metrics reported at that checkpoint."""
    parsed = parse_experiment_config(config)
    result = run_local(parsed, load_for_config(directory, parsed.raw), checkpoint_dir=tmp_path / "store")
    assert result.state == "COMPLETED"
    trial = result.trials[0]
    stored = result.checkpoint_dir / f"trial-{trial.trial_id}" / trial.checkpoints[-1]
    downloaded = Path(shutil.copytree(stored, tmp_path / "downloaded"))
    shutil.rmtree(directory)
    return downloaded, trial.validations[-1][1]


def points() -> tuple[torch.Tensor, torch.Tensor]:
    """determined_models' dataset."""
    x = torch.linspace(-1, 1, 96).reshape(48, 2)
    return x, (x[:, 0] > x[:, 1]).long()


def test_a_context_trial_comes_back_with_its_trained_models_and_hyperparameters(tmp_path) -> None:
    path, metrics = train(write_determined_model(tmp_path / "ctx"), CONFIG, tmp_path)
    trial = det.pytorch.load_trial_from_checkpoint_path(str(path), map_location="cpu")
    assert type(trial).__name__ == "MyTrial"
    assert isinstance(trial, det.pytorch.PyTorchTrial)
    assert trial.context.get_hparam("hidden") == 6
    assert trial.context.get_data_config() == {"url": "http://127.0.0.1/data"}
    x, y = points()
    with torch.no_grad():
        error = float((trial.head(trial.model(x)).argmax(1) != y).float().mean())
    assert error == pytest.approx(metrics["validation_error"], abs=1e-6)


def test_the_early_form_gives_back_the_bare_model(tmp_path) -> None:
    config = CONFIG.replace("model_def:MyTrial", "early:EarlyTrial")
    path, _ = train(write_determined_model(tmp_path / "early"), config, tmp_path)
    model = det.pytorch.load_trial_from_checkpoint_path(str(path))
    assert isinstance(model, torch.nn.Linear)
    saved = torch.load(path / "model_state_dict.pt", weights_only=True)
    assert torch.equal(model.weight, saved["weight"])


def test_a_pedl011_trial_comes_back_with_its_trained_model(tmp_path) -> None:
    model_def = Path(shutil.copytree(EXAMPLES / "digits_pytorch_pedl011", tmp_path / "pedl011"))
    config = (model_def / "const.yaml").read_text().replace("max_steps: 10", "max_steps: 1")
    config = config.replace("batches_per_step: 45", "batches_per_step: 4")
    path, _ = train(model_def, config, tmp_path)
    from pedl.pytorch import load_trial_from_checkpoint_path

    trial = load_trial_from_checkpoint_path(path)
    assert type(trial).__name__ == "DigitsTrial"
    assert trial.hparams["n_filters"] == 8
    saved = torch.load(path / "model_state_dict.pt", weights_only=True)
    loaded = trial.model.state_dict()
    assert loaded.keys() == saved.keys()
    assert all(torch.equal(loaded[k], saved[k]) for k in saved)


def keras_accuracy(model, train: bool = False) -> float:
    from sklearn.datasets import load_digits

    images, labels = load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(labels))
    rows = order[len(labels) // 5 :] if train else order[: len(labels) // 5]
    logits = model.predict((images[rows] / 16.0).astype("float32"), verbose=0)
    return float((logits.argmax(1) == labels[rows]).mean())


def test_a_tfkeras_trial_comes_back_as_its_model_with_the_trained_weights(tmp_path) -> None:
    model_def = Path(shutil.copytree(EXAMPLES / "digits_determined_keras", tmp_path / "det_keras"))
    config = (model_def / "const.yaml").read_text().replace("batches: 450", "batches: 90")
    path, metrics = train(model_def, config, tmp_path)
    model = det.keras.load_model_from_checkpoint_path(str(path))
    assert keras_accuracy(model) == pytest.approx(metrics["val_accuracy"], abs=1e-6)
    with pytest.raises(ValueError, match="tags"):
        det.keras.load_model_from_checkpoint_path(str(path), tags=["serve"])


def test_a_pedl011_keras_trial_comes_back_as_its_model(tmp_path) -> None:
    model_def = Path(shutil.copytree(EXAMPLES / "digits_keras_pedl011", tmp_path / "keras011"))
    config = (model_def / "const.yaml").read_text().replace("max_steps: 10", "max_steps: 2")
    path, metrics = train(model_def, config, tmp_path)
    from pedl.keras import load_model_from_checkpoint_path

    model = load_model_from_checkpoint_path(path)
    assert keras_accuracy(model) == pytest.approx(metrics["val_accuracy"], abs=1e-6)


def test_a_checkpoint_of_another_framework_is_refused_naming_both(tmp_path) -> None:
    model_def = Path(shutil.copytree(EXAMPLES / "digits_determined_keras", tmp_path / "det_keras"))
    config = (model_def / "const.yaml").read_text().replace("batches: 450", "batches: 45")
    path, _ = train(model_def, config, tmp_path)
    with pytest.raises(ValueError, match=r"framework 'keras'.*reads 'pytorch'"):
        det.pytorch.load_trial_from_checkpoint_path(str(path))


def test_a_directory_that_is_no_checkpoint_is_refused(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match=r"not a pedl checkpoint .*metadata\.json"):
        det.pytorch.load_trial_from_checkpoint_path(str(tmp_path))


def test_the_python_client_finds_checkpoints_as_determined_documents() -> None:
    """`from determined.experimental import client`: login(master=...), get_experiment(id); TLS
    arguments, which pedl takes from PEDL_TLS_CA, are refused naming them."""
    from determined.experimental import client

    assert callable(client.get_experiment) and callable(client.login)
    with pytest.raises(ValueError, match=r"cert_path=/noverify="):
        client.login(master="127.0.0.1:1", cert_path="/tmp/ca.pem")
    with pytest.raises(ValueError, match="password"):
        client.login(master="127.0.0.1:1", user="determined")
    client.login(master=None)


def test_a_checkpoint_without_its_model_definition_loads_given_the_directory(tmp_path) -> None:
    """Checkpoints written before pedl kept the model definition in them: pedl's loader takes the
    model definition's directory; Determined's, which has no such argument, says so."""
    source = write_determined_model(tmp_path / "kept")
    model_def = Path(shutil.copytree(source, tmp_path / "elsewhere" / "ctx_model"))
    path, _ = train(source, CONFIG, tmp_path)
    shutil.rmtree(path / "model_definition")
    for name in [m for m in sys.modules if m == "kept" or m.startswith("kept.")]:
        del sys.modules[name]  # as in a fresh process
    with pytest.raises(ImportError, match="model_definition_dir="):
        det.pytorch.load_trial_from_checkpoint_path(str(path))
    from pedl.pytorch import load_trial_from_checkpoint_path

    trial = load_trial_from_checkpoint_path(path, model_definition_dir=model_def)
    assert trial.context.get_hparam("hidden") == 6
    saved = torch.load(path / "model_state_dict.pt", weights_only=True)
    assert all(torch.equal(trial.model.state_dict()[k], saved[k]) for k in saved)
