"""PEDL 0.10/0.11 model definitions, from their documentation: `pedl.frameworks.pytorch`'s
PyTorchTrial (build_model, optimizer, train_batch returning "loss", evaluate_batch or
evaluate_full_dataset), `reset_parameters`, `util.error_rate`, `data.DataLoader`/`TorchData`,
`pedl.get_trial_seed()`, `pedl.util.get_experiment_config()`, `pedl.get_download_data_dir()`,
and the `entrypoints:` config mapping with sibling-module imports."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pedl011_models import CONFIG, EVALUATE_FULL, write_pedl011_model

from pedl.config import ConfigError, parse_experiment_config
from pedl.config.test_mode import test_mode_config as minimal
from pedl.experimental import run_local
from pedl.harness.build import load_for_config
from pedl.model_def import ModelDefinitionError
from pedl.model_def.static_check import check_model_definition


def run(directory: Path, config: str = CONFIG, test: bool = True, verify: bool = True):
    parsed = parse_experiment_config(config)
    if test:
        parsed = minimal(parsed)
    model_def = load_for_config(directory, parsed.raw)
    return model_def, run_local(parsed, model_def, verify_restore=verify)


def test_a_pedl011_trial_trains_validates_and_restores_through_its_entrypoints(tmp_path) -> None:
    model_def, result = run(write_pedl011_model(tmp_path / "mnist"))
    assert result.state == "COMPLETED"
    trial = result.trials[0]
    assert [b for b, _ in trial.steps] == [2] and set(trial.steps[0][1]) == {"loss", "train_error"}
    assert set(trial.validations[-1][1]) == {"validation_error"}
    module = sys.modules[model_def.trial_class.__module__]
    calls = module.CALLS
    # build_model takes no hparams; the trial seed and the experiment config are reachable from it.
    name, seed, data = calls[0]
    assert name == "build_model" and isinstance(seed, int) and data == {"source": "generated"}
    assert ("optimizer", "Sequential") in calls
    trained = [c for c in calls if c[0] == "train_batch"]
    assert trained[:2] == [("train_batch", 0, 0), ("train_batch", 0, 1)]
    data_module = sys.modules[model_def.download_data.__module__]
    assert data_module.DOWNLOADS  # download_data_function ran before the data loaders


def test_batch_and_epoch_indices_run_on_across_epochs(tmp_path) -> None:
    model_def, result = run(write_pedl011_model(tmp_path / "epochs"), test=False)
    assert [b for b, _ in result.trials[0].steps] == [5, 10, 15]
    calls = [c for c in sys.modules[model_def.trial_class.__module__].CALLS if c[0] == "train_batch"]
    # 64 samples in batches of 8: 8 batches an epoch; batch_idx counts batches in all.
    assert calls[7] == ("train_batch", 0, 7) and calls[8] == ("train_batch", 1, 8)


def test_evaluate_full_dataset_replaces_evaluate_batch(tmp_path) -> None:
    _, result = run(write_pedl011_model(tmp_path / "full", evaluate=EVALUATE_FULL))
    assert result.trials[0].validations[-1][1]["batches"] == 8


def test_a_train_batch_without_loss_fails_naming_train_batch(tmp_path) -> None:
    model = write_pedl011_model(
        tmp_path / "noloss", train_return='return {"error": error_rate(output, labels)}'
    )
    with pytest.raises(ValueError, match=r"MNistTrial\.train_batch .*has no 'loss'"):
        run(model)


def test_a_train_batch_returning_a_list_fails_naming_train_batch(tmp_path) -> None:
    model = write_pedl011_model(
        tmp_path / "list", train_return="return [nn.functional.nll_loss(output, labels)]"
    )
    with pytest.raises(TypeError, match=r"MNistTrial\.train_batch .*must return a dict .*got list"):
        run(model)


def test_a_detached_loss_fails_naming_train_batch(tmp_path) -> None:
    model = write_pedl011_model(
        tmp_path / "detached", train_return='return {"loss": nn.functional.nll_loss(output, labels).detach()}'
    )
    with pytest.raises(TypeError, match=r"MNistTrial\.train_batch .*no gradient"):
        run(model)


def test_an_evaluate_batch_returning_a_tensor_fails_naming_evaluate_batch(tmp_path) -> None:
    model = write_pedl011_model(tmp_path / "evaltensor", evaluate_return="return error_rate(output, labels)")
    with pytest.raises(
        TypeError, match=r"MNistTrial\.evaluate_batch .*must return a dict of metrics, got Tensor"
    ):
        run(model)


def test_a_trial_without_evaluate_is_refused_naming_the_method(tmp_path) -> None:
    model = write_pedl011_model(tmp_path / "noeval", evaluate="pass")
    with pytest.raises(
        TypeError, match=r"does not implement the PyTorchTrial \(PEDL 0\.11\) method\(s\): evaluate_batch"
    ):
        run(model)


def test_a_pedl010_trial_with_losses_and_hparams_arguments_still_runs(tmp_path) -> None:
    model = tmp_path / "pedl010"
    model.mkdir()
    (model / "__init__.py").write_text(
        textwrap.dedent(
            """
            import torch
            from torch import nn
            from torch.utils.data import TensorDataset

            from pedl.frameworks.pytorch import PyTorchTrial
            from pedl.frameworks.pytorch.data import DataLoader
            from pedl.frameworks.pytorch.util import error_rate


            def make_data_loaders(experiment_config, hparams):
                x = torch.linspace(-1, 1, 32).reshape(16, 2)
                ds = TensorDataset(x, (x[:, 0] > 0).long())
                return DataLoader(ds, batch_size=4), DataLoader(ds, batch_size=4)


            class CIFARTrial(PyTorchTrial):
                def build_model(self, hparams):
                    return nn.Sequential(nn.Linear(2, 2), nn.LogSoftmax(dim=1))

                def optimizer(self, model, hparams):
                    return torch.optim.SGD(model.parameters(), lr=hparams["learning_rate"])

                def losses(self, predictions, labels):
                    return nn.functional.nll_loss(predictions, labels)

                def validation_metrics(self, predictions, labels, losses):
                    return {"validation_error": error_rate(predictions, labels)}
            """
        )
    )
    config = CONFIG.split("entrypoints:")[0] + "hyperparameters:" + CONFIG.split("hyperparameters:")[1]
    _, result = run(model, config)
    assert result.state == "COMPLETED"
    assert set(result.trials[0].validations[-1][1]) == {"loss", "validation_error"}


def test_a_config_mixing_entrypoints_and_entrypoint_is_refused_once() -> None:
    with pytest.raises(ConfigError) as err:
        parse_experiment_config(CONFIG + "entrypoint: model_def:MNistTrial\n")
    assert "entrypoints" in str(err.value) and "cannot be combined with entrypoint" in str(err.value)


def test_entrypoints_fields_are_checked() -> None:
    with pytest.raises(ConfigError, match="trial_klass"):
        parse_experiment_config(CONFIG.replace("trial_class:", "trial_klass:"))
    with pytest.raises(ConfigError, match="data_loaders_function"):
        parse_experiment_config(CONFIG.replace("data:make_data_loaders", "data make_data_loaders"))


def test_a_named_data_function_that_is_missing_is_named(tmp_path) -> None:
    model = write_pedl011_model(tmp_path / "missing")
    with pytest.raises(ModelDefinitionError, match="has no attribute 'make_loaders'"):
        run(model, CONFIG.replace("data:make_data_loaders", "data:make_loaders"))


def test_a_tensorpack_trial_is_refused_at_create_naming_the_class(tmp_path) -> None:
    model = tmp_path / "tensorpack"
    model.mkdir()
    (model / "model_def.py").write_text(
        "from pedl.frameworks.tensorpack import TensorpackTrial\n\n\n"
        "class MyTrial(TensorpackTrial):\n    pass\n"
    )
    with pytest.raises(ModelDefinitionError) as err:
        check_model_definition(model, "model_def:MyTrial")
    assert str(err.value).count("\n") == 0
    assert "model_def.py, line 4: class MyTrial derives from TensorpackTrial" in str(err.value)


def test_the_static_check_accepts_the_entrypoints_form(tmp_path) -> None:
    model = write_pedl011_model(tmp_path / "static")
    check_model_definition(model, parse_experiment_config(CONFIG).entrypoint)


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_pedl011_example_trains_in_test_mode_and_its_search_config_is_valid(tmp_path) -> None:
    model = shutil.copytree(EXAMPLES / "digits_pytorch_pedl011", tmp_path / "digits011")
    _, result = run(model, (model / "const.yaml").read_text())
    assert result.state == "COMPLETED"
    assert set(result.trials[0].validations[-1][1]) == {"validation_loss", "validation_error"}
    assert parse_experiment_config(str(model / "adaptive.yaml")).searcher_name == "adaptive_asha"


def test_the_cli_runs_the_entrypoints_config_locally_in_test_mode(tmp_path) -> None:
    model = shutil.copytree(EXAMPLES / "digits_pytorch_pedl011", tmp_path / "cli011")
    pedl_cli = Path(sys.executable).parent / "pedl"
    done = subprocess.run(
        [str(pedl_cli), "experiment", "create", str(model / "const.yaml"), str(model), "--local", "--test"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "COMPLETED" in done.stdout + done.stderr
